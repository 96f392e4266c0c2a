//! What travels between a dispatcher and its workers, as JSON.
//!
//! A [`Job`] is one call, published to its pool's work queue. Its [`CallRecord`] is the one
//! place its fate is written, with compare-and-set revisions, so that exactly one party
//! decides it: a worker claims it (`started`) before the tool runs and writes `done` over its
//! own claim; a dispatcher that gives up writes `abandoned` over whatever is there. Whoever
//! writes second finds the revision changed and stands down: a call is never run after it was
//! given up, and a late result never replaces the one the model already has.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tool::{Capability, CutReport, ErrorCategory, Grant, OutputKind, ToolError, ToolOutput, ToolSource};

/// A progress report of a call running on a worker, relayed to the dispatcher on the call's
/// progress subject (core NATS: a report lost on the way is only a missed update).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressReport {
    /// How far.
    pub progress: f64,
    /// Out of how much, when known.
    pub total: Option<f64>,
    /// What it is doing.
    pub message: Option<String>,
}

/// One call for a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// The call's key: its record's key, its message id (de-duplication) and its object name.
    pub key: String,
    /// The tool, by its catalog name.
    pub tool: String,
    /// The validated arguments.
    pub input: Value,
    /// The session the call belongs to.
    pub session: String,
    /// The session's workspace (the same path on the worker's machine).
    pub workspace: PathBuf,
    /// The provider's call id.
    pub call_id: String,
    /// The call's index in its response.
    pub index: usize,
    /// Whether the tool is read-only (may be delivered again if its worker is lost).
    pub read_only: bool,
    /// The call's timeout (ms, 0 = none).
    pub timeout_ms: u64,
    /// Unix time (ms) after which no worker may start it: the dispatcher has answered by then.
    pub not_after_ms: u64,
    /// What the dispatcher's approval gate cleared the call to do; the worker's sandbox holds
    /// the call's programs to it. Absent: nothing beyond reading.
    #[serde(default)]
    pub grant: Grant,
    /// A subject the dispatcher listens on: the worker publishes the call's `done` record
    /// there (as `<reply>.<key>`) as well as writing it, so that the answer does not wait
    /// for the record's write. The record stays the call's truth: the message is a hint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// The path globs the session's policy hides from the tool (deny rules by `path` alone),
    /// as written: the worker hides them in its turn (its walks skip them, its sandbox masks
    /// what exists of them), since the call reads the worker's view of the workspace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<String>,
}

/// The fate of a call, kept under its key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum CallRecord {
    /// A worker claimed the call; the tool may be running.
    Started {
        /// The worker.
        worker: String,
        /// Which delivery of the call this is (1 for the first).
        attempt: i64,
    },
    /// The call ended on a worker.
    Done {
        /// The worker.
        worker: String,
        /// How it ended.
        outcome: WireOutcome,
        /// Where the content is, when it was too large for the record (an object name).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        object: Option<String>,
        /// The content's digest ([`crate::remote::seal::digest`]) when it is in the object
        /// store: the object is not sealed, the record that names it is, so a replaced object
        /// is told from the one the worker stored.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        digest: Option<String>,
    },
    /// The dispatcher gave the call up; nothing may start it any more.
    Abandoned {
        /// Why.
        reason: String,
        /// The worker that had claimed it, if one had.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worker: Option<String>,
    },
}

/// A tool's outcome in transit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WireOutcome {
    /// The tool produced output.
    Output {
        /// [`ToolOutput::content`].
        content: String,
        /// [`ToolOutput::is_error`].
        is_error: bool,
        /// Whether the shell budget applies.
        shell: bool,
        /// [`ToolOutput::trailer`].
        trailer: Option<String>,
        /// [`ToolOutput::partial`].
        partial: bool,
        /// [`ToolOutput::cut`]: the tool cut its output itself while it streamed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cut: Option<CutReport>,
        /// [`ToolOutput::structured`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        structured: Option<serde_json::Value>,
        /// [`ToolOutput::blocks`].
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        blocks: Vec<serde_json::Value>,
    },
    /// The tool failed or refused.
    Error {
        /// [`ToolError::category`].
        category: ErrorCategory,
        /// [`ToolError::message`].
        message: String,
        /// [`ToolError::field`].
        field: Option<String>,
        /// [`ToolError::started`].
        started: bool,
    },
}

impl From<Result<ToolOutput, ToolError>> for WireOutcome {
    fn from(r: Result<ToolOutput, ToolError>) -> Self {
        match r {
            Ok(o) => WireOutcome::Output {
                content: o.content,
                is_error: o.is_error,
                shell: o.kind == OutputKind::Shell,
                trailer: o.trailer,
                partial: o.partial,
                cut: o.cut,
                structured: o.structured,
                blocks: o.blocks,
            },
            Err(e) => WireOutcome::Error {
                category: e.category,
                message: e.message,
                field: e.field,
                started: e.started,
            },
        }
    }
}

impl From<WireOutcome> for Result<ToolOutput, ToolError> {
    fn from(w: WireOutcome) -> Self {
        match w {
            WireOutcome::Output {
                content,
                is_error,
                shell,
                trailer,
                partial,
                cut,
                structured,
                blocks,
            } => Ok(ToolOutput {
                content,
                is_error,
                kind: if shell { OutputKind::Shell } else { OutputKind::Other },
                trailer,
                partial,
                cut,
                structured,
                blocks,
            }),
            WireOutcome::Error {
                category,
                message,
                field,
                started,
            } => Err(ToolError {
                category,
                message,
                field,
                started,
            }),
        }
    }
}

impl WireOutcome {
    /// Folds a structured value and media blocks larger than `max` bytes into the text, so that
    /// the record stays small and the text travels through the object store like any large
    /// output: the value as its JSON, each block described. (A worker's large structured
    /// result is therefore read as text, not kept under a handle.)
    pub fn fold_rich(&mut self, max: usize) {
        let WireOutcome::Output {
            content,
            structured,
            blocks,
            ..
        } = self
        else {
            return;
        };
        let size = structured.as_ref().map_or(0, |v| v.to_string().len()) + blocks.iter().map(|b| b.to_string().len()).sum::<usize>();
        if size <= max {
            return;
        }
        if let Some(value) = structured.take() {
            if !content.is_empty() && !content.ends_with('\n') {
                content.push('\n');
            }
            content.push_str(&value.to_string());
        }
        for block in std::mem::take(blocks) {
            let kind = block.get("type").and_then(serde_json::Value::as_str).unwrap_or("media");
            let bytes = block.get("data").and_then(serde_json::Value::as_str).map_or(0, |d| d.len() * 3 / 4);
            content.push_str(&format!(
                "\n[{kind} block of about {bytes} bytes: too large to travel from the worker]"
            ));
        }
    }

    /// The content, for outcomes that carry output.
    pub fn content_mut(&mut self) -> Option<&mut String> {
        match self {
            WireOutcome::Output { content, .. } => Some(content),
            WireOutcome::Error { .. } => None,
        }
    }
}

/// What a worker says about itself, kept under its id while it lives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Announcement {
    /// The worker's id.
    pub worker: String,
    /// Its pool.
    pub pool: String,
    /// Calls it runs at once.
    pub slots: usize,
    /// Calls it is running.
    pub running: Vec<String>,
    /// The toolslot version it runs.
    pub version: String,
    /// The tools it hosts.
    pub tools: Vec<AnnouncedTool>,
    /// It hides what a job's `hidden` names. A worker from before that field ignores it, so a
    /// dispatcher sends it a call with hidden paths never.
    #[serde(default)]
    pub hides: bool,
}

/// One tool a worker hosts, described as the pipeline needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnnouncedTool {
    /// Catalog name.
    pub name: String,
    /// Description for the model.
    pub description: String,
    /// Input schema.
    pub input_schema: Value,
    /// Declared capabilities.
    pub capabilities: Vec<Capability>,
    /// Supports parallel calls.
    pub parallel: bool,
    /// Deferred until tool_search loads it.
    pub defer: bool,
    /// Exempt from the loop guard's repeat rule.
    pub loop_exempt: bool,
    /// Where it comes from on the worker.
    pub source: ToolSource,
}

impl AnnouncedTool {
    /// The description of `spec`.
    pub fn of(spec: &dyn crate::tool::ToolSpec) -> Self {
        Self {
            name: spec.name().to_string(),
            description: spec.description().to_string(),
            input_schema: spec.input_schema(),
            capabilities: spec.capabilities().to_vec(),
            parallel: spec.supports_parallel(),
            defer: spec.defer_loading(),
            loop_exempt: spec.loop_exempt(),
            source: spec.source(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_structured_value_travels_as_text() {
        let mut wire = WireOutcome::from(Ok(ToolOutput {
            blocks: vec![serde_json::json!({"type": "image", "mimeType": "image/png", "data": "A".repeat(400)})],
            ..ToolOutput::structured("rows:", serde_json::json!({"rows": [1, 2, 3]}))
        }));
        let small = wire.clone();
        wire.fold_rich(10_000);
        assert_eq!(wire, small, "small ones travel as they are");
        wire.fold_rich(100);
        let Ok(out) = Result::<ToolOutput, ToolError>::from(wire) else {
            panic!()
        };
        assert!(out.structured.is_none() && out.blocks.is_empty());
        assert!(
            out.content
                .starts_with("rows:\n{\"rows\":[1,2,3]}\n[image block of about 300 bytes"),
            "{}",
            out.content
        );
    }

    #[test]
    fn outcomes_survive_the_trip() {
        let out = ToolOutput {
            content: "x".into(),
            is_error: true,
            kind: OutputKind::Shell,
            trailer: Some("[exit code: 1]".into()),
            partial: false,
            cut: Some(CutReport {
                omitted_bytes: 5,
                ..Default::default()
            }),
            structured: None,
            blocks: Vec::new(),
        };
        let rich = ToolOutput {
            blocks: vec![serde_json::json!({"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="})],
            ..ToolOutput::structured("the weather", serde_json::json!({"t": 21}))
        };
        for r in [
            Ok(out),
            Ok(rich),
            Err(ToolError::outcome_unknown("lost")),
            Err(ToolError::invalid("path", "bad")),
        ] {
            let wire = WireOutcome::from(r.clone());
            let json = serde_json::to_string(&CallRecord::Done {
                worker: "w".into(),
                outcome: wire,
                object: None,
                digest: None,
            })
            .unwrap();
            let CallRecord::Done { outcome, .. } = serde_json::from_str(&json).unwrap() else {
                panic!("{json}")
            };
            assert_eq!(Result::<ToolOutput, ToolError>::from(outcome), r);
        }
    }
}
