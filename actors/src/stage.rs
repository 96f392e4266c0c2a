//! What every stage shares: the panic boundary and the error a stage replies with.

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::session::Stage;

/// A stage could not answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StageError {
    /// The stage panicked; it has been stopped and its supervisor restarts it.
    #[error("the {0:?} stage failed and was restarted")]
    Panicked(Stage),
}

/// Runs a handler body inside the panic boundary. On a panic the actor is stopped (its
/// supervisor restarts it, keeping its address) and the sender gets [`StageError`].
pub fn guarded<A, T>(stage: Stage, ctx: &mut A::Context, body: impl FnOnce() -> T) -> Result<T, StageError>
where
    A: actix::Actor<Context = actix::Context<A>>,
{
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => Ok(v),
        Err(_) => {
            use actix::ActorContext;
            ctx.stop();
            Err(StageError::Panicked(stage))
        }
    }
}
