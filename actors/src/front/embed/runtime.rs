//! The runtime thread: an actix system holding the dispatcher, answering [`Command`]s.

use std::sync::Arc;

use crossbeam_channel::Sender;
use futures::StreamExt;
use toolslot::config::{ApprovalMode, Config};
use toolslot::event::PipelineEvent;
use toolslot::registry::CatalogFormat;
use toolslot::stream::Dialect;
use toolslot::tool::ToolSpec;

use super::wake::{CallPort, WakePipe};
use super::{EmbedError, HostToolDef, OpenOptions};
use crate::host::dispatcher::Dispatcher;
use crate::pipeline::chain::RoundInput;
use crate::pipeline::session::SessionOptions;
use crate::pipeline::stages::approval::HostDecision;

type Chunk = Result<Vec<u8>, std::io::Error>;

/// What the host's threads ask of the runtime thread; each carries where to answer.
pub(super) enum Command {
    Open {
        options: SessionOptions,
        reply: Sender<String>,
    },
    Submit {
        session: String,
        dialect: Option<Dialect>,
        chunks: tokio::sync::mpsc::UnboundedReceiver<Chunk>,
        events: Sender<PipelineEvent>,
        wake: Arc<WakePipe>,
        reply: Sender<Result<(), EmbedError>>,
    },
    Answer {
        session: String,
        index: usize,
        request: Option<u64>,
        decision: HostDecision,
        reply: Sender<Result<(), EmbedError>>,
    },
    Catalog {
        session: Option<String>,
        format: CatalogFormat,
        reply: Sender<Result<String, EmbedError>>,
    },
    AddTools {
        tools: Vec<HostToolDef>,
        port: CallPort,
        reply: Sender<Result<(), EmbedError>>,
    },
    Close {
        session: String,
        reply: Sender<Result<(), EmbedError>>,
    },
    Dispatcher {
        reply: Sender<Arc<Dispatcher>>,
    },
    Metadata {
        reply: Sender<String>,
    },
    Shutdown,
}

/// Reads the host's options into a session's, loading its policy as `replay` does.
pub(super) fn session_options(config: &Config, options: OpenOptions) -> Result<SessionOptions, EmbedError> {
    let approval_mode = options
        .approval_mode
        .as_deref()
        .map(|m| m.parse::<ApprovalMode>().map_err(EmbedError::Config))
        .transpose()?;
    let workspace = options.workspace.unwrap_or_else(|| std::path::PathBuf::from("."));
    if !workspace.is_dir() {
        return Err(EmbedError::Config(format!("workspace `{}` is not a folder", workspace.display())));
    }
    let policy = toolslot::policy::Policy::load(config, &workspace).map_err(|e| EmbedError::Config(e.to_string()))?;
    if let Some(why) = policy.forbids(approval_mode.unwrap_or(config.approval.mode)) {
        return Err(EmbedError::Config(why));
    }
    Ok(SessionOptions {
        workspace: Some(workspace),
        approval_mode,
        dialect: options.dialect,
        policy: Some(Arc::new(policy)),
    })
}

/// Starts the runtime thread; returns once its toolset is built (or failed to build).
pub(super) fn spawn(
    config: Arc<Config>,
    tools: Vec<HostToolDef>,
    calls: CallPort,
) -> Result<(tokio::sync::mpsc::UnboundedSender<Command>, std::thread::JoinHandle<()>), EmbedError> {
    let (commands, mut inbox) = tokio::sync::mpsc::unbounded_channel::<Command>();
    let (ready_tx, ready) = crossbeam_channel::bounded::<Result<(), EmbedError>>(1);
    let thread = std::thread::Builder::new()
        .name("toolslot-runtime".into())
        .spawn(move || {
            actix_rt::System::new().block_on(async move {
                let toolset = match crate::host::toolset::build_toolset(Arc::clone(&config), None).await {
                    Ok(t) => t,
                    Err(e) => {
                        let _ = ready_tx.send(Err(EmbedError::Config(e)));
                        return;
                    }
                };
                for notice in toolset.notices.iter().chain(toolset.registry.current().notices()) {
                    tracing::warn!(kind = ?notice.kind, "{}", notice.message);
                }
                if !tools.is_empty()
                    && let Err(e) = add_tools(&toolset.registry, tools, &calls)
                {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
                let dispatcher = toolset.attach(Dispatcher::new(Arc::clone(&config), toolset.registry.clone()));
                let _ = ready_tx.send(Ok(()));
                while let Some(command) = inbox.recv().await {
                    if !handle(&dispatcher, &toolset.registry, command) {
                        break;
                    }
                }
                // Sessions are closed (their ledgers sealed) and servers stopped before the
                // thread ends, so no process outlives the host's slot.
                for id in dispatcher.session_ids() {
                    if let Ok(sealing) = dispatcher.close_session(&id) {
                        let _ = sealing.wait().await;
                    }
                }
                crate::host::toolset::shutdown_servers(&toolset.mcp).await;
            });
        })
        .map_err(|e| EmbedError::Stopped(format!(": cannot start its thread: {e}")))?;
    match ready.recv() {
        Ok(Ok(())) => Ok((commands, thread)),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => {
            // The thread ended without a word: it panicked while building.
            let why = thread.join().err().map(|p| panic_text(&p)).unwrap_or_default();
            Err(EmbedError::Stopped(format!(" while starting{why}")))
        }
    }
}

fn panic_text(payload: &Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .map(|s| format!(": {s}"))
        .unwrap_or_default()
}

fn add_tools(registry: &toolslot::registry::LiveRegistry, tools: Vec<HostToolDef>, calls: &CallPort) -> Result<(), EmbedError> {
    // The registry skips a name it holds already (a server listing a tool again); a host
    // tool under a taken name would silently not be the host's, so it is refused here.
    let current = registry.current();
    let taken: Vec<String> = tools
        .iter()
        .filter(|t| current.get(&t.name).is_some())
        .map(|t| format!("tool `{}`: the name is taken", t.name))
        .collect();
    if !taken.is_empty() {
        return Err(EmbedError::Config(taken.join("; ")));
    }
    let specs: Vec<Arc<dyn ToolSpec>> = tools.into_iter().map(|t| t.into_tool(calls.clone())).collect();
    let fails_closed = |n: &toolslot::notice::Notice| n.kind == toolslot::notice::NoticeKind::FailClosedTool;
    let (_, notices) = registry.append_if(specs, |notices| !notices.iter().any(fails_closed));
    let refused: Vec<String> = notices.iter().filter(|n| fails_closed(n)).map(|n| n.message.clone()).collect();
    if refused.is_empty() {
        Ok(())
    } else {
        Err(EmbedError::Config(refused.join("; ")))
    }
}

/// Handles one command; false when the runtime is to stop.
fn handle(dispatcher: &Arc<Dispatcher>, registry: &toolslot::registry::LiveRegistry, command: Command) -> bool {
    match command {
        Command::Open { options, reply } => {
            let _ = reply.send(dispatcher.open_session(options));
        }
        Command::Submit {
            session,
            dialect,
            mut chunks,
            events,
            wake,
            reply,
        } => {
            let stream = futures::stream::poll_fn(move |cx| chunks.poll_recv(cx)).boxed();
            match dispatcher.submit_round_in(&session, RoundInput::Bytes(stream), dialect) {
                Ok(mut rx) => {
                    let _ = reply.send(Ok(()));
                    // Forwarded as they come, so the host sees calls start while its bytes are
                    // still arriving; the channel closes after the last round_complete.
                    actix_rt::spawn(async move {
                        while let Some(event) = rx.recv().await {
                            if events.send(event).is_err() {
                                break;
                            }
                            wake.wake();
                        }
                        // The end is news too: the reader learns it from the closed channel.
                        drop(events);
                        wake.wake();
                    });
                }
                Err(e) => {
                    let _ = reply.send(Err(EmbedError::Dispatch(e.to_string())));
                }
            }
        }
        Command::Answer {
            session,
            index,
            request,
            decision,
            reply,
        } => {
            let dispatcher = Arc::clone(dispatcher);
            actix_rt::spawn(async move {
                let answered = dispatcher.answer_request(&session, index, request, decision).await;
                let _ = reply.send(answered.map_err(|e| EmbedError::Dispatch(e.to_string())));
            });
        }
        Command::Catalog { session, format, reply } => {
            let catalog = match session {
                Some(id) => dispatcher.catalog(&id).map_err(|e| EmbedError::Dispatch(e.to_string())),
                None => Ok(dispatcher.registry().catalog()),
            };
            let _ = reply.send(catalog.map(|c| c.render(format).to_string()));
        }
        Command::AddTools { tools, port, reply } => {
            let _ = reply.send(add_tools(registry, tools, &port));
        }
        Command::Close { session, reply } => match dispatcher.close_session(&session) {
            Ok(sealing) => {
                actix_rt::spawn(async move {
                    let sealed = sealing.wait().await.map_err(|e| EmbedError::Dispatch(e.to_string()));
                    let _ = reply.send(sealed);
                });
            }
            Err(e) => {
                let _ = reply.send(Err(EmbedError::Dispatch(e.to_string())));
            }
        },
        Command::Dispatcher { reply } => {
            let _ = reply.send(Arc::clone(dispatcher));
        }
        Command::Metadata { reply } => {
            let json = serde_json::to_string(&dispatcher.metadata()).unwrap_or_else(|_| "[]".into());
            let _ = reply.send(json);
        }
        Command::Shutdown => return false,
    }
    true
}
