//! A session's five stages, each under a supervisor, wired once into a chain. This is the one
//! file that names every concrete stage: a stage itself holds only a `Recipient` of the
//! message the next mailbox takes (and the planner one of the executor's, for early starts),
//! so the chain's order is written here and nowhere else:
//!
//! ```text
//! StreamAssembler ─Assembled─▶ Planner ─Planned─▶ Approval ─Planned─▶ BatchExecutor ─Outcomes─▶ PostProcessor
//!                                 └──────────────── Speculate ──────────────▶┘
//! ```

use std::sync::Arc;

use actix::{Addr, Supervisor};
use actix_rt::ArbiterHandle;

use crate::pipeline::session::SessionShared;
use crate::pipeline::stages::approval::ApprovalActor;
use crate::pipeline::stages::batch_executor::BatchExecutorActor;
use crate::pipeline::stages::planner::PlannerActor;
use crate::pipeline::stages::post_processor::PostProcessorActor;
use crate::pipeline::stages::stream_assembler::StreamAssemblerActor;

/// The addresses of a session's stages.
#[derive(Clone)]
pub struct Stages {
    /// StreamAssembler, the head: submissions go here.
    pub assembler: Addr<StreamAssemblerActor>,
    /// Planner.
    pub planner: Addr<PlannerActor>,
    /// Approval: the host's answers go here.
    pub approval: Addr<ApprovalActor>,
    /// BatchExecutor.
    pub executor: Addr<BatchExecutorActor>,
    /// PostProcessor, the tail.
    pub post: Addr<PostProcessorActor>,
}

impl Stages {
    /// Starts `shared`'s stages on `arbiter`, tail first, so each is made knowing the next.
    /// A stage holds only the addresses downstream of it: when the session's handle lets go,
    /// the head stops, and each stage after it once its mailbox is drained.
    pub fn start(arbiter: &ArbiterHandle, shared: &Arc<SessionShared>) -> Self {
        let s = Arc::clone(shared);
        let post = Supervisor::start_in_arbiter(arbiter, move |_| PostProcessorActor::new(s));
        let (s, next) = (Arc::clone(shared), post.clone().recipient());
        let executor = Supervisor::start_in_arbiter(arbiter, move |_| BatchExecutorActor::new(s, next));
        let (s, next) = (Arc::clone(shared), executor.clone().recipient());
        let approval = Supervisor::start_in_arbiter(arbiter, move |_| ApprovalActor::new(s, next));
        let (s, next, early) = (Arc::clone(shared), approval.clone().recipient(), executor.clone().recipient());
        let planner = Supervisor::start_in_arbiter(arbiter, move |_| PlannerActor::new(s, next, early));
        let (s, next) = (Arc::clone(shared), planner.clone().recipient());
        let assembler = Supervisor::start_in_arbiter(arbiter, move |_| StreamAssemblerActor::new(s, next));
        Self {
            assembler,
            planner,
            approval,
            executor,
            post,
        }
    }
}
