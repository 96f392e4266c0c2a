//! What every stage shares: the panic boundary, and the switches of its spans and metrics.

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

/// Whether [`span!`] makes spans (a subscriber is installed): what a span alone needs is not
/// worked out otherwise.
pub(crate) fn spans_on() -> bool {
    tracing::dispatcher::has_been_set()
}

/// Records the output's cut on a call's span, when it was cut: `toolslot.output.truncated`,
/// and the ref under which the whole output was saved (the one the model is told to pass to
/// `retrieve_tool_result`).
pub(crate) fn output_cut(span: &tracing::Span, finished: &toolslot::output::Finished) {
    if span.is_disabled()
        || !finished
            .notices
            .iter()
            .any(|n| n.kind == toolslot::notice::NoticeKind::OutputTruncated)
    {
        return;
    }
    span.record("toolslot.output.truncated", true);
    let reference = finished
        .result
        .content
        .rsplit_once("retrieve_tool_result ref=")
        .map(|(_, rest)| rest.split(|c: char| c.is_whitespace() || c == '.' || c == ')').next().unwrap_or(""))
        .filter(|r| !r.is_empty());
    if let Some(r) = reference {
        span.record("toolslot.output.overflow_ref", r);
    }
}

/// Records how long a call waited for the host's approval (`toolslot.approval.wait.duration`),
/// from `asked_at_ms` (Unix ms) until now, `answered` by the host or not (expired, dropped
/// with its round), recorded when telemetry is on, and puts the wait on `trace` (for the call's
/// span).
pub(crate) fn approval_waited(asked_at_ms: u64, answered: bool, trace: &mut toolslot::plan::approval::Trace) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let waited_ms = now.saturating_sub(asked_at_ms);
    trace.waited_ms = Some(waited_ms);
    if !toolslot::telemetry::is_on() {
        return;
    }
    let seconds = waited_ms as f64 / 1000.0;
    let outcome = if answered { "answered" } else { "unanswered" };
    toolslot::telemetry::record(
        toolslot::telemetry::names::METRIC_APPROVAL_WAIT,
        seconds,
        &[("toolslot.approval.outcome", outcome)],
    );
}
