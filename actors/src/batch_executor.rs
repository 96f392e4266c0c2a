//! The BatchExecutor stage: runs batches (concurrently or one at a time) under the session's
//! read/write gate, with timeouts, cancellation and panic containment per call.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures::FutureExt;
use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::Value;
use tokio::sync::{RwLock, oneshot};
use toolslot::event::PipelineEvent;
use toolslot::tool::{ErrorCategory, ToolContext, ToolError, ToolOutput, ToolSpec};
use tracing::Instrument;

use crate::session::{SessionShared, Stage};
use crate::stage::{StageError, guarded};

tokio::task_local! {
    /// The session whose tool is running on this task (its `SessionShared`'s address, which is
    /// unique while the session lives): a tool that calls tools of its own session
    /// (re-entrancy) skips the gate instead of waiting on itself.
    static IN_TOOL: usize;
}

/// A call ready to run.
#[derive(Clone)]
pub struct ExecCall {
    /// Index in the response.
    pub index: usize,
    /// Provider id.
    pub id: String,
    /// Resolved name.
    pub name: String,
    /// Arguments.
    pub input: Value,
    /// The tool.
    pub tool: Arc<dyn ToolSpec>,
    /// May share the gate with other parallel calls.
    pub parallel: bool,
    /// What the approval gate cleared it to do (the sandbox enforces it).
    pub grant: toolslot::tool::Grant,
}

/// How a call ended.
#[derive(Debug)]
pub struct Outcome {
    /// Index in the response.
    pub index: usize,
    /// The tool's output, or why there is none.
    pub result: Result<ToolOutput, ToolError>,
    /// Wall time from start to end (0 when it never started).
    pub duration_ms: u64,
}

/// Start calls before the stream has ended; each outcome arrives on its returned receiver.
#[derive(Message)]
#[rtype(result = "Result<Vec<oneshot::Receiver<Outcome>>, StageError>")]
pub struct Speculate(pub Vec<ExecCall>);

/// Run one batch; one outcome per call, in the calls' order.
#[derive(Message)]
#[rtype(result = "Result<Vec<Outcome>, StageError>")]
pub struct RunBatch {
    /// The calls.
    pub calls: Vec<ExecCall>,
    /// Run them concurrently.
    pub concurrent: bool,
}

/// Owns the session's gate.
pub struct BatchExecutorActor {
    shared: Arc<SessionShared>,
    gate: Arc<RwLock<()>>,
}

impl BatchExecutorActor {
    /// A stage for `shared`'s session.
    pub fn new(shared: Arc<SessionShared>) -> Self {
        Self {
            shared,
            gate: Arc::new(RwLock::new(())),
        }
    }
}

impl Actor for BatchExecutorActor {
    type Context = Context<Self>;
}

impl Supervised for BatchExecutorActor {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        // Calls started early run as their own tasks and report to the round directly, so
        // a restart loses none of them.
        self.shared.restarted(Stage::BatchExecutor);
    }
}

/// Runs one call: gate, `call_started`, timeout, cancellation, panic containment.
///
/// # Cancel safety
/// Dropping the future drops the tool's future, which abandons the call; the gate is
/// released with it.
pub async fn execute(shared: Arc<SessionShared>, gate: Arc<RwLock<()>>, call: ExecCall, speculative: bool) -> Outcome {
    let span = tracing::info_span!("call", session = %shared.id, index = call.index, tool = %call.name, speculative);
    execute_inner(shared, gate, call, speculative).instrument(span).await
}

async fn execute_inner(shared: Arc<SessionShared>, gate: Arc<RwLock<()>>, call: ExecCall, speculative: bool) -> Outcome {
    let index = call.index;
    if shared.is_cancelled() {
        return Outcome {
            index,
            result: Err(cancelled_before()),
            duration_ms: 0,
        };
    }
    let me = Arc::as_ptr(&shared) as usize;
    let reentrant = IN_TOOL.try_with(|s| *s == me).unwrap_or(false);
    // Parallel-safe calls share the gate; anything else has it alone.
    let _slot = match (reentrant, call.parallel) {
        (true, _) => Slot::Reentrant,
        (false, true) => Slot::Shared {
            _held: gate.read_owned().await,
        },
        (false, false) => Slot::Exclusive {
            _held: gate.write_owned().await,
        },
    };
    if shared.is_cancelled() {
        return Outcome {
            index,
            result: Err(cancelled_before()),
            duration_ms: 0,
        };
    }
    let ExecCall {
        id,
        name,
        input,
        tool,
        grant,
        ..
    } = call;
    shared.emit(PipelineEvent::CallStarted {
        index,
        id: id.clone(),
        name: name.clone(),
        input: input.clone(),
        speculative,
    });
    let ctx = ToolContext {
        session_id: shared.id.clone(),
        workspace: shared.workspace.clone(),
        call_id: id,
        index,
        config: Arc::clone(&shared.config),
        services: shared.services.clone(),
        grant,
    };
    let started = Instant::now();
    let timeout_ms = shared.config.execution.call_timeout_ms;
    let run = IN_TOOL.scope(me, async move { AssertUnwindSafe(tool.run(input, &ctx)).catch_unwind().await });
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
        }
    };
    Outcome {
        index,
        result,
        duration_ms: started.elapsed().as_millis() as u64,
    }
}

/// A held place in the session's gate (released on drop).
enum Slot {
    Reentrant,
    Shared { _held: tokio::sync::OwnedRwLockReadGuard<()> },
    Exclusive { _held: tokio::sync::OwnedRwLockWriteGuard<()> },
}

fn cancelled_before() -> ToolError {
    ToolError::refused(
        ErrorCategory::Cancelled,
        "Cancelled: the host cancelled this round before the call started; nothing was run.",
    )
}

impl Handler<Speculate> for BatchExecutorActor {
    type Result = Result<Vec<oneshot::Receiver<Outcome>>, StageError>;
    fn handle(&mut self, msg: Speculate, ctx: &mut Context<Self>) -> Self::Result {
        guarded::<Self, _>(Stage::BatchExecutor, ctx, || self.shared.trip(Stage::BatchExecutor))?;
        let mut receivers = Vec::with_capacity(msg.0.len());
        let mut running = FuturesUnordered::new();
        for call in msg.0 {
            let (tx, rx) = oneshot::channel();
            receivers.push(rx);
            running.push(execute(Arc::clone(&self.shared), Arc::clone(&self.gate), call, true).map(move |o| (o, tx)));
        }
        // One task for the calls started together: they run while the stream goes on, each
        // outcome reported to the round the moment it is in.
        actix::spawn(async move {
            while let Some((outcome, tx)) = running.next().await {
                let _ = tx.send(outcome);
            }
        });
        Ok(receivers)
    }
}

impl Handler<RunBatch> for BatchExecutorActor {
    type Result = ResponseFuture<Result<Vec<Outcome>, StageError>>;
    fn handle(&mut self, msg: RunBatch, ctx: &mut Context<Self>) -> Self::Result {
        if let Err(e) = guarded::<Self, _>(Stage::BatchExecutor, ctx, || self.shared.trip(Stage::BatchExecutor)) {
            return Box::pin(async move { Err(e) });
        }
        let shared = Arc::clone(&self.shared);
        let gate = Arc::clone(&self.gate);
        Box::pin(async move {
            if msg.concurrent {
                // Started in index order, outcomes in index order whatever the completion
                // order. join_all keeps the futures in one vector (no task node per call).
                let running = msg
                    .calls
                    .into_iter()
                    .map(|call| execute(Arc::clone(&shared), Arc::clone(&gate), call, false));
                return Ok(futures::future::join_all(running).await);
            }
            let mut outcomes = Vec::with_capacity(msg.calls.len());
            for call in msg.calls {
                outcomes.push(execute(Arc::clone(&shared), Arc::clone(&gate), call, false).await);
            }
            Ok(outcomes)
        })
    }
}
