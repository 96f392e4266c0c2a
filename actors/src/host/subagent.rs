//! `spawn_agent`: a child session, built by the same registry builder as its parent, driven by
//! a host-supplied runner; the child's final text is the tool's result.

use std::sync::{Arc, Mutex, Weak};

use futures::future::BoxFuture;
use serde_json::{Value, json};
use toolslot::event::{PipelineEvent, ToolResult};
use toolslot::registry::Registry;
use toolslot::tool::{Capability, ErrorCategory, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSource, ToolSpec};

use crate::host::dispatcher::Dispatcher;
use crate::pipeline::chain::RoundInput;
use crate::pipeline::session::SessionOptions;

/// One turn of a child's conversation so far.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// What the model said (its text).
    Assistant(String),
    /// The results toolslot handed back for that turn's calls.
    Results(Vec<ToolResult>),
}

/// Drives a child's model: given the task and the conversation so far, the model's next
/// response as the provider's raw SSE bytes.
pub trait AgentRunner: Send + Sync {
    /// The next response.
    fn next_response<'a>(&'a self, task: &'a str, depth: usize, turns: &'a [Turn]) -> BoxFuture<'a, Result<Vec<u8>, String>>;
}

/// A runner that answers from recorded responses: a child's n-th turn gets the n-th one (every
/// child, at any depth, starts at the first). For replays, demos and tests, where no model is
/// reachable.
pub struct RecordedRunner {
    responses: Vec<Vec<u8>>,
}

impl RecordedRunner {
    /// A runner over these responses (raw SSE bodies), in turn order.
    pub fn new(responses: Vec<Vec<u8>>) -> Self {
        Self { responses }
    }

    /// A runner over recorded response files, in the order given.
    ///
    /// # Errors
    /// A one-line reason naming the file that cannot be read.
    pub fn from_files(files: &[std::path::PathBuf]) -> Result<Self, String> {
        let responses = files
            .iter()
            .map(|f| std::fs::read(f).map_err(|e| format!("cannot read agent response `{}`: {e}", f.display())))
            .collect::<Result<_, _>>()?;
        Ok(Self { responses })
    }
}

impl AgentRunner for RecordedRunner {
    fn next_response<'a>(&'a self, _task: &'a str, _depth: usize, turns: &'a [Turn]) -> BoxFuture<'a, Result<Vec<u8>, String>> {
        let n = turns.iter().filter(|t| matches!(t, Turn::Assistant(_))).count();
        let answer = self.responses.get(n).cloned().ok_or_else(|| {
            format!(
                "the recorded agent has {} responses and was asked for turn {}",
                self.responses.len(),
                n + 1
            )
        });
        Box::pin(async move { answer })
    }
}

/// Builds the registry for a session at `depth` (0 = the host's own session). The same
/// function builds the parent's and every child's, so children get the same tools, governed
/// the same way.
pub type RegistryFactory = Arc<dyn Fn(usize) -> Arc<Registry> + Send + Sync>;

/// The `spawn_agent` tool of a session at `depth`.
pub struct SpawnAgent {
    depth: usize,
    runner: Arc<dyn AgentRunner>,
    factory: RegistryFactory,
    /// The dispatcher children run on; set once it exists (it needs the registry first).
    dispatcher: Arc<Mutex<Weak<Dispatcher>>>,
}

impl SpawnAgent {
    /// A spawn_agent at `depth`, whose children are built by `factory` and run on the
    /// dispatcher later put in `dispatcher`.
    pub fn new(depth: usize, runner: Arc<dyn AgentRunner>, factory: RegistryFactory, dispatcher: Arc<Mutex<Weak<Dispatcher>>>) -> Self {
        Self {
            depth,
            runner,
            factory,
            dispatcher,
        }
    }
}

impl Tool for SpawnAgent {
    fn name(&self) -> &str {
        "spawn_agent"
    }
    fn description(&self) -> &str {
        "Hand a self-contained task to a sub-agent with the same tools. It works on its own and returns its final answer as text."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"task": {"type": "string", "minLength": 1, "description": "The task, with everything the sub-agent needs to know"}}, "required": ["task"], "additionalProperties": false})
    }
    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let task = input.get("task").and_then(Value::as_str).unwrap_or("").to_string();
            let parent = self.dispatcher.lock().unwrap_or_else(|p| p.into_inner()).upgrade();
            let Some(parent) = parent else {
                return Err(ToolError::refused(
                    ErrorCategory::Unavailable,
                    "spawn_agent is not connected to a dispatcher",
                ));
            };
            let depth = self.depth + 1;
            // The child lives beside its parent, with tools built one level deeper, and works
            // under the parent session's approval mode: what would need the user's approval in
            // the parent needs it in the child, and the host answers it at the child's session
            // (its requests are relayed into the parent's events).
            let mode = ctx.services.approval_mode().unwrap_or(ctx.config.approval.mode);
            let session = parent.open_session_on(
                SessionOptions {
                    workspace: Some(ctx.workspace.clone()),
                    approval_mode: Some(mode),
                    dialect: None,
                    // The same workspace: the same layers, read again.
                    policy: None,
                },
                (self.factory)(depth),
                depth,
            );
            // However this call ends (done, cancelled with the parent's round, timed out), the
            // child's round is cancelled and its session closed.
            let child = ChildSession {
                dispatcher: Arc::clone(&parent),
                session,
            };
            let session = child.session.clone();
            let mut turns: Vec<Turn> = Vec::new();
            let mut last_text = String::new();
            for _ in 0..ctx.config.subagents.max_turns.max(1) {
                let body = self
                    .runner
                    .next_response(&task, depth, &turns)
                    .await
                    .map_err(|e| ToolError::tool(format!("the sub-agent's model failed: {e}")))?;
                let mut events = child
                    .dispatcher
                    .submit_round(&session, RoundInput::Bytes(Box::pin(futures::stream::iter([Ok(body)]))))
                    .map_err(|e| ToolError::tool(e.to_string()))?;
                let mut results = Vec::new();
                while let Some(e) = events.recv().await {
                    match e {
                        PipelineEvent::RoundComplete { text, results: r, .. } => {
                            last_text = text;
                            results.extend(r);
                        }
                        PipelineEvent::ApprovalRequired { .. } | PipelineEvent::ApprovalDecided { .. } => {
                            ctx.services.relay(PipelineEvent::Subagent {
                                index: ctx.index,
                                id: ctx.call_id.as_str().into(),
                                session: session.clone(),
                                event: Box::new(e),
                            });
                        }
                        // A grandchild's: passed up as it is, with this call as the way in.
                        PipelineEvent::Subagent {
                            session: deeper, event, ..
                        } => {
                            ctx.services.relay(PipelineEvent::Subagent {
                                index: ctx.index,
                                id: ctx.call_id.as_str().into(),
                                session: deeper,
                                event,
                            });
                        }
                        _ => {}
                    }
                }
                turns.push(Turn::Assistant(last_text.clone()));
                if results.is_empty() {
                    return Ok(ToolOutput::text(last_text));
                }
                turns.push(Turn::Results(results));
            }
            Ok(ToolOutput::error_text(format!(
                "The sub-agent did not finish within {} turns. Its last words: {last_text}",
                ctx.config.subagents.max_turns
            )))
        })
    }
}

/// A child session, closed (its round cancelled) when dropped.
struct ChildSession {
    dispatcher: Arc<Dispatcher>,
    session: String,
}

impl Drop for ChildSession {
    fn drop(&mut self) {
        let _ = self.dispatcher.close_session(&self.session);
    }
}

impl ToolSpec for SpawnAgent {
    fn capabilities(&self) -> &[Capability] {
        // A child spends model calls and can use every tool: the user decides.
        &[Capability::RequiresApproval]
    }
    fn source(&self) -> ToolSource {
        ToolSource::Subagent
    }
}
