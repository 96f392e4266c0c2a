//! What every stage shares: the panic boundary.

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::pipeline::session::{SessionShared, Stage};

/// A stage could not handle a message.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StageError {
    /// The stage panicked; it has been stopped and its supervisor restarts it.
    #[error("the {0:?} stage failed and was restarted")]
    Panicked(Stage),
}

/// Runs a handler body inside the panic boundary. On a panic the host is told
/// (`actor_restarted`, before anything the failure leads to, so it lands in the round it hit),
/// the actor is stopped (its supervisor restarts it at once, keeping its address and mailbox)
/// and the caller gets [`StageError`]: it then answers the calls the message held, through the
/// chain.
pub fn guarded<A, T>(stage: Stage, shared: &SessionShared, ctx: &mut A::Context, body: impl FnOnce() -> T) -> Result<T, StageError>
where
    A: actix::Actor<Context = actix::Context<A>>,
{
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => Ok(v),
        Err(_) => {
            use actix::ActorContext;
            shared.restarted(stage);
            ctx.stop();
            Err(StageError::Panicked(stage))
        }
    }
}

/// An `info` span, made only when a tracing subscriber is installed: without one nobody reads
/// spans, and making one per call costs about as much as a call of a tool that does not wait.
macro_rules! span {
    ($($arg:tt)*) => {
        if tracing::dispatcher::has_been_set() {
            tracing::info_span!($($arg)*)
        } else {
            tracing::Span::none()
        }
    };
}
pub(crate) use span;
