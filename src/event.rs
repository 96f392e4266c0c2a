//! Pipeline events: what a host sees of a round (docs/CONTRACT.md, "Events").

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::notice::Notice;

/// What must happen before a call may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalRequirement {
    /// Runs without asking.
    Auto,
    /// Asks in `ask` mode, runs in `auto-edit` and `full-auto`.
    Suggest,
    /// Asks unless `full-auto`.
    Required,
    /// Never runs (network tools under `network.policy = "deny"`).
    Refused,
}

/// Why the model stopped, normalized across providers (docs/CONTRACT.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// It asked for tools.
    ToolUse,
    /// It finished its turn.
    EndTurn,
    /// It hit its output limit (`length`, `max_output_tokens`, `MAX_TOKENS`).
    MaxTokens,
    /// A stop sequence ended it.
    StopSequence,
    /// Anything else, or no reason given.
    #[default]
    Other,
}

/// The ladder step that made arguments parse (the last one needed when several were).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RepairStep {
    /// Raw control characters inside strings.
    ControlChars,
    /// Trailing commas.
    TrailingCommas,
    /// Unclosed strings, literals and brackets.
    CloseBrackets,
    /// Closing symbols that matched nothing.
    ExtraClosers,
    /// The whole arguments were a JSON string holding the object.
    DecodedString,
}

impl RepairStep {
    /// The step's name in events (`repair` field).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ControlChars => "control_chars",
            Self::TrailingCommas => "trailing_commas",
            Self::CloseBrackets => "close_brackets",
            Self::ExtraClosers => "extra_closers",
            Self::DecodedString => "decoded_string",
        }
    }
}

/// What repair made of a call's arguments (the `repair` field of `call_assembled`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepairMark {
    /// Valid as sent.
    None,
    /// Fixed by this step.
    Step(RepairStep),
    /// Not repairable (or refused because the round was cut).
    Rejected,
}

impl Serialize for RepairMark {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::None => s.serialize_none(),
            Self::Step(step) => s.serialize_str(step.as_str()),
            Self::Rejected => s.serialize_str("rejected"),
        }
    }
}

/// A host's (or a cache's) decision on an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// Run this call.
    Approved,
    /// Run this call and later ones with the same approval key.
    ApprovedForSession,
    /// Run this call, and later ones with the same approval key in this project: an allow rule
    /// was written into the project's policy file.
    ApprovedForProject,
    /// Do not run it.
    Rejected,
    /// Do not run it, nor later calls with the same approval key in this session.
    RejectedForSession,
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
        id: String,
        /// Name as the model sent it.
        name: String,
        /// Arguments after repair (`{}` when rejected).
        input: Value,
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
        id: String,
        /// Resolved name.
        name: String,
        /// Arguments.
        input: Value,
        /// Started before the stream ended.
        speculative: bool,
    },
    /// The host must decide.
    ApprovalRequired {
        /// Index in the response.
        index: usize,
        /// Provider id.
        id: String,
        /// Resolved name.
        name: String,
        /// `required` or `suggest`.
        requirement: ApprovalRequirement,
        /// Arguments.
        input: Value,
    },
    /// An event of a sub-agent's session, which call `index` (spawn_agent) started: its
    /// approval requests and decisions, so the host can answer them at `session` (the child's
    /// id, on the same dispatcher). A grandchild's events arrive here too, with its session.
    Subagent {
        /// Index of the spawn_agent call in this session's response.
        index: usize,
        /// That call's provider id.
        id: String,
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
        id: String,
        /// The decision.
        decision: ApprovalDecision,
    },
    /// Nobody decided on call `index` within `approval.timeout_ms`: it was refused, and nothing
    /// was remembered.
    ApprovalExpired {
        /// Index in the response.
        index: usize,
        /// Provider id.
        id: String,
        /// How long it waited (ms).
        timeout_ms: u64,
    },
    /// A pre_tool_use hook rewrote call `index`'s input; the call was judged again (rules,
    /// approval) as the input it now is, and runs with `input`.
    InputRewritten {
        /// Index in the response.
        index: usize,
        /// Provider id.
        id: String,
        /// The hook's command.
        hook: String,
        /// The input as the model sent it (after repair).
        original_input: Value,
        /// The input that is judged and runs.
        input: Value,
    },
    /// A tool (or its refusal) ended.
    CallFinished {
        /// Index in the response.
        index: usize,
        /// Provider id.
        id: String,
        /// Resolved name.
        name: String,
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
        id: String,
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
