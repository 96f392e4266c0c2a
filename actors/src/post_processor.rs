//! The PostProcessor stage: observers, loop-guard accounting, output economics, envelopes,
//! `call_finished`. A batch is post-processed before the next batch starts.

use std::sync::Arc;

use actix::prelude::*;
use serde_json::Value;
use toolslot::event::{PipelineEvent, ToolResult};
use toolslot::notice::NoticeKind;
use toolslot::observe::{FileReadObserver, ResultObserver};
use toolslot::output::{FinishContext, Finished, Overflow, finish_call, needs_truncation};
use toolslot::tool::{ToolError, ToolOutput};

use crate::session::{SessionShared, Stage};
use crate::stage::{StageError, guarded};

/// One call's outcome to post-process.
#[derive(Debug)]
pub struct PostItem {
    /// Index in the response.
    pub index: usize,
    /// Provider id.
    pub id: String,
    /// Resolved name.
    pub name: String,
    /// Arguments.
    pub input: Value,
    /// What happened.
    pub result: Result<ToolOutput, ToolError>,
    /// Wall time.
    pub duration_ms: u64,
    /// `Some(source)` when the content comes from outside (network and MCP tools).
    pub external: Option<String>,
}

/// Post-process one batch, in index order.
#[derive(Message)]
#[rtype(result = "Result<Processed, StageError>")]
pub struct Process(pub Vec<PostItem>);

/// A post-processed batch.
#[derive(Debug)]
pub struct Processed {
    /// One result per item, in order.
    pub results: Vec<ToolResult>,
    /// The loop guard paused the session during this batch.
    pub paused: bool,
}

/// Owns the observers; tells the session's loop guard how calls ended.
pub struct PostProcessorActor {
    shared: Arc<SessionShared>,
    observers: Arc<Vec<Box<dyn ResultObserver>>>,
}

impl PostProcessorActor {
    /// A stage for `shared`'s session.
    pub fn new(shared: Arc<SessionShared>) -> Self {
        Self {
            shared,
            observers: Arc::new(vec![Box::new(FileReadObserver)]),
        }
    }
}

impl Actor for PostProcessorActor {
    type Context = Context<Self>;
}

impl Supervised for PostProcessorActor {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        self.shared.restarted(Stage::PostProcessor);
    }
}

/// An item finished at once, one whose output must be cut and saved first, or an edit whose
/// result waits for its file's diagnostics.
enum Staged {
    Done((Finished, u64)),
    Heavy(PostItem),
    Edited(PostItem),
}

/// Output economics for one item (see [`finish_call`]), with its duration.
fn finish(shared: &SessionShared, item: PostItem) -> (Finished, u64) {
    let fctx = FinishContext {
        index: item.index,
        id: &item.id,
        name: &item.name,
        external: item.external.as_deref(),
        // A poll of a running task is cut like any output, never saved as the whole of it.
        final_view: item.result.as_ref().map_or(true, |o| !o.partial),
    };
    let overflow = Overflow {
        store: shared.memory.overflow(),
        session: &shared.id,
    };
    (
        finish_call(fctx, item.result, &shared.config.output, Some(overflow)),
        item.duration_ms,
    )
}

impl Handler<Process> for PostProcessorActor {
    type Result = ResponseFuture<Result<Processed, StageError>>;
    fn handle(&mut self, msg: Process, ctx: &mut Context<Self>) -> Self::Result {
        let shared = Arc::clone(&self.shared);
        let observers = Arc::clone(&self.observers);
        // The synchronous part (observers, small results) runs inside the boundary; a result
        // that must be cut and saved is finished on the blocking pool, so megabytes of output
        // never stall the other sessions on this thread.
        let staged = guarded::<Self, _>(Stage::PostProcessor, ctx, || {
            shared.trip(Stage::PostProcessor);
            msg.0
                .into_iter()
                .map(|item| {
                    if item.result.as_ref().is_ok_and(|o| !o.is_error) {
                        for o in observers.iter() {
                            o.observe(&item.name, &item.input, &shared.workspace, shared.memory.as_ref());
                        }
                        shared.lsp.warm_up(&item.name, &item.input);
                    }
                    if item.result.as_ref().is_ok_and(|o| !o.is_error) && shared.lsp.handles(&item.name, &item.input) {
                        Staged::Edited(item)
                    } else if needs_truncation(&item.result, &shared.config.output) {
                        Staged::Heavy(item)
                    } else {
                        Staged::Done(finish(&shared, item))
                    }
                })
                .collect::<Vec<_>>()
        });
        Box::pin(async move {
            let mut finished = Vec::new();
            for staged in staged? {
                let staged = match staged {
                    Staged::Edited(mut item) => {
                        if let Ok(out) = &mut item.result
                            && let Some(text) = shared.lsp.after_edit(&item.name, &item.input, out).await
                        {
                            out.content.push_str("\n\n");
                            out.content.push_str(&text);
                        }
                        if needs_truncation(&item.result, &shared.config.output) {
                            Staged::Heavy(item)
                        } else {
                            Staged::Done(finish(&shared, item))
                        }
                    }
                    other => other,
                };
                finished.push(match staged {
                    Staged::Done(f) => f,
                    Staged::Edited(item) => finish(&shared, item),
                    Staged::Heavy(item) => {
                        let (index, id, name, duration_ms) = (item.index, item.id.clone(), item.name.clone(), item.duration_ms);
                        let on_pool = Arc::clone(&shared);
                        match tokio::task::spawn_blocking(move || finish(&on_pool, item)).await {
                            Ok(f) => f,
                            Err(e) => {
                                tracing::error!(session = %shared.id, tool = %name, error = %e, "finishing a large output failed");
                                let lost = ToolError::tool(format!(
                                    "`{name}` ran, but its output could not be prepared (post-processing failed: {e}); it is lost. Run it again if you need it."
                                ));
                                let fctx = FinishContext {
                                    index,
                                    id: &id,
                                    name: &name,
                                    external: None,
                                    final_view: true,
                                };
                                (finish_call(fctx, Err(lost), &shared.config.output, None), duration_ms)
                            }
                        }
                    }
                });
            }
            let mut results = Vec::with_capacity(finished.len());
            let mut paused = false;
            let guard_says: Vec<_> = {
                let mut guard = shared.guard();
                finished.iter().map(|(f, _)| guard.record(f.result.index, f.failed)).collect()
            };
            let mut guard_says = guard_says.into_iter();
            for (mut f, duration_ms) in finished {
                for n in f.notices.drain(..) {
                    shared.notice(n);
                }
                if let Some((notices, hint)) = guard_says.next() {
                    for n in notices {
                        paused |= n.kind == NoticeKind::LoopPaused;
                        shared.notice(n);
                    }
                    if let Some(h) = hint {
                        f.result.content.push_str("\n\n");
                        f.result.content.push_str(&h);
                    }
                }
                shared.emit(PipelineEvent::CallFinished {
                    index: f.result.index,
                    id: f.result.tool_use_id.clone(),
                    name: f.result.name.clone(),
                    is_error: f.result.is_error,
                    duration_ms,
                });
                results.push(f.result);
            }
            Ok(Processed { results, paused })
        })
    }
}
