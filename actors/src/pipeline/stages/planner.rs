//! The Planner stage: truncation gate, names, validation, loop guard, approval policy (one
//! slot call, [`plan_call`], per call, in index order); then calls that may start early go
//! straight to the executor, the rest to the approval stage, with the round's end behind them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use actix::prelude::*;
use toolslot::event::PipelineEvent;
use toolslot::notice::{Notice, NoticeKind};
use toolslot::plan::{Action, PlanContext, PlannedCall, parses_strictly, plan_call};
use toolslot::stream::{RawCall, RoundEnd, StopReason};
use toolslot::tool::{ErrorCategory, ToolError};

use crate::pipeline::chain::{Assembled, CallHead, Planned, RoundClose, Speculate, Ticket};
use crate::pipeline::session::{SessionShared, Stage};
use crate::pipeline::stage::guarded;

/// Plans calls, consulting the session's loop guard ([`SessionShared::guard`]).
pub struct PlannerActor {
    shared: Arc<SessionShared>,
    approval: Recipient<Planned>,
    executor: Recipient<Speculate>,
    round: RoundState,
    /// No round of the running submission has ended yet. Only then may a call start early: a
    /// body that holds several messages is a transcript, each message written after the one
    /// before it had its results, so a call of a later message must not run ahead of an
    /// earlier message's call that waits (for approval, for its round's end). Its calls take
    /// the ordered path behind the earlier round's, and so are tied to their own round.
    first_round: bool,
    /// The tool names of recent calls, shared: a round usually calls few tools, often the
    /// same one many times, and each call's name is then a reference, not a copy.
    names: Vec<Arc<str>>,
}

/// How many names [`PlannerActor::names`] keeps.
const NAMES_KEPT: usize = 16;

/// What the planner knows of the round in progress.
struct RoundState {
    /// Complete calls not planned yet, by index.
    ready: BTreeMap<usize, RawCall>,
    /// The next index to plan.
    next: usize,
    /// Every call so far started early: a later call may only start early while this holds,
    /// so nothing runs ahead of an earlier call that must wait.
    leading_batch_open: bool,
    /// The planner failed during this round: the indices answered so far (every later call
    /// of the round is refused).
    failed: Option<BTreeSet<usize>>,
}

impl Default for RoundState {
    fn default() -> Self {
        Self {
            ready: BTreeMap::new(),
            next: 0,
            leading_batch_open: true,
            failed: None,
        }
    }
}

/// What planning one message decided, ready to be sent on.
#[derive(Default)]
struct Decided {
    early: Vec<Ticket>,
    tickets: Vec<Ticket>,
}

impl PlannerActor {
    /// A stage for `shared`'s session, forwarding to `approval` (and early calls to
    /// `executor`).
    pub fn new(shared: Arc<SessionShared>, approval: Recipient<Planned>, executor: Recipient<Speculate>) -> Self {
        Self {
            shared,
            approval,
            executor,
            round: RoundState::default(),
            first_round: true,
            names: Vec::new(),
        }
    }

    /// Plans the calls that can be planned now, in index order. Before the round ends (`stop`
    /// is `None`) only calls whose arguments parse strictly are planned: whether the others may
    /// be repaired depends on the stop reason, which is not known yet.
    fn plan(&mut self, stop: Option<StopReason>, out: &mut Decided) {
        let round = &mut self.round;
        let mut calls = Vec::new();
        while let Some(call) = round.ready.get(&(round.next + calls.len())) {
            if stop.is_none() && !parses_strictly(&call.arguments) {
                break;
            }
            let index = call.index;
            if let Some(call) = round.ready.remove(&index) {
                calls.push(call);
            }
        }
        self.plan_run(&calls, stop, out);
    }

    /// Plans consecutive calls, the next ones of the round, in one go.
    fn plan_run(&mut self, calls: &[RawCall], stop: Option<StopReason>, out: &mut Decided) {
        if calls.is_empty() {
            return;
        }
        let round = &mut self.round;
        let shared = &self.shared;
        let names = &mut self.names;
        let first_round = self.first_round;
        let cut = stop == Some(StopReason::MaxTokens);
        // The catalog is read in place (a clone would count references every session shares).
        shared.memory.with_catalog(|catalog| {
            let plan_ctx = PlanContext {
                registry: catalog.registry(),
                catalog,
                config: &shared.config,
                mode: shared.mode,
                services: Some(shared.memory.as_ref()),
                policy: &shared.policy,
                workspace: &shared.workspace,
            };
            let mut guard = shared.guard();
            for call in calls {
                let planned = plan_call(plan_ctx, call, cut, &mut guard);
                if matches!(planned.action, Action::Run { .. }) && !call.text_before.is_empty() {
                    shared.remember_text(&call.id, &call.text_before);
                }
                round.next += 1;
                let early = matches!(planned.action, Action::Run { speculative: true, .. })
                    && stop.is_none()
                    && round.leading_batch_open
                    && first_round;
                let ticket = announce(shared, names, planned);
                if early {
                    out.early.push(ticket);
                } else {
                    round.leading_batch_open = false;
                    out.tickets.push(ticket);
                }
            }
        });
    }

    /// The round's end: everything left is planned; an index the assembler never reported (a
    /// failed stage) still gets a result, and does not stop the calls after it. Returns the
    /// round's call count. The end's text stays in it, for the message that carries it on.
    fn end(&mut self, end: &mut RoundEnd, out: &mut Decided) -> usize {
        for call in std::mem::take(&mut end.unfinished) {
            self.round.ready.insert(call.index, call);
        }
        let call_count = end.call_count.max(self.round.next + self.round.ready.len());
        loop {
            self.plan(Some(end.stop_reason), out);
            if self.round.ready.is_empty() && self.round.next >= call_count {
                break;
            }
            out.tickets.push(lost(self.round.next));
            self.round.next += 1;
        }
        if end.stop_reason == StopReason::MaxTokens && call_count > 0 {
            self.shared.notice(Notice::new(
                NoticeKind::RoundTruncated,
                "the model's output was cut at its limit; calls with incomplete arguments were not run",
            ));
        }
        call_count
    }

    /// The planner failed on this round: every call it holds or still receives for the round
    /// is refused (nothing of the failed message was sent on), and the round's end still goes
    /// down the chain, with a result for every index.
    fn refuse_held(&mut self, first: usize, msg: &mut Assembled, out: Decided) -> (Vec<Ticket>, Option<usize>) {
        let refusal = || {
            ToolError::refused(
                ErrorCategory::Unavailable,
                "Not run: the planner failed on this call and was restarted; nothing was run. You may send the call again.",
            )
        };
        let mut tickets: Vec<Ticket> = out
            .early
            .into_iter()
            .chain(out.tickets)
            .map(|t| match t.action {
                // A refusal decided before the failure keeps its own reason.
                Action::Refuse(_) => t,
                Action::Run { .. } => Ticket::refused(t.head, refusal()),
            })
            .collect();
        let raw = std::mem::take(&mut self.round.ready)
            .into_values()
            .chain(std::mem::take(&mut msg.calls))
            .chain(msg.end.as_mut().map(|e| std::mem::take(&mut e.unfinished)).unwrap_or_default());
        for call in raw {
            let head = CallHead {
                index: call.index,
                id: call.id.into(),
                name: call.name.into(),
                input: Arc::new(serde_json::Value::Object(Default::default())),
                repair: toolslot::event::RepairMark::None,
            };
            tickets.push(Ticket::refused(head, refusal()));
        }
        // Earlier messages of the round were sent on whole: indices below `first` are answered.
        let covered = self.round.failed.get_or_insert_with(|| (0..first).collect());
        tickets.retain(|t| covered.insert(t.head.index));
        let call_count = msg.end.as_ref().map(|end| {
            let count = end.call_count.max(covered.last().map_or(0, |i| i + 1));
            for index in 0..count {
                if !covered.contains(&index) {
                    tickets.push(lost(index));
                }
            }
            count
        });
        tickets.sort_by_key(|t| t.head.index);
        (tickets, call_count)
    }
}

/// Tells the host what was planned for a call (its notices, `call_assembled`) and makes the
/// call's shared identity.
fn announce(shared: &SessionShared, names: &mut Vec<Arc<str>>, planned: PlannedCall) -> Ticket {
    let PlannedCall {
        index,
        id,
        called,
        name,
        input,
        repair,
        notices,
        thought_signature,
        action,
        trace,
    } = planned;
    for n in notices {
        shared.notice(n);
    }
    let id: Arc<str> = id.into();
    let name: Arc<str> = match names.iter().find(|n| ***n == *name) {
        Some(n) => Arc::clone(n),
        None => {
            let n: Arc<str> = name.into();
            if names.len() == NAMES_KEPT {
                names.remove(0);
            }
            names.push(Arc::clone(&n));
            n
        }
    };
    let called: Arc<str> = if *called == *name { Arc::clone(&name) } else { called.into() };
    let input = Arc::new(input);
    shared.emit(PipelineEvent::CallAssembled {
        index,
        id: Arc::clone(&id),
        name: called,
        input: Arc::clone(&input),
        repair,
        thought_signature,
    });
    Ticket {
        head: CallHead {
            index,
            id,
            name,
            input,
            repair,
        },
        action,
        trace,
    }
}

/// A placeholder for a call no stage could report.
fn lost(index: usize) -> Ticket {
    Ticket::refused(
        CallHead {
            index,
            id: format!("call_{index}").into(),
            name: "".into(),
            input: Arc::new(serde_json::Value::Object(Default::default())),
            repair: toolslot::event::RepairMark::None,
        },
        ToolError::refused(
            ErrorCategory::Unavailable,
            "Not run: this call was lost when a pipeline stage failed. Send it again.",
        ),
    )
}

impl Actor for PlannerActor {
    type Context = Context<Self>;
}

impl Supervised for PlannerActor {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        // The loop guard is session state, not round state: it lives on in the session. The
        // round's state was settled when the failure was handled.
    }
}

impl Handler<Assembled> for PlannerActor {
    type Result = ();
    fn handle(&mut self, mut msg: Assembled, ctx: &mut Context<Self>) {
        let shared = Arc::clone(&self.shared);
        let span = crate::pipeline::stage::span!("plan", session = %shared.id, round = msg.round.0, calls = msg.calls.len());
        let _entered = span.enter();
        let first = self.round.next;
        let mut out = Decided::default();
        // Calls move into the round's state inside the boundary; on a failure, whatever was
        // not sent on is still in `msg`, in the state or in `out`.
        let planned = if self.round.failed.is_some() {
            None
        } else {
            guarded::<Self, _>(Stage::Planner, &shared, ctx, || {
                shared.trip(Stage::Planner);
                let stop = msg.end.as_ref().map(|e| e.stop_reason);
                // The usual case: the message holds the round's next calls, in order, and
                // each can be planned now. They are planned from the message itself (and stay
                // in it until planned, for a failure to answer).
                let next = self.round.next;
                let in_order = self.round.ready.is_empty()
                    && msg.end.as_ref().is_none_or(|e| e.unfinished.is_empty())
                    && msg
                        .calls
                        .iter()
                        .enumerate()
                        .all(|(k, c)| c.index == next + k && (stop.is_some() || parses_strictly(&c.arguments)));
                if in_order {
                    self.plan_run(&msg.calls, stop, &mut out);
                    msg.calls.clear();
                } else {
                    for call in std::mem::take(&mut msg.calls) {
                        self.round.ready.insert(call.index, call);
                    }
                }
                match msg.end.as_mut() {
                    Some(end) => Some(self.end(end, &mut out)),
                    None => {
                        self.plan(None, &mut out);
                        None
                    }
                }
            })
            .ok()
        };
        let (tickets, call_count) = match planned {
            Some(call_count) => {
                if !out.early.is_empty() {
                    self.executor.do_send(Speculate {
                        round: msg.round,
                        calls: out.early,
                    });
                }
                (out.tickets, call_count)
            }
            None => self.refuse_held(first, &mut msg, out),
        };
        let end = msg.end.map(|end| RoundClose {
            stop_reason: end.stop_reason,
            text: end.text,
            call_count: call_count.unwrap_or(end.call_count),
        });
        if end.is_some() {
            self.round = RoundState::default();
            self.first_round = false;
        }
        if msg.closes {
            self.first_round = true;
        }
        if !tickets.is_empty() || end.is_some() || msg.closes {
            self.approval.do_send(Planned {
                round: msg.round,
                calls: tickets,
                end,
                closes: msg.closes,
            });
        }
    }
}
