//! The Planner stage: truncation gate, names, validation, loop guard, approval policy.

use std::sync::Arc;

use actix::prelude::*;
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

/// Plans calls, consulting the session's loop guard ([`SessionShared::guard`]).
pub struct PlannerActor {
    shared: Arc<SessionShared>,
}

impl PlannerActor {
    /// A stage for `shared`'s session.
    pub fn new(shared: Arc<SessionShared>) -> Self {
        Self { shared }
    }
}

impl Actor for PlannerActor {
    type Context = Context<Self>;
}

impl Supervised for PlannerActor {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        // The loop guard is session state, not round state: it lives on in the session.
        self.shared.restarted(Stage::Planner);
    }
}

impl Handler<Plan> for PlannerActor {
    type Result = Result<Vec<PlannedCall>, StageError>;
    fn handle(&mut self, msg: Plan, ctx: &mut Context<Self>) -> Self::Result {
        let shared = Arc::clone(&self.shared);
        guarded::<Self, _>(Stage::Planner, ctx, || {
            shared.trip(Stage::Planner);
            let catalog = shared.memory.catalog();
            let plan_ctx = PlanContext {
                registry: catalog.registry(),
                catalog: &catalog,
                config: &shared.config,
                mode: shared.mode,
                policy: &shared.policy,
                workspace: &shared.workspace,
            };
            let mut guard = shared.guard();
            msg.calls.iter().map(|c| plan_call(plan_ctx, c, msg.cut, &mut guard)).collect()
        })
    }
}
