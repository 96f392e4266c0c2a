//! Where a call runs: its decision recorded, then the tool run under a timeout, the round's
//! cancellation and a panic boundary, then its post hooks and its outcome recorded. Every call
//! that may run passes [`execute`], early ones included, so the ledger's decision record of
//! each is on disk before it starts.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use toolslot::event::PipelineEvent;
use toolslot::plan::Action;
use toolslot::plan::approval::Trace;
use toolslot::registry::Registry;
use toolslot::tool::{ErrorCategory, Grant, ToolContext, ToolError};

use super::{Lane, in_span};
use crate::pipeline::audit::{Record, unrecorded};
use crate::pipeline::chain::{CallHead, PostItem, RoundNo};

/// Where a call starts from: its round, the batch's start, and whether it started before the
/// stream ended.
#[derive(Clone, Copy)]
pub(super) struct Launch {
    pub(super) round: RoundNo,
    pub(super) started: Instant,
    pub(super) speculative: bool,
}

/// Runs one call: `call_started`, timeout, cancellation, panic containment. The caller holds
/// the session's gate.
///
/// # Cancel safety
/// Dropping the future drops the tool's future, which abandons the call.
pub(super) async fn execute(lane: &Lane, registry: &Registry, head: CallHead, grant: Grant, trace: Trace, launch: Launch) -> PostItem {
    let Launch {
        round,
        started,
        speculative,
    } = launch;
    let span = super::spans::call(&lane.shared, &head, &trace, speculative, true);
    let (ended, span) = in_span(span, async {
        // A decision that is not on disk did not happen: the call runs only once it is.
        let audit = &lane.shared.audit;
        if audit.is_on()
            && let Err(e) = audit.append(Record::decision(&head, &trace, true, None)).await
        {
            tracing::error!(session = %lane.shared.id, index = head.index, error = %e, "ledger write failed; call refused");
            return Err(PostItem::not_run(head, unrecorded(&e)));
        }
        let mut item = execute_inner(lane, round, registry, head, grant, started, speculative).await;
        let ran = item.result.as_ref().map_or_else(|e| e.started, |_| true);
        let withheld = ran && crate::pipeline::hooking::run_post(&lane.shared, &item.head, &mut item.result).await;
        if audit.is_on() {
            let outcome = match &item.result {
                _ if withheld => "withheld",
                Ok(out) if !out.is_error => "ok",
                Ok(_) | Err(_) => "error",
            };
            if let Err(e) = audit.append(Record::outcome(&item.head, &trace, outcome)).await {
                tracing::error!(session = %lane.shared.id, index = item.head.index, error = %e, "ledger: an outcome could not be recorded");
            }
        }
        Ok((item, ran))
    })
    .await;
    match ended {
        Err(item) => item,
        Ok((mut item, ran)) => {
            super::spans::finish(&span, &lane.shared, &item, ran);
            item.span = span;
            item
        }
    }
}

/// A call that does not run: its refusal is recorded as the decision, and is its outcome.
pub(super) async fn refuse(lane: &Lane, head: CallHead, trace: Trace, error: ToolError) -> PostItem {
    let span = super::spans::call(&lane.shared, &head, &trace, false, false);
    let audit = &lane.shared.audit;
    if audit.is_on()
        && let Err(e) = audit.append(Record::decision(&head, &trace, false, Some(&error))).await
    {
        // Nothing runs either way; the refusal keeps its own reason.
        tracing::error!(session = %lane.shared.id, index = head.index, error = %e, "ledger: a refusal could not be recorded");
    }
    let mut item = PostItem::not_run(head, error);
    super::spans::finish(&span, &lane.shared, &item, false);
    item.span = span;
    item
}

/// What the approval gate cleared a call to do (the sandbox enforces it).
pub(super) fn grant_of(action: &Action) -> Grant {
    match action {
        Action::Run { grant, .. } => *grant,
        Action::Refuse(_) => Grant::default(),
    }
}

async fn execute_inner(
    lane: &Lane,
    round: RoundNo,
    registry: &Registry,
    head: CallHead,
    grant: Grant,
    started: Instant,
    speculative: bool,
) -> PostItem {
    let shared = &lane.shared;
    if shared.is_cancelled() {
        return PostItem::not_run(head, cancelled_before());
    }
    let Some(tool) = registry.get(&head.name) else {
        let e = ToolError::refused(ErrorCategory::UnknownTool, format!("Unknown tool `{}`.", head.name));
        return PostItem::not_run(head, e);
    };
    // The content comes from outside when the tool's metadata says so (an MCP server, an
    // extension program, the network).
    let external = tool.meta.external;
    // A durable session's record says the call is running before it runs: a dispatcher killed
    // from here on leaves it `outcome_unknown`, never "not started" for a call that ran.
    if let Some(d) = shared.durable.get()
        && !d.running(round.0, head.index, &head.id, &head.name).await
    {
        return PostItem::not_run(head, not_recorded());
    }
    shared.emit(PipelineEvent::CallStarted {
        index: head.index,
        id: Arc::clone(&head.id),
        name: Arc::clone(&head.name),
        input: Arc::clone(&head.input),
        speculative,
    });
    let ctx = ToolContext {
        session_id: shared.id.clone(),
        workspace: shared.workspace.clone(),
        call_id: String::from(&*head.id),
        index: head.index,
        config: Arc::clone(&shared.config),
        services: shared.services.clone(),
        grant,
    };
    let timeout_ms = shared.config.execution.call_timeout_ms;
    let input = (*head.input).clone();
    let run = AssertUnwindSafe(tool.spec.run(input, &ctx)).catch_unwind();
    let name = &head.name;
    let panicked = |panic: Box<dyn std::any::Any + Send>| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        tracing::error!(session = %shared.id, tool = %name, %what, "tool panicked");
        Err(ToolError::tool(format!(
            "`{name}` failed internally (it panicked: {what}); its outcome is unknown. Do not assume it took effect."
        )))
    };
    let mut run = std::pin::pin!(run);
    // A tool that computes without waiting finishes on its first poll: it needs no timer and
    // no cancellation watch, which cost more than such a call itself.
    let result = match run.as_mut().now_or_never() {
        Some(Ok(result)) => result,
        Some(Err(panic)) => panicked(panic),
        None => {
            let waited = async {
                let mut cancel = shared.cancel.subscribe();
                let timed = async {
                    if timeout_ms == 0 {
                        Ok(run.await)
                    } else {
                        tokio::time::timeout(Duration::from_millis(timeout_ms), run).await
                    }
                };
                tokio::select! {
                    r = timed => match r {
                        Ok(Ok(result)) => result,
                        Ok(Err(panic)) => panicked(panic),
                        Err(_) => Err(ToolError {
                            category: ErrorCategory::Timeout,
                            message: format!("`{name}` did not finish within {timeout_ms} ms and was stopped; its outcome is unknown."),
                            field: None,
                            started: true,
                        }),
                    },
                    _ = cancel.wait_for(|c| *c) => Err(ToolError {
                        category: ErrorCategory::Cancelled,
                        message: format!("Cancelled: the host cancelled this round while `{name}` was running; it was stopped and its outcome is unknown. This was not a user interrupt of your request."),
                        field: None,
                        started: true,
                    }),
                }
            };
            // Boxed: the timer and the watch live only in calls that wait, and the call's
            // future (one per call of a batch) stays small.
            Box::pin(waited).await
        }
    };
    let duration_ms = started.elapsed().as_millis() as u64;
    PostItem {
        head,
        result,
        duration_ms,
        external,
        guard: (Vec::new(), None),
        span: tracing::Span::none(),
    }
}

/// A durable session whose record could not say the call runs (NATS away, or the session lost
/// to another dispatcher): the call does not run.
fn not_recorded() -> ToolError {
    ToolError::refused(
        ErrorCategory::Unavailable,
        "Not run: this session's record could not be written before the call (the session store is unreachable, or another dispatcher took the session over); nothing was run.",
    )
}

fn cancelled_before() -> ToolError {
    ToolError::refused(
        ErrorCategory::Cancelled,
        "Cancelled: the host cancelled this round before the call started; nothing was run.",
    )
}
