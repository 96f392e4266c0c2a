//! Notices: things the host should know that are not tool results.

use serde::Serialize;

/// What a notice is about (the `kind` field of a `notice` event, docs/CONTRACT.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeKind {
    /// Text imitating a tool call was removed from the assistant's text.
    ForgedCallStripped,
    /// The round ended at the output limit.
    RoundTruncated,
    /// A call's arguments were repaired.
    ArgsRepaired,
    /// A call's arguments could not be repaired.
    ArgsRejected,
    /// A call's tool name was repaired.
    NameRepaired,
    /// A call named no known tool.
    UnknownTool,
    /// The loop guard blocked a repeated call.
    LoopBlocked,
    /// Several calls in a row failed.
    LoopWarning,
    /// The session was paused by the loop guard.
    LoopPaused,
    /// A call's arguments failed validation.
    ValidationFailed,
    /// A tool failed admission.
    FailClosedTool,
    /// A result was truncated.
    OutputTruncated,
    /// The full output of a truncated result could not be saved.
    OverflowFailed,
    /// A pipeline actor was restarted after a failure.
    ActorRestarted,
    /// The provider stream reported an error, or a frame could not be decoded.
    StreamError,
    /// Tools were appended to the session's catalog since its last submission (an MCP server's
    /// tool list grew): the host should send the new catalog with its next request.
    ToolsAdded,
    /// No OS sandbox works here (or `shell.sandbox` is "none"): exec_shell asks before every
    /// command. Told once per session, at its first submission.
    SandboxUnavailable,
    /// A tool was admitted with a change its source did not make: the descriptions inside an
    /// oversized schema trimmed, or another name because its own was taken.
    ToolAdjusted,
    /// A hook failed and was ignored, because it says `on_error = "allow"`.
    HookFailed,
    /// `approve_for_project` wrote an allow rule into the project's policy file.
    ProjectRuleAdded,
    /// `approve_for_project` could not write its rule; the approval holds for the session only.
    ProjectRuleFailed,
    /// The project's policy file is not trusted (`toolslot trust DIR` was not run for its
    /// content): its allow rules were not applied, its deny and ask rules were. Told once per
    /// session, at its first submission.
    ProjectPolicyUntrusted,
}

/// Something the host should know, optionally about one call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Notice {
    /// What it is about.
    pub kind: NoticeKind,
    /// A one-line explanation.
    pub message: String,
    /// The call's index, when it concerns one call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
}

impl Notice {
    /// A notice about the round or session.
    pub fn new(kind: NoticeKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            index: None,
        }
    }

    /// A notice about call `index`.
    pub fn for_call(kind: NoticeKind, index: usize, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            index: Some(index),
        }
    }
}
