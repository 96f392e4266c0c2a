//! Tools whose body the host runs: admitted, planned and governed as every other tool, with
//! only the run handed to the host through the submission's channel.

use std::sync::Arc;

use super::wake::CallPort;
use serde_json::Value;
use toolslot::tool::{Capability, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};

/// A tool the host defines: what the registry needs to admit it.
#[derive(Debug, Clone)]
pub struct HostToolDef {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments (an object schema).
    pub input_schema: Value,
    /// What it may do; approval is derived from these as for a built-in.
    pub capabilities: Vec<Capability>,
}

impl HostToolDef {
    pub(super) fn into_tool(self, calls: CallPort) -> Arc<dyn ToolSpec> {
        Arc::new(HostTool { def: self, calls })
    }
}

/// One run of a host tool, waiting for the host's answer.
#[derive(Debug)]
pub struct HostCall {
    /// The session the call belongs to.
    pub session: String,
    /// The call's index in the response.
    pub index: usize,
    /// The provider's call id.
    pub id: String,
    /// The tool.
    pub name: String,
    /// The validated (and approved) arguments.
    pub input: Value,
    reply: tokio::sync::oneshot::Sender<Result<String, String>>,
}

impl HostCall {
    /// Answers the call: `Ok(text)` is its result, `Err(message)` a `tool_error` with that
    /// message. An answer to a call that was cancelled meanwhile is dropped.
    pub fn finish(self, outcome: Result<String, String>) {
        let _ = self.reply.send(outcome);
    }
}

struct HostTool {
    def: HostToolDef,
    calls: CallPort,
}

impl Tool for HostTool {
    fn name(&self) -> &str {
        &self.def.name
    }
    fn description(&self) -> &str {
        &self.def.description
    }
    fn input_schema(&self) -> Value {
        self.def.input_schema.clone()
    }
    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let (reply, answer) = tokio::sync::oneshot::channel();
            let call = HostCall {
                session: ctx.session_id.clone(),
                index: ctx.index,
                id: ctx.call_id.clone(),
                name: self.def.name.clone(),
                input,
                reply,
            };
            if self.calls.send(call).is_err() {
                return Err(ToolError::tool(format!("`{}` cannot run: its host has gone", self.def.name)));
            }
            match answer.await {
                Ok(Ok(text)) => Ok(ToolOutput::text(text)),
                Ok(Err(message)) => Err(ToolError::tool(message)),
                // The host dropped the call without an answer (its iterator was abandoned).
                Err(_) => Err(ToolError::tool(format!(
                    "`{}` ended without a result: its host stopped reading the round",
                    self.def.name
                ))),
            }
        })
    }
}

impl ToolSpec for HostTool {
    fn capabilities(&self) -> &[Capability] {
        &self.def.capabilities
    }
    fn supports_parallel(&self) -> bool {
        // As the built-ins: only what only reads runs beside other calls.
        self.def.capabilities.contains(&Capability::ReadOnly)
    }
}
