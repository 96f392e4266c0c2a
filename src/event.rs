//! Pipeline events: what a host sees of a round (docs/CONTRACT.md, "Events").

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::notice::Notice;
/// Re-exported where events name it; it belongs to the tool contract.
pub use crate::tool::capability::ApprovalRequirement;

/// Why the model stopped, normalized across providers (docs/CONTRACT.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
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

/// A repair the ladder applied to arguments (docs/CONTRACT.md, "Repair step names"); the
/// `repair` field names the last one applied, in the order of `repair::args::LADDER`.
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
    /// A markdown fence or lines of prose around the one object were dropped.
    SurroundingText,
    /// `//`, `/* */` and `#` comments between tokens were dropped.
    Comments,
    /// Strings and keys in single (or typographic) quotes were requoted.
    SingleQuotes,
    /// `True`, `False`, `None` (and other spellings of `true`, `false`, `null`) were lowercased.
    PythonLiterals,
    /// Keys written without quotes were quoted.
    UnquotedKeys,
    /// A colon missing between a key and its value on the same line was added.
    MissingColons,
    /// A comma missing between members or elements on separate lines was added.
    MissingCommas,
    /// Commas with nothing before or after them (leading, doubled, after the root) were dropped.
    StrayCommas,
    /// Quotes inside a string value that could not close it were escaped.
    EmbeddedQuotes,
    /// The quote missing before the closing brackets at the end was added.
    MissingQuote,
    /// A number ending in `.` or an exponent without digits lost that ending.
    IncompleteNumber,
    /// A closing bracket of the wrong kind was read as the one that was open.
    MismatchedClosers,
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
            Self::SurroundingText => "surrounding_text",
            Self::Comments => "comments",
            Self::SingleQuotes => "single_quotes",
            Self::PythonLiterals => "python_literals",
            Self::UnquotedKeys => "unquoted_keys",
            Self::MissingColons => "missing_colons",
            Self::MissingCommas => "missing_commas",
            Self::StrayCommas => "stray_commas",
            Self::EmbeddedQuotes => "embedded_quotes",
            Self::MissingQuote => "missing_quote",
            Self::IncompleteNumber => "incomplete_number",
            Self::MismatchedClosers => "mismatched_closers",
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

/// What the user did with an input request (MCP elicitation's actions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputAction {
    /// Answered with content.
    Accept,
    /// Refused to answer (the call goes on without it); also what silence becomes.
    Decline,
    /// Dismissed the question (the server should stop what it asked for).
    Cancel,
}

/// One tool result handed back to the model. Deserializable: a durable session's record
/// keeps the results of its last round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// The result as content blocks, when it holds more than text (an MCP tool's images or
    /// audio): a text block with `content`, then each media block within
    /// `output.block_max_bytes`. A host that can send such blocks in a tool result sends these
    /// instead of `content`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<Vec<Value>>,
    /// The structured value the tool returned (an MCP tool's `structuredContent`), whole,
    /// whatever `content` shows of it. Not part of the event stream (the model reads
    /// `content`): a host that speaks a protocol with a place for it (`toolslot mcp`'s
    /// `structuredContent`) passes it on.
    #[serde(skip)]
    pub structured: Option<Value>,
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
        /// The question's number in the session (from 1): an answer that names it reaches
        /// this question only, never a later one about a call with the same index.
        request: u64,
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
    /// A running call's MCP server asks the user for input (elicitation): answer it with
    /// `Dispatcher::answer_input` (`POST /v1/sessions/{id}/inputs/{n}`) within
    /// `mcp.elicitation_timeout_ms`, or it is declined.
    InputRequired {
        /// The request's number in the session.
        n: u64,
        /// Index of the call whose server asks.
        index: usize,
        /// That call's provider id.
        id: String,
        /// The server.
        server: String,
        /// What the server asks, for the user.
        message: String,
        /// The JSON Schema of the answer: an object of primitive-typed properties.
        requested_schema: Value,
    },
    /// An input request was answered, declined (also when nobody answered in time) or
    /// cancelled.
    InputAnswered {
        /// The request's number in the session.
        n: u64,
        /// Index of the call whose server asked.
        index: usize,
        /// What became of it.
        action: InputAction,
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
