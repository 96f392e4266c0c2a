//! The Planner stage: truncation gate, names, validation, loop guard, approval policy.

use std::sync::Arc;

use actix::prelude::*;
use toolslot::notice::Notice;
use toolslot::plan::loop_guard::LoopGuard;
use toolslot::plan::{PlanContext, PlannedCall, plan_call};
use toolslot::stream::RawCall;

use crate::session::{SessionShared, Stage};
use crate::stage::{StageError, guarded};

/// Plan consecutive calls, in index order.
#[derive(Message)]
#[rtype(result = "Result<Vec<PlannedCall>, StageError>")]
pub struct Plan {
    /// The calls.
    pub calls: Vec<RawCall>,
    /// Whether the round ended at the output limit.
    pub cut: bool,
}

/// Record finished calls' outcomes with the loop guard, in index order: (index, failed).
/// The answer holds, per call, the notices raised and the hint to append to its result.
#[derive(Message)]
#[rtype(result = "Vec<(Vec<Notice>, Option<String>)>")]
pub struct RecordOutcomes(pub Vec<(usize, bool)>);

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
    type Result = Result<Vec<PlannedCall>, StageError>;
    fn handle(&mut self, msg: Plan, ctx: &mut Context<Self>) -> Self::Result {
        let shared = Arc::clone(&self.shared);
        let guard = &mut self.guard;
        guarded::<Self, _>(Stage::Planner, ctx, || {
            shared.trip(Stage::Planner);
            let catalog = shared.memory.catalog();
            let plan_ctx = PlanContext {
                registry: catalog.registry(),
                catalog: &catalog,
                config: &shared.config,
                mode: shared.mode,
            };
            msg.calls.iter().map(|c| plan_call(plan_ctx, c, msg.cut, guard)).collect()
        })
    }
}

impl Handler<RecordOutcomes> for PlannerActor {
    type Result = MessageResult<RecordOutcomes>;
    fn handle(&mut self, msg: RecordOutcomes, _ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(msg.0.into_iter().map(|(index, failed)| self.guard.record(index, failed)).collect())
    }
}

impl Handler<Resume> for PlannerActor {
    type Result = ();
    fn handle(&mut self, _msg: Resume, _ctx: &mut Context<Self>) {
        self.guard.resume();
    }
}
