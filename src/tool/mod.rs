//! The three layers every tool goes through: framework [`Tool`], production [`ToolSpec`], and
//! the [`ToolMetadata`] seam the pipeline reads.
//!
//! A tool author writes a `Tool` (what it is and how it runs) and a `ToolSpec` (what it may
//! do: capabilities, per-input approval, semantic checks). Approval is *derived* from the
//! declared capabilities by [`Approvals::approval_requirement`], which no tool can override,
//! so a tool cannot grant itself a quieter approval than its capabilities call for.
//!
//! # Example
//! ```
//! use toolslot::tool::{Capability, Tool, ToolSpec, ToolContext, ToolOutput, ToolFuture};
//! use serde_json::{json, Value};
//!
//! struct Echo;
//! impl Tool for Echo {
//!     fn name(&self) -> &str { "echo" }
//!     fn description(&self) -> &str { "Echo the text back" }
//!     fn input_schema(&self) -> Value {
//!         json!({"type": "object", "properties": {"text": {"type": "string"}}})
//!     }
//!     fn run<'a>(&'a self, input: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
//!         Box::pin(async move { Ok(ToolOutput::text(input["text"].to_string())) })
//!     }
//! }
//! impl ToolSpec for Echo {
//!     fn capabilities(&self) -> &[Capability] { &[Capability::ReadOnly] }
//! }
//! ```

// Its own floor below `event` (tests/suite/tidy.rs): it must not name the rest of `tool`.
pub(crate) mod capability;
mod context;
mod error;
mod hidden;
mod metadata;
mod output;
mod services;

use futures::future::BoxFuture;
use serde_json::Value;

use crate::config::NetworkPolicy;

pub use capability::{ApprovalRequirement, Capability, ToolSource, derive_approval, is_read_only};
pub use context::{Grant, NoServices, SessionServices, ToolContext};
pub use error::{ErrorCategory, ToolError};
pub use hidden::{HiddenPaths, Screen};
pub use metadata::ToolMetadata;
pub use output::{CutReport, OutputKind, ToolOutput};
pub use services::{Detached, InputAnswer, InputRequest, OutputFile, SearchHit, SessionState, ToolFinder};

/// The future a tool's `run` returns.
pub type ToolFuture<'a> = BoxFuture<'a, Result<ToolOutput, ToolError>>;

/// Framework layer: what a tool is and how it runs. Knows nothing of approval or sandboxing.
pub trait Tool: Send + Sync {
    /// The name the model calls it by (`^[a-zA-Z0-9_-]{1,64}$`, checked at admission).
    fn name(&self) -> &str;
    /// What the tool does, written for the model.
    fn description(&self) -> &str;
    /// JSON Schema of the arguments; its root must be an object schema.
    fn input_schema(&self) -> Value;
    /// A human-readable title, when the tool has one (an MCP tool's `title`): tool_search
    /// indexes it beside the name.
    fn title(&self) -> Option<&str> {
        None
    }
    /// JSON Schema of the structured value a successful result carries, when the tool declares
    /// one (an MCP tool's `outputSchema`): `toolslot mcp` lists it with the tool.
    fn output_schema(&self) -> Option<&Value> {
        None
    }
    /// Runs the tool on validated arguments.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the call; tools that start processes must kill them on
    /// drop (exec_shell does, through `kill_on_drop` and its process group).
    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> ToolFuture<'a>;
}

/// Production layer: what a tool may do, from which approval and scheduling follow.
pub trait ToolSpec: Tool {
    /// The declared capabilities. Fail-safe reading: no `ReadOnly` means "may change things".
    fn capabilities(&self) -> &[Capability];

    /// Where the tool comes from.
    fn source(&self) -> ToolSource {
        ToolSource::Builtin
    }

    /// Whether the capabilities are the tool's source's own word. A tool whose source said
    /// nothing (an extension declaring no capabilities) reports `false` and declares
    /// `RequiresApproval`: undeclared means unknown, never read-only.
    fn capabilities_declared(&self) -> bool {
        true
    }

    /// Set on a stand-in for a tool that could not be made (a malformed entry of a server's
    /// listing): the registry lists it fail-closed with this reason, and says so.
    fn fail_closed_reason(&self) -> Option<&str> {
        None
    }

    /// What its source changed to admit it (descriptions trimmed, a name that was taken):
    /// the registry reports it in a `tool_adjusted` notice.
    fn admission_note(&self) -> Option<String> {
        None
    }

    /// Approval for this particular input; defaults to the capability-derived requirement.
    /// A shell tool overrides it so that `ls` runs and `rm` asks.
    fn approval_requirement_for_input(&self, input: &Value, policy: crate::config::NetworkPolicy) -> ApprovalRequirement {
        let _ = input;
        self.approval_requirement(policy)
    }

    /// Semantic checks beyond the JSON Schema (run after schema validation, before approval).
    ///
    /// # Errors
    /// A [`ToolError`] of category `invalid_input` naming the field.
    fn check_input(&self, input: &Value) -> Result<(), ToolError> {
        let _ = input;
        Ok(())
    }

    /// Whether the tool stays out of the catalog until tool_search activates it.
    fn defer_loading(&self) -> bool {
        false
    }

    /// Whether calls may run concurrently with other parallel-safe calls. False by default:
    /// a tool that did not say it is safe is treated as unsafe.
    fn supports_parallel(&self) -> bool {
        false
    }

    /// Whether identical repeated calls are legitimate (a poll) and exempt from the loop guard.
    fn loop_exempt(&self) -> bool {
        false
    }

    /// The loose key an `approved_for_session` decision covers. The default is the tool name
    /// plus the canonical arguments, i.e. an exact match, which is the fail-safe choice.
    fn approval_key(&self, input: &Value) -> String {
        format!("{}:{}", self.name(), crate::canonical::canonical_json(input))
    }

    /// Something each session should be told once before it uses this tool (exec_shell without
    /// a sandbox: everything asks), or `None`.
    fn session_notice(&self) -> Option<String> {
        None
    }

    /// Renamed fields a model commonly sends (old name → schema name), used to teach the
    /// model when a call is refused.
    fn field_aliases(&self) -> &[(&'static str, &'static str)] {
        &[]
    }
}

/// The capability-derived approval, for every [`ToolSpec`]. A blanket trait rather
/// than a provided method, so no tool can override it and grant itself a quieter approval.
pub trait Approvals {
    /// Approval derived from the declared capabilities and the network policy.
    fn approval_requirement(&self, policy: NetworkPolicy) -> ApprovalRequirement;
}

impl<T: ToolSpec + ?Sized> Approvals for T {
    fn approval_requirement(&self, policy: NetworkPolicy) -> ApprovalRequirement {
        derive_approval(self.capabilities(), policy)
    }
}
