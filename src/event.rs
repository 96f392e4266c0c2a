//! Pipeline events: what a host sees of a round (docs/CONTRACT.md, "Events").

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::notice::Notice;
use crate::plan::RepairMark;
use crate::stream::StopReason;
use crate::tool::ApprovalRequirement;

/// A host's (or a cache's) decision on an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// Run this call.
    Approved,
    /// Run this call and later ones with the same approval key.
    ApprovedForSession,
    /// Do not run it.
    Rejected,
    /// Covered by an earlier `approved_for_session`.
    CachedApproval,
    /// The same call was rejected before.
    CachedRejection,
}

/// One tool result handed back to the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolResult {
    /// The call's index in the response.
    pub index: usize,
    /// The provider's call id.
    pub tool_use_id: String,
    /// The tool name as resolved (as written when unresolved).
    pub name: String,
    /// Whether the result is an error.
    pub is_error: bool,
    /// The text for the model.
    pub content: String,
}

/// An event of the pipeline, serialized with a `"type"` tag.
///
/// Ids, names and arguments are shared (`Arc`): the pipeline hands the same call's identity to
/// every event about it without copying it per event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PipelineEvent {
    /// Something the host should know.
    Notice(Notice),
    /// A call's arguments are complete.
    CallAssembled {
        /// Index in the response.
        index: usize,
        /// Provider id.
        id: Arc<str>,
        /// Name as the model sent it.
        name: Arc<str>,
        /// Arguments after repair (`{}` when rejected).
        input: Arc<Value>,
        /// What repair did.
        repair: RepairMark,
        /// Gemini's thought signature, to send back with the call (absent elsewhere).
        #[serde(skip_serializing_if = "Option::is_none")]
        thought_signature: Option<String>,
    },
    /// A tool begins executing.
    CallStarted {
        /// Index in the response.
        index: usize,
        /// Provider id.
        id: Arc<str>,
        /// Resolved name.
        name: Arc<str>,
        /// Arguments.
        input: Arc<Value>,
        /// Started before the stream ended.
        speculative: bool,
    },
    /// The host must decide.
    ApprovalRequired {
        /// Index in the response.
        index: usize,
        /// Provider id.
        id: Arc<str>,
        /// Resolved name.
        name: Arc<str>,
        /// `required` or `suggest`.
        requirement: ApprovalRequirement,
        /// Arguments.
        input: Arc<Value>,
    },
    /// An event of a sub-agent's session, which call `index` (spawn_agent) started: its
    /// approval requests and decisions, so the host can answer them at `session` (the child's
    /// id, on the same dispatcher). A grandchild's events arrive here too, with its session.
    Subagent {
        /// Index of the spawn_agent call in this session's response.
        index: usize,
        /// That call's provider id.
        id: Arc<str>,
        /// The session the event belongs to: answer its approvals there.
        session: String,
        /// The event (`approval_required` or `approval_decided`).
        event: Box<PipelineEvent>,
    },
    /// A decision was made.
    ApprovalDecided {
        /// Index in the response.
        index: usize,
        /// Provider id.
        id: Arc<str>,
        /// The decision.
        decision: ApprovalDecision,
    },
    /// A tool (or its refusal) ended.
    CallFinished {
        /// Index in the response.
        index: usize,
        /// Provider id.
        id: Arc<str>,
        /// Resolved name.
        name: Arc<str>,
        /// Whether the result is an error.
        is_error: bool,
        /// Wall time of the execution (0 for refusals).
        duration_ms: u64,
    },
    /// A running call reported progress (MCP progress notifications).
    Progress {
        /// Index in the response.
        index: usize,
        /// Provider id.
        id: Arc<str>,
        /// Progress so far.
        progress: f64,
        /// Total, when known.
        #[serde(skip_serializing_if = "Option::is_none")]
        total: Option<f64>,
        /// What is happening, when said.
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// The last event of a round.
    RoundComplete {
        /// Normalized stop reason.
        stop_reason: StopReason,
        /// Assistant text, forged calls stripped.
        text: String,
        /// Exactly one result per call, by index.
        results: Vec<ToolResult>,
    },
}
