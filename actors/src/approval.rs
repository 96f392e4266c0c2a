//! The Approval stage: asks the host, waits without blocking anyone, remembers decisions.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use serde_json::Value;
use tokio::sync::oneshot;
use toolslot::event::{ApprovalDecision, PipelineEvent};
use toolslot::plan::approval::SessionApprovals;
use toolslot::tool::ApprovalRequirement;

use crate::session::{SessionShared, Stage};
use crate::stage::{StageError, guarded};

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

/// Decide on one call that needs approval.
#[derive(Message)]
#[rtype(result = "Result<ApprovalDecision, StageError>")]
pub struct Decide {
    /// Index in the response.
    pub index: usize,
    /// Provider id.
    pub id: String,
    /// Resolved tool name.
    pub name: String,
    /// Arguments.
    pub input: Value,
    /// The requirement.
    pub requirement: ApprovalRequirement,
    /// The loose fingerprint.
    pub approval_key: String,
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

/// Owns the session's remembered decisions and the questions in flight.
pub struct ApprovalActor {
    shared: Arc<SessionShared>,
    approvals: SessionApprovals,
    pending: HashMap<usize, oneshot::Sender<HostDecision>>,
}

impl ApprovalActor {
    /// A stage for `shared`'s session.
    pub fn new(shared: Arc<SessionShared>) -> Self {
        Self {
            shared,
            approvals: SessionApprovals::default(),
            pending: HashMap::new(),
        }
    }
}

impl Actor for ApprovalActor {
    type Context = Context<Self>;
}

impl Supervised for ApprovalActor {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        // Questions in flight die with the failure: their waits end as rejections.
        self.pending.clear();
        self.shared.restarted(Stage::Approval);
    }
}

impl Handler<Decide> for ApprovalActor {
    type Result = ResponseActFuture<Self, Result<ApprovalDecision, StageError>>;

    fn handle(&mut self, msg: Decide, ctx: &mut Context<Self>) -> Self::Result {
        let shared = Arc::clone(&self.shared);
        let cached = guarded::<Self, _>(Stage::Approval, ctx, || {
            shared.trip(Stage::Approval);
            self.approvals.cached(&msg.name, &msg.input, &msg.approval_key, false)
        });
        let cached = match cached {
            Ok(c) => c,
            Err(e) => return Box::pin(fut::ready(Err(e))),
        };
        if let Some(decision) = cached {
            shared.emit(PipelineEvent::ApprovalDecided {
                index: msg.index,
                id: msg.id,
                decision,
            });
            return Box::pin(fut::ready(Ok(decision)));
        }
        let (tx, rx) = oneshot::channel();
        self.pending.insert(msg.index, tx);
        shared.emit(PipelineEvent::ApprovalRequired {
            index: msg.index,
            id: msg.id.clone(),
            name: msg.name.clone(),
            requirement: msg.requirement,
            input: msg.input.clone(),
        });
        let timeout = shared.config.approval_timeout_ms();
        let mut cancel = shared.cancel.subscribe();
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
        Box::pin(wait.into_actor(self).map(move |answer, act, _ctx| {
            act.pending.remove(&msg.index);
            // Silence (timeout, cancellation, a closed session) is a rejection: nothing runs
            // that nobody approved.
            let decision = match answer {
                Some(HostDecision::Approve) => ApprovalDecision::Approved,
                Some(HostDecision::ApproveForSession) => ApprovalDecision::ApprovedForSession,
                Some(HostDecision::Reject) | None => ApprovalDecision::Rejected,
            };
            act.approvals.record(decision, &msg.name, &msg.input, &msg.approval_key);
            act.shared.emit(PipelineEvent::ApprovalDecided {
                index: msg.index,
                id: msg.id,
                decision,
            });
            Ok(decision)
        }))
    }
}

impl Handler<Answer> for ApprovalActor {
    type Result = Result<(), NotWaiting>;
    fn handle(&mut self, msg: Answer, _ctx: &mut Context<Self>) -> Self::Result {
        match self.pending.remove(&msg.index) {
            Some(tx) => tx.send(msg.decision).map_err(|_| NotWaiting(msg.index)),
            None => Err(NotWaiting(msg.index)),
        }
    }
}

impl Handler<DropPending> for ApprovalActor {
    type Result = ();
    fn handle(&mut self, _msg: DropPending, _ctx: &mut Context<Self>) {
        self.pending.clear();
    }
}
