//! The Planner stage: truncation gate, names, validation, loop guard, approval policy.

use std::sync::Arc;

use actix::prelude::*;
use toolslot::notice::Notice;
use toolslot::plan::loop_guard::LoopGuard;
use toolslot::plan::{PlanContext, PlannedCall, plan_call};
use toolslot::stream::RawCall;

use crate::session::{SessionShared, Stage};
use crate::stage::{StageError, guarded};

/// Plan one call (in index order).
#[derive(Message)]
#[rtype(result = "Result<PlannedCall, StageError>")]
pub struct Plan {
    /// The call.
    pub call: RawCall,
    /// Whether the round ended at the output limit.
    pub cut: bool,
}

/// Record a finished call's outcome with the loop guard.
#[derive(Message)]
#[rtype(result = "(Vec<Notice>, Option<String>)")]
pub struct RecordOutcome {
    /// The call.
    pub index: usize,
    /// Whether it failed.
    pub failed: bool,
}

/// Resume a session the loop guard paused.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Resume;

/// Owns the session's loop guard.
pub struct PlannerActor {
    shared: Arc<SessionShared>,
    guard: LoopGuard,
}

impl PlannerActor {
    /// A stage for `shared`'s session.
    pub fn new(shared: Arc<SessionShared>) -> Self {
        let guard = LoopGuard::new(shared.config.loop_guard.clone());
        Self { shared, guard }
    }
}

impl Actor for PlannerActor {
    type Context = Context<Self>;
}

impl Supervised for PlannerActor {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        // The loop guard is session state, not round state: it survives the restart.
        self.shared.restarted(Stage::Planner);
    }
}

impl Handler<Plan> for PlannerActor {
    type Result = Result<PlannedCall, StageError>;
    fn handle(&mut self, msg: Plan, ctx: &mut Context<Self>) -> Self::Result {
        let shared = Arc::clone(&self.shared);
        let guard = &mut self.guard;
        guarded::<Self, _>(Stage::Planner, ctx, || {
            shared.trip(Stage::Planner);
            let catalog = shared.memory.catalog();
            let plan_ctx = PlanContext {
                registry: shared.memory.registry(),
                catalog: &catalog,
                config: &shared.config,
                mode: shared.mode,
            };
            plan_call(plan_ctx, &msg.call, msg.cut, guard)
        })
    }
}

impl Handler<RecordOutcome> for PlannerActor {
    type Result = MessageResult<RecordOutcome>;
    fn handle(&mut self, msg: RecordOutcome, _ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(self.guard.record(msg.index, msg.failed))
    }
}

impl Handler<Resume> for PlannerActor {
    type Result = ();
    fn handle(&mut self, _msg: Resume, _ctx: &mut Context<Self>) {
        self.guard.resume();
    }
}
