//! The Approval stage: passes planned calls on in index order; a call that needs the host's
//! decision is asked about (or decided from remembered decisions) first, and the calls behind
//! it wait, without blocking the thread.
//!
//! Extension point: [`ApprovalActor::decide_now`] is where a call's gate is settled without
//! asking; a rule that refuses or approves by policy belongs there.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use tokio::sync::oneshot;
use toolslot::event::{ApprovalDecision, PipelineEvent};
use toolslot::plan::Action;
use toolslot::plan::approval::{Gate, SessionApprovals};
use toolslot::tool::{ApprovalRequirement, ErrorCategory, ToolError};

use crate::batch_executor::BatchExecutorActor;
use crate::chain::{Planned, RoundClose, RoundNo, Ticket};
use crate::session::{SessionShared, Stage};
use crate::stage::guarded;

/// What the host answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostDecision {
    /// Run this call.
    Approve,
    /// Run it and later calls with the same approval key.
    ApproveForSession,
    /// Do not run it.
    Reject,
}

/// The host's answer for call `index`.
#[derive(Message)]
#[rtype(result = "Result<(), NotWaiting>")]
pub struct Answer {
    /// The call.
    pub index: usize,
    /// The decision.
    pub decision: HostDecision,
}

/// Nothing waits for a decision on that call.
#[derive(Debug, Clone, thiserror::Error)]
#[error("no approval is waiting for call {0}")]
pub struct NotWaiting(pub usize);

/// Drop every pending question (the round was cancelled or the session closed).
#[derive(Message)]
#[rtype(result = "()")]
pub struct DropPending;

/// Owns the session's remembered decisions and the question in flight.
pub struct ApprovalActor {
    shared: Arc<SessionShared>,
    executor: Addr<BatchExecutorActor>,
    approvals: SessionApprovals,
    /// Messages waiting behind a question, in order.
    queue: VecDeque<Planned>,
    /// The call the host is being asked about, with the message it came in (whose earlier
    /// calls were sent on; the rest wait in it).
    asking: Option<Asking>,
}

struct Asking {
    /// The message the call came from, less what was already sent on.
    msg: Planned,
    /// The call asked about (taken out of `msg`).
    ticket: Ticket,
    /// Where the host's answer goes.
    answer: Option<oneshot::Sender<HostDecision>>,
}

impl ApprovalActor {
    /// A stage for `shared`'s session, forwarding to `executor`.
    pub fn new(shared: Arc<SessionShared>, executor: Addr<BatchExecutorActor>) -> Self {
        // A session taken over from another dispatcher keeps what its user decided.
        let approvals = shared.durable.get().map(|d| d.restored_approvals()).unwrap_or_default();
        Self {
            shared,
            executor,
            approvals,
            queue: VecDeque::new(),
            asking: None,
        }
    }

    /// Settles a call without asking, when it can be: it needs no decision, or an earlier
    /// decision of the session covers it. Returns whether the host must be asked.
    fn decide_now(&mut self, ticket: &mut Ticket) -> bool {
        let Action::Run {
            gate: Gate::Ask(_),
            approval_key,
            ..
        } = &ticket.action
        else {
            return false;
        };
        match self
            .approvals
            .cached(&ticket.head.name, &ticket.head.input, approval_key, ticket.trace.sticky)
        {
            Some(decision) => {
                self.shared.emit(PipelineEvent::ApprovalDecided {
                    index: ticket.head.index,
                    id: Arc::clone(&ticket.head.id),
                    decision,
                });
                apply(ticket, decision);
                false
            }
            None => true,
        }
    }

    /// Moves `msg`'s calls on until one needs the host; then asks, and keeps the rest.
    fn run(&mut self, mut msg: Planned, ctx: &mut Context<Self>) {
        let shared = Arc::clone(&self.shared);
        let mut calls = std::mem::take(&mut msg.calls).into_iter();
        let mut passed = Vec::with_capacity(calls.len());
        while let Some(mut ticket) = calls.next() {
            // Remembered decisions are the slot's: inside the boundary, per call, so that a
            // failure leaves every call in hand.
            match guarded::<Self, _>(Stage::Approval, &shared, ctx, || self.decide_now(&mut ticket)) {
                Ok(false) => passed.push(ticket),
                Ok(true) => {
                    msg.calls = calls.collect();
                    self.send(msg.round, passed, None, false);
                    return self.ask(msg, ticket, ctx);
                }
                Err(_) => {
                    msg.calls = passed.into_iter().chain(std::iter::once(ticket)).chain(calls).collect();
                    return self.failed(msg);
                }
            }
        }
        self.send(msg.round, passed, msg.end, msg.closes);
    }

    fn send(&self, round: RoundNo, calls: Vec<Ticket>, end: Option<RoundClose>, closes: bool) {
        if !calls.is_empty() || end.is_some() || closes {
            self.executor.do_send(Planned { round, calls, end, closes });
        }
    }

    /// Asks the host about `ticket`; silence (timeout, cancellation, a closed session) is a
    /// rejection: nothing runs that nobody approved.
    fn ask(&mut self, msg: Planned, ticket: Ticket, ctx: &mut Context<Self>) {
        let requirement = match ticket.action {
            Action::Run { requirement, .. } => requirement,
            Action::Refuse(_) => ApprovalRequirement::Required,
        };
        let (tx, rx) = oneshot::channel();
        self.shared.emit(PipelineEvent::ApprovalRequired {
            index: ticket.head.index,
            id: Arc::clone(&ticket.head.id),
            name: Arc::clone(&ticket.head.name),
            requirement,
            input: Arc::clone(&ticket.head.input),
        });
        self.asking = Some(Asking {
            msg,
            ticket,
            answer: Some(tx),
        });
        let timeout = self.shared.config.approval_timeout_ms();
        let mut cancel = self.shared.cancel.subscribe();
        let wait = async move {
            let answer = async {
                if timeout == 0 {
                    rx.await.ok()
                } else {
                    tokio::time::timeout(Duration::from_millis(timeout), rx)
                        .await
                        .ok()
                        .and_then(Result::ok)
                }
            };
            tokio::select! {
                a = answer => a,
                _ = cancel.wait_for(|c| *c) => None,
            }
        };
        ctx.spawn(wait.into_actor(self).map(|answer, act, ctx| act.answered(answer, ctx)));
    }

    fn answered(&mut self, answer: Option<HostDecision>, ctx: &mut Context<Self>) {
        let Some(Asking { msg, mut ticket, .. }) = self.asking.take() else {
            return;
        };
        let decision = match answer {
            Some(HostDecision::Approve) => ApprovalDecision::Approved,
            Some(HostDecision::ApproveForSession) => ApprovalDecision::ApprovedForSession,
            Some(HostDecision::Reject) | None => ApprovalDecision::Rejected,
        };
        let shared = Arc::clone(&self.shared);
        let approvals = &mut self.approvals;
        let recorded = guarded::<Self, _>(Stage::Approval, &shared, ctx, || {
            if let Action::Run { approval_key, .. } = &ticket.action {
                approvals.record(decision, &ticket.head.name, &ticket.head.input, approval_key);
            }
        });
        if recorded.is_err() {
            let mut msg = msg;
            msg.calls.insert(0, ticket);
            return self.failed(msg);
        }
        if let Some(d) = self.shared.durable.get() {
            d.approvals(&self.approvals);
        }
        self.shared.emit(PipelineEvent::ApprovalDecided {
            index: ticket.head.index,
            id: Arc::clone(&ticket.head.id),
            decision,
        });
        apply(&mut ticket, decision);
        self.send(msg.round, vec![ticket], None, false);
        // What waited behind the question goes on: the rest of its message, then the queue.
        let mut next = Some(msg);
        while self.asking.is_none() {
            let Some(msg) = next.take().or_else(|| self.queue.pop_front()) else {
                return;
            };
            self.run(msg, ctx);
        }
    }

    /// The stage failed: every call it holds is refused (fail closed: nothing runs that the
    /// approval stage did not pass), in order, and the rounds' ends go on behind them.
    fn failed(&mut self, msg: Planned) {
        let held: Vec<Planned> = self
            .asking
            .take()
            .map(|a| {
                let mut m = a.msg;
                m.calls.insert(0, a.ticket);
                m
            })
            .into_iter()
            .chain(std::mem::take(&mut self.queue))
            .chain(std::iter::once(msg))
            .collect();
        for mut m in held {
            for t in &mut m.calls {
                if matches!(t.action, Action::Run { .. }) {
                    t.action = Action::Refuse(ToolError::refused(
                        ErrorCategory::NotApproved,
                        "Not approved: the approval stage failed, so nothing was run.",
                    ));
                }
            }
            self.send(m.round, m.calls, m.end, m.closes);
        }
    }
}

/// Turns a rejection into the call's refusal.
fn apply(ticket: &mut Ticket, decision: ApprovalDecision) {
    if matches!(decision, ApprovalDecision::Rejected | ApprovalDecision::CachedRejection) {
        ticket.action = Action::Refuse(ToolError::refused(
            ErrorCategory::NotApproved,
            format!(
                "Not approved: the user did not approve `{}`; nothing was run. Do not retry it unchanged; ask the user or do something else.",
                ticket.head.name
            ),
        ));
    }
}

impl Actor for ApprovalActor {
    type Context = Context<Self>;
}

impl Supervised for ApprovalActor {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        // The question in flight died with the old context; its call was refused when the
        // failure was handled.
        self.asking = None;
    }
}

impl Handler<Planned> for ApprovalActor {
    type Result = ();
    fn handle(&mut self, msg: Planned, ctx: &mut Context<Self>) {
        let shared = Arc::clone(&self.shared);
        if guarded::<Self, _>(Stage::Approval, &shared, ctx, || shared.trip(Stage::Approval)).is_err() {
            return self.failed(msg);
        }
        if self.asking.is_some() {
            self.queue.push_back(msg);
        } else if msg.calls.iter().any(|t| matches!(t.action, Action::Run { gate: Gate::Ask(_), .. })) {
            self.run(msg, ctx);
        } else {
            // Nothing to decide: the message goes on as it is.
            self.send(msg.round, msg.calls, msg.end, msg.closes);
        }
    }
}

impl Handler<Answer> for ApprovalActor {
    type Result = Result<(), NotWaiting>;
    fn handle(&mut self, msg: Answer, _ctx: &mut Context<Self>) -> Self::Result {
        match self.asking.as_mut() {
            Some(a) if a.ticket.head.index == msg.index => match a.answer.take() {
                Some(tx) => tx.send(msg.decision).map_err(|_| NotWaiting(msg.index)),
                None => Err(NotWaiting(msg.index)),
            },
            _ => Err(NotWaiting(msg.index)),
        }
    }
}

impl Handler<DropPending> for ApprovalActor {
    type Result = ();
    fn handle(&mut self, _msg: DropPending, _ctx: &mut Context<Self>) {
        // The wait sees its sender dropped: a rejection.
        if let Some(a) = self.asking.as_mut() {
            a.answer = None;
        }
    }
}
