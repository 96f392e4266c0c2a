//! The seam between registry and pipeline: an eager snapshot of what a tool is.

use serde::Serialize;

use super::capability::{ApprovalRequirement, ToolSource, derive_approval, is_read_only};
use super::{Capability, ToolSpec};
use crate::config::NetworkPolicy;

/// An input-independent snapshot of one tool, taken once at admission, so the planner and
/// executor never have to call into the tool (or lock the registry) to schedule a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolMetadata {
    /// The tool's name.
    pub name: String,
    /// Declares ReadOnly and nothing that contradicts it.
    pub read_only: bool,
    /// read_only and supports_parallel and not interactive: may share a concurrent batch.
    pub parallel_safe: bool,
    /// Approval derived from capabilities under the network policy in force.
    pub static_approval: ApprovalRequirement,
    /// Reaches the network.
    pub network: bool,
    /// Talks to the user.
    pub interactive: bool,
    /// Absent from the catalog until activated.
    pub deferred: bool,
    /// Exempt from the loop guard's repeat rule.
    pub loop_exempt: bool,
    /// Where it comes from.
    pub source: ToolSource,
    /// Whether its source said what it does. `false`: its capabilities are unknown (an
    /// extension that declared none, a server tool without believed annotations), and it is
    /// treated as needing approval.
    pub capabilities_declared: bool,
    /// Whether what it returns comes from outside toolslot (an MCP server, an extension
    /// program, the network): such content is wrapped as external content.
    pub external: bool,
}

impl ToolMetadata {
    /// Takes the snapshot.
    pub fn of(spec: &dyn ToolSpec, policy: NetworkPolicy) -> Self {
        let caps = spec.capabilities();
        let read_only = is_read_only(caps);
        let interactive = caps.contains(&Capability::Interactive);
        Self {
            name: spec.name().to_string(),
            read_only,
            parallel_safe: read_only && spec.supports_parallel() && !interactive,
            static_approval: derive_approval(caps, policy),
            network: caps.contains(&Capability::Network),
            interactive,
            deferred: spec.defer_loading(),
            loop_exempt: spec.loop_exempt(),
            source: spec.source(),
            capabilities_declared: spec.capabilities_declared(),
            external: matches!(spec.source(), ToolSource::Mcp | ToolSource::Extension) || caps.contains(&Capability::Network),
        }
    }
}
