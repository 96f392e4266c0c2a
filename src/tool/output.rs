//! What a tool hands back.

/// Which truncation budget applies to an output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    /// Command output: the shell budget, with important-line rescue.
    Shell,
    /// Anything else: the general budget.
    Other,
}

/// A tool's result before post-processing.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The text for the model.
    pub content: String,
    /// Whether the tool itself reports failure (a non-zero exit, an MCP `isError`).
    pub is_error: bool,
    /// Which truncation budget applies.
    pub kind: OutputKind,
    /// Text kept apart from `content` that truncation must never cut (exit code, stderr
    /// summary), appended after the truncated content.
    pub trailer: Option<String>,
    /// A view of work still going on (a poll of a running task): truncated like any output,
    /// but never saved as "the full output", since there is more to come.
    pub partial: bool,
    /// Set when the tool cut `content` itself while the output streamed (a command's output
    /// read with bounded memory): post-processing then neither cuts nor saves it again, and
    /// reports the cut from here.
    pub cut: Option<CutReport>,
}

/// How a tool cut an output while it streamed.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct CutReport {
    /// Bytes left out of `content`.
    pub omitted_bytes: u64,
    /// Lines left out (a partly cut line counts).
    pub omitted_lines: u64,
    /// Bytes of the output saved for retrieve_tool_result (all of it, or up to the cap).
    pub saved_bytes: u64,
    /// Why saving failed, when it did.
    pub save_error: Option<String>,
}

impl ToolOutput {
    /// A successful text result.
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            kind: OutputKind::Other,
            trailer: None,
            partial: false,
            cut: None,
        }
    }

    /// A text result the tool reports as failed.
    pub fn error_text(content: impl Into<String>) -> Self {
        Self {
            is_error: true,
            ..Self::text(content)
        }
    }
}
