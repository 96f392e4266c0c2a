//! The Approval stage: passes planned calls on in index order; a call that needs the host's
//! decision is asked about (or decided from remembered decisions) first, and the calls behind
//! it wait, without blocking the thread.
//!
//! A call a `pre_tool_use` hook applies to is shown to its hooks first ([`crate::pipeline::hooking`]),
//! as a task of its own; the calls behind it wait likewise. Extension point:
//! [`ApprovalActor::decide_now`] is where a call's gate is settled without asking.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use tokio::sync::oneshot;
use toolslot::event::{ApprovalDecision, PipelineEvent};
use toolslot::ledger::Source;
use toolslot::notice::{Notice, NoticeKind};
use toolslot::plan::Action;
use toolslot::plan::approval::{Gate, Remembered, SessionApprovals};
use toolslot::tool::{ApprovalRequirement, ErrorCategory, ToolError};

use crate::pipeline::chain::{DropPending, Planned, RoundClose, RoundNo, Ticket};
use crate::pipeline::session::{SessionShared, Stage};
use crate::pipeline::stage::guarded;

/// What the host answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostDecision {
    /// Run this call.
    Approve,
    /// Run it and later calls with the same approval key.
    ApproveForSession,
    /// Run it and later calls with the same approval key, in this session and (an allow rule
    /// written into the project's policy file) in later sessions of the workspace.
    ApproveForProject,
    /// Do not run it.
    Reject,
    /// Do not run it, nor later calls with the same approval key in this session.
    RejectForSession,
}

impl HostDecision {
    /// The decision as the API spells it (`approve`, `approve_for_session`, …).
    pub fn parse(word: &str) -> Option<Self> {
        Some(match word {
            "approve" => Self::Approve,
            "approve_for_session" => Self::ApproveForSession,
            "approve_for_project" => Self::ApproveForProject,
            "reject" => Self::Reject,
            "reject_for_session" => Self::RejectForSession,
            _ => return None,
        })
    }

    /// The event's word for it.
    fn decided(self) -> ApprovalDecision {
        match self {
            Self::Approve => ApprovalDecision::Approved,
            Self::ApproveForSession => ApprovalDecision::ApprovedForSession,
            Self::ApproveForProject => ApprovalDecision::ApprovedForProject,
            Self::Reject => ApprovalDecision::Rejected,
            Self::RejectForSession => ApprovalDecision::RejectedForSession,
        }
    }
}

/// The API's words for the host's decisions, for error messages.
pub const HOST_DECISIONS: &str = "approve, approve_for_session, approve_for_project, reject or reject_for_session";

/// How a wait for the host ended.
enum Waited {
    /// The host answered.
    Answered(HostDecision),
    /// `approval.timeout_ms` passed.
    Expired(u64),
    /// The question was dropped (round cancelled, session closed): nothing runs.
    Dropped,
}

/// A call waiting for the host, as `GET …/approvals/pending` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Pending {
    /// The call's index in its response.
    pub index: usize,
    /// The provider's call id.
    pub id: String,
    /// The tool.
    pub tool: String,
    /// `suggest` or `required`.
    pub requirement: ApprovalRequirement,
    /// The input that runs if approved.
    pub input: serde_json::Value,
    /// The assistant's text before the call, what led to it.
    pub text_before: String,
    /// When it was asked (ms since the Unix epoch).
    pub asked_at_ms: u64,
    /// When it expires (ms since the Unix epoch), `None` when it waits for ever.
    pub deadline_ms: Option<u64>,
    /// Why a rule or hook asks, when one does.
    pub reason: Option<String>,
    /// The question's number (its `approval_required`'s `request`), to send with the answer.
    pub request: u64,
}

/// The call waiting for the host, if any.
#[derive(Message)]
#[rtype(result = "Option<Pending>")]
pub struct GetPending;

/// The session's remembered decisions.
#[derive(Message)]
#[rtype(result = "Vec<Remembered>")]
pub struct GetRemembered;

/// Forget remembered decisions: the one under `key`, or all (`None`). Answers how many were
/// forgotten.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct Revoke {
    /// The key, or every one.
    pub key: Option<String>,
}

/// The host's answer for call `index`.
#[derive(Message)]
#[rtype(result = "Result<(), Unanswerable>")]
pub struct Answer {
    /// The call.
    pub index: usize,
    /// The question (its `approval_required`'s `request`), when the host names it.
    pub request: Option<u64>,
    /// The decision.
    pub decision: HostDecision,
}

/// Why an answer reached no question.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Unanswerable {
    /// Nothing waits for a decision on that call (or not that question).
    #[error("no approval is waiting for call {0}")]
    NotWaiting(usize),
    /// More than one question of the session has had this index, and the answer did not say
    /// which it answers: it might have been meant for one that ended (expired, cancelled).
    #[error(
        "{asked} questions of this session have asked about call {index}: name the one you answer (the `request` of its approval_required event)"
    )]
    NeedsRequest {
        /// The call's index.
        index: usize,
        /// How many questions have had that index.
        asked: u64,
    },
}

/// Owns the session's remembered decisions and the question in flight.
pub struct ApprovalActor {
    shared: Arc<SessionShared>,
    executor: Recipient<Planned>,
    approvals: SessionApprovals,
    /// Messages waiting behind a question, in order.
    queue: VecDeque<Planned>,
    /// The call the host is being asked about, with the message it came in (whose earlier
    /// calls were sent on; the rest wait in it).
    asking: Option<Asking>,
    /// Questions asked so far in the session: each gets the next number.
    asked: u64,
    /// Questions asked so far, by call index: an answer that does not name its question is
    /// refused once two have had its index (a round's calls are few, so this stays small).
    asked_at: std::collections::HashMap<usize, u64>,
    /// The call whose pre_tool_use hooks are running, with its message (as for `asking`).
    hooking: Option<(Planned, Ticket)>,
}

struct Asking {
    /// The question's number in the session.
    request: u64,
    /// The message the call came from, less what was already sent on.
    msg: Planned,
    /// The call asked about (taken out of `msg`).
    ticket: Ticket,
    /// Where the host's answer goes.
    answer: Option<oneshot::Sender<HostDecision>>,
    /// What `GET …/approvals/pending` shows.
    pending: Pending,
}

impl ApprovalActor {
    /// A stage for `shared`'s session, forwarding to `executor`.
    pub fn new(shared: Arc<SessionShared>, executor: Recipient<Planned>) -> Self {
        // A session taken over from another dispatcher keeps what its user decided.
        let approvals = shared.durable.get().map(|d| d.restored_approvals()).unwrap_or_default();
        Self {
            shared,
            executor,
            approvals,
            queue: VecDeque::new(),
            asking: None,
            asked: 0,
            asked_at: std::collections::HashMap::new(),
            hooking: None,
        }
    }

    /// A call is held (its hooks run, or the host is asked): later messages wait.
    fn busy(&self) -> bool {
        self.asking.is_some() || self.hooking.is_some()
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
                ticket.trace.source = Some(Source::Host);
                ticket.trace.reason = Some(word(decision).into());
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
            if crate::pipeline::hooking::needs_pre(&shared, &ticket) {
                msg.calls = calls.collect();
                self.send(msg.round, passed, None, false);
                return self.hook(msg, ticket, ctx);
            }
            // Remembered decisions are the slot's: inside the boundary, per call, so that a
            // failure leaves every call in hand.
            match guarded::<Self, _>(Stage::Approval, &shared, ctx, || self.decide_now(&mut ticket)) {
                Ok(false) => passed.push(ticket),
                // Nobody is left to answer: refused as cancelled, without a question.
                Ok(true) if shared.is_cancelled() => {
                    ticket.action = Action::Refuse(cancelled_waiting(&ticket.head.name));
                    passed.push(ticket);
                }
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

    /// Runs `ticket`'s pre_tool_use hooks as a task of its own; the calls behind it wait.
    fn hook(&mut self, msg: Planned, ticket: Ticket, ctx: &mut Context<Self>) {
        let run = crate::pipeline::hooking::run_pre(Arc::clone(&self.shared), ticket.head.clone());
        self.hooking = Some((msg, ticket));
        ctx.spawn(run.into_actor(self).map(|verdict, act, ctx| act.hooked(verdict, ctx)));
    }

    /// The hooks answered: their verdict is applied, then the call is decided as any other
    /// (remembered decisions, the host), and what waited behind it goes on.
    fn hooked(&mut self, verdict: toolslot::hooks::PreVerdict, ctx: &mut Context<Self>) {
        let Some((msg, mut ticket)) = self.hooking.take() else {
            return;
        };
        let shared = Arc::clone(&self.shared);
        let decided = guarded::<Self, _>(Stage::Approval, &shared, ctx, || {
            crate::pipeline::hooking::apply(&shared, &mut ticket, &verdict);
            self.decide_now(&mut ticket)
        });
        match decided {
            Ok(false) => {
                self.send(msg.round, vec![ticket], None, false);
                self.go_on(msg, ctx);
            }
            Ok(true) => self.ask(msg, ticket, ctx),
            Err(_) => {
                let mut msg = msg;
                msg.calls.insert(0, ticket);
                self.failed(msg);
            }
        }
    }

    /// What waited behind a held call goes on: the rest of its message, then the queue.
    fn go_on(&mut self, msg: Planned, ctx: &mut Context<Self>) {
        let mut next = Some(msg);
        while !self.busy() {
            let Some(msg) = next.take().or_else(|| self.queue.pop_front()) else {
                return;
            };
            self.run(msg, ctx);
        }
        if let Some(msg) = next {
            self.queue.push_front(msg);
        }
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
        self.asked += 1;
        let request = self.asked;
        *self.asked_at.entry(ticket.head.index).or_default() += 1;
        let (tx, rx) = oneshot::channel();
        self.shared.emit(PipelineEvent::ApprovalRequired {
            index: ticket.head.index,
            id: Arc::clone(&ticket.head.id),
            name: Arc::clone(&ticket.head.name),
            requirement,
            input: Arc::clone(&ticket.head.input),
            request,
        });
        let timeout = self.shared.config.approval_timeout_ms();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let pending = Pending {
            index: ticket.head.index,
            id: ticket.head.id.to_string(),
            tool: ticket.head.name.to_string(),
            requirement,
            input: (*ticket.head.input).clone(),
            text_before: self.shared.text_before(&ticket.head.id),
            asked_at_ms: now,
            deadline_ms: (timeout > 0).then(|| now + timeout),
            reason: ticket.trace.reason.clone(),
            request,
        };
        self.asking = Some(Asking {
            request,
            msg,
            ticket,
            answer: Some(tx),
            pending,
        });
        let mut cancel = self.shared.cancel.subscribe();
        let wait = async move {
            let answer = async {
                if timeout == 0 {
                    rx.await.map_or(Waited::Dropped, Waited::Answered)
                } else {
                    match tokio::time::timeout(Duration::from_millis(timeout), rx).await {
                        Ok(Ok(a)) => Waited::Answered(a),
                        Ok(Err(_)) => Waited::Dropped,
                        Err(_) => Waited::Expired(timeout),
                    }
                }
            };
            tokio::select! {
                a = answer => a,
                _ = cancel.wait_for(|c| *c) => Waited::Dropped,
            }
        };
        ctx.spawn(wait.into_actor(self).map(|answer, act, ctx| act.answered(answer, ctx)));
    }

    fn answered(&mut self, answer: Waited, ctx: &mut Context<Self>) {
        let asked_at_ms = self.asking.as_ref().map_or(0, |a| a.pending.asked_at_ms);
        let Some(Asking { msg, mut ticket, .. }) = self.asking.take() else {
            return;
        };
        crate::pipeline::stage::approval_waited(asked_at_ms, matches!(answer, Waited::Answered(_)), &mut ticket.trace);
        let host = match answer {
            Waited::Answered(d) => d,
            Waited::Expired(timeout_ms) => {
                // Nobody decided: refused with its own text, and never remembered as anything.
                self.shared.emit(PipelineEvent::ApprovalExpired {
                    index: ticket.head.index,
                    id: ticket.head.id.to_string(),
                    timeout_ms,
                });
                ticket.trace.source = Some(Source::Timeout);
                ticket.trace.reason = Some(format!("nobody decided within {timeout_ms} ms"));
                ticket.action = Action::Refuse(ToolError::refused(
                    ErrorCategory::NotApproved,
                    format!(
                        "Not approved: nobody decided on `{}` within {timeout_ms} ms (approval.timeout_ms); nothing was run.",
                        ticket.head.name
                    ),
                ));
                self.send(msg.round, vec![ticket], None, false);
                return self.go_on(msg, ctx);
            }
            Waited::Dropped => HostDecision::Reject,
        };
        let decision = host.decided();
        let shared = Arc::clone(&self.shared);
        let approvals = &mut self.approvals;
        // Silence (a cancelled round, an expired question) is nobody's decision: it refuses
        // this call and is not remembered, so the same call asks again in a later round.
        let heard = matches!(answer, Waited::Answered(_));
        let recorded = guarded::<Self, _>(Stage::Approval, &shared, ctx, || {
            if let Action::Run { approval_key, .. } = &ticket.action
                && heard
            {
                approvals.record(decision, &ticket.head.name, &ticket.head.input, approval_key);
                if host == HostDecision::ApproveForProject {
                    write_project_rule(&shared, &ticket, approval_key);
                }
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
        ticket.trace.source = Some(Source::Host);
        ticket.trace.reason = Some(word(decision).into());
        apply(&mut ticket, decision);
        if !heard && self.shared.is_cancelled() {
            ticket.action = Action::Refuse(cancelled_waiting(&ticket.head.name));
        }
        self.send(msg.round, vec![ticket], None, false);
        self.go_on(msg, ctx);
    }

    /// The stage failed: every call it holds is refused (fail closed: nothing runs that the
    /// approval stage did not pass), in order, and the rounds' ends go on behind them.
    fn failed(&mut self, msg: Planned) {
        let held: Vec<Planned> = self
            .asking
            .take()
            .map(|a| (a.msg, a.ticket))
            .into_iter()
            .chain(self.hooking.take())
            .map(|(mut m, t)| {
                m.calls.insert(0, t);
                m
            })
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

/// The refusal of a call whose approval was still awaited when its round was cancelled.
fn cancelled_waiting(name: &str) -> ToolError {
    ToolError::refused(
        ErrorCategory::Cancelled,
        format!("Cancelled: the host cancelled this round while `{name}` waited for approval; nothing was run."),
    )
}

/// `approve_for_project`: the allow rule for the call's approval key, written into the
/// project's policy file and announced; where it cannot be (a command that is not plain, a
/// managed rule that asks every time, a file that cannot be written) the approval holds for
/// the session only, and the host is told why.
fn write_project_rule(shared: &SessionShared, ticket: &Ticket, approval_key: &str) {
    let index = ticket.head.index;
    if ticket.trace.sticky {
        shared.notice(Notice::for_call(
            NoticeKind::ProjectRuleFailed,
            index,
            "not written into the project's policy: the managed policy asks about this call every time (allow_override = false); approved for this session only",
        ));
        return;
    }
    let written = toolslot::project_policy::allow_in_project(
        &shared.config.policy,
        &shared.workspace,
        &ticket.head.name,
        approval_key,
        &ticket.head.input,
    );
    match written {
        // Said of a file that stays untrusted too: the rule was written, and the host reads
        // there that later sessions do not apply it until the file is trusted.
        Ok(rule) => shared.notice(Notice::for_call(NoticeKind::ProjectRuleAdded, index, rule.message(approval_key))),
        Err(e) => shared.notice(Notice::for_call(
            NoticeKind::ProjectRuleFailed,
            index,
            format!("not written into the project's policy ({e}); approved for this session only"),
        )),
    }
}

/// The ledger's detail for a host's (or a remembered) decision.
fn word(decision: ApprovalDecision) -> &'static str {
    match decision {
        ApprovalDecision::Approved => "approve",
        ApprovalDecision::ApprovedForSession => "approve_for_session",
        ApprovalDecision::ApprovedForProject => "approve_for_project",
        ApprovalDecision::Rejected => "reject",
        ApprovalDecision::RejectedForSession => "reject_for_session",
        ApprovalDecision::CachedApproval => "cached_approval",
        ApprovalDecision::CachedRejection => "cached_rejection",
    }
}

/// Turns a rejection into the call's refusal.
fn apply(ticket: &mut Ticket, decision: ApprovalDecision) {
    if matches!(
        decision,
        ApprovalDecision::Rejected | ApprovalDecision::RejectedForSession | ApprovalDecision::CachedRejection
    ) {
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
        self.hooking = None;
    }
}

impl Handler<Planned> for ApprovalActor {
    type Result = ();
    fn handle(&mut self, msg: Planned, ctx: &mut Context<Self>) {
        let shared = Arc::clone(&self.shared);
        if guarded::<Self, _>(Stage::Approval, &shared, ctx, || shared.trip(Stage::Approval)).is_err() {
            return self.failed(msg);
        }
        if self.busy() {
            self.queue.push_back(msg);
        } else if msg
            .calls
            .iter()
            .any(|t| matches!(t.action, Action::Run { gate: Gate::Ask(_), .. }) || crate::pipeline::hooking::needs_pre(&shared, t))
        {
            self.run(msg, ctx);
        } else {
            // Nothing to decide: the message goes on as it is.
            self.send(msg.round, msg.calls, msg.end, msg.closes);
        }
    }
}

impl Handler<Answer> for ApprovalActor {
    type Result = Result<(), Unanswerable>;
    fn handle(&mut self, msg: Answer, _ctx: &mut Context<Self>) -> Self::Result {
        let not_waiting = Unanswerable::NotWaiting(msg.index);
        let asked = self.asked_at.get(&msg.index).copied().unwrap_or(0);
        if msg.request.is_none() && asked > 1 {
            return Err(Unanswerable::NeedsRequest { index: msg.index, asked });
        }
        match self.asking.as_mut() {
            Some(a) if a.ticket.head.index == msg.index && msg.request.is_none_or(|r| r == a.request) => match a.answer.take() {
                Some(tx) => tx.send(msg.decision).map_err(|_| not_waiting),
                None => Err(not_waiting),
            },
            _ => Err(not_waiting),
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

impl Handler<GetPending> for ApprovalActor {
    type Result = Option<Pending>;
    fn handle(&mut self, _msg: GetPending, _ctx: &mut Context<Self>) -> Self::Result {
        self.asking.as_ref().filter(|a| a.answer.is_some()).map(|a| a.pending.clone())
    }
}

impl Handler<GetRemembered> for ApprovalActor {
    type Result = Vec<Remembered>;
    fn handle(&mut self, _msg: GetRemembered, _ctx: &mut Context<Self>) -> Self::Result {
        self.approvals.list()
    }
}

impl Handler<Revoke> for ApprovalActor {
    type Result = usize;
    fn handle(&mut self, msg: Revoke, _ctx: &mut Context<Self>) -> Self::Result {
        let revoked = match msg.key {
            Some(key) => usize::from(self.approvals.revoke(&key)),
            None => self.approvals.revoke_all(),
        };
        // A durable session's record forgets it too: a revoked approval stays revoked after a
        // take-over.
        if revoked > 0
            && let Some(d) = self.shared.durable.get()
        {
            d.approvals(&self.approvals);
        }
        revoked
    }
}
