//! Errors a tool call can end in. Every one becomes an `is_error` result for the model.

use serde::{Deserialize, Serialize};

/// The category a refusal or failure carries, so the model can act on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCategory {
    /// The arguments are wrong; `field` names which.
    InvalidInput,
    /// No such tool (or a deferred one not loaded yet).
    UnknownTool,
    /// The call was not approved.
    NotApproved,
    /// The loop guard refused it.
    LoopBlocked,
    /// It ran out of time.
    Timeout,
    /// The round was cancelled.
    Cancelled,
    /// The tool cannot be used now (fail-closed, server down, session paused).
    Unavailable,
    /// The tool ran and failed.
    ToolError,
    /// The model's output was cut off mid-call.
    TruncatedRound,
    /// The call was running where it can no longer be reached (a remote worker was lost):
    /// it may or may not have taken effect, so it must be checked before it is retried.
    OutcomeUnknown,
}

/// A failed or refused call, with the text the model will read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    /// What kind of failure.
    pub category: ErrorCategory,
    /// The model-facing explanation.
    pub message: String,
    /// The offending argument, where there is one (a JSON pointer or field name).
    pub field: Option<String>,
    /// Whether the tool started (false: nothing ran, no side effect).
    pub started: bool,
}

impl ToolError {
    /// A failure of a tool that ran.
    pub fn tool(message: impl Into<String>) -> Self {
        Self {
            category: ErrorCategory::ToolError,
            message: message.into(),
            field: None,
            started: true,
        }
    }

    /// A refusal before anything ran.
    pub fn refused(category: ErrorCategory, message: impl Into<String>) -> Self {
        Self {
            category,
            message: message.into(),
            field: None,
            started: false,
        }
    }

    /// A call whose fate cannot be known: it started where it can no longer be reached.
    pub fn outcome_unknown(message: impl Into<String>) -> Self {
        Self {
            category: ErrorCategory::OutcomeUnknown,
            message: message.into(),
            field: None,
            started: true,
        }
    }

    /// Bad arguments, naming the field.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            category: ErrorCategory::InvalidInput,
            message: message.into(),
            field: Some(field.into()),
            started: false,
        }
    }

    /// The category's name as it appears in results (`invalid_input`, …).
    pub fn category_name(&self) -> String {
        serde_json::to_value(self.category)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// The text handed back to the model: the message, then a JSON line with the category,
    /// the field and whether anything started, which agents parse to decide what to do.
    pub fn to_model_text(&self) -> String {
        let mut meta = serde_json::json!({ "error": self.category });
        if let Some(field) = &self.field {
            meta["field"] = field.clone().into();
        }
        if !self.started {
            meta["side_effect"] = "not_started".into();
        }
        format!("{}\n{}", self.message, meta)
    }
}
