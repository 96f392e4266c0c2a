//! The stand-in for a tool that could not be admitted.

use serde_json::{Value, json};

use crate::tool::{Capability, ErrorCategory, Tool, ToolContext, ToolError, ToolFuture, ToolSource, ToolSpec};

/// What the model reads about a fail-closed tool.
pub const FAIL_CLOSED_DESCRIPTION: &str = "Unavailable: this tool failed to initialize and is in a fail-closed state. Do not call it.";

/// A tool that failed admission. It stays in the catalog under a valid name so the model is
/// told, rather than left to guess, and every call answers that it is unavailable and why.
#[derive(Debug)]
pub struct FailClosedTool {
    name: String,
    original: String,
    reason: String,
    source: ToolSource,
}

impl FailClosedTool {
    /// A fail-closed stand-in listed as `name` for the tool originally called `original`.
    pub fn new(name: String, original: String, reason: String, source: ToolSource) -> Self {
        Self {
            name,
            original,
            reason,
            source,
        }
    }
}

impl Tool for FailClosedTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        FAIL_CLOSED_DESCRIPTION
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    fn run<'a>(&'a self, _input: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            Err(ToolError::refused(
                ErrorCategory::Unavailable,
                format!(
                    "Tool `{}` is unavailable: it failed to initialize ({}). Do not call it again; \
                     use another tool or tell the user.",
                    self.original, self.reason
                ),
            ))
        })
    }
}

impl ToolSpec for FailClosedTool {
    fn capabilities(&self) -> &[Capability] {
        // Declares nothing: it never does anything, and nothing about it may run in parallel.
        &[]
    }
    fn fail_closed_reason(&self) -> Option<&str> {
        Some(&self.reason)
    }
    fn source(&self) -> ToolSource {
        self.source
    }
}
