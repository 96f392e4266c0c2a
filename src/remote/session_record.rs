//! A durable session's record: what a session needs to go on under another dispatcher, as
//! plain data the actors crate keeps in a JetStream KV bucket (compare-and-set, one writer at
//! a time under a lease).
//!
//! It holds the options the session was opened with, its remembered approvals, its loop-guard
//! counts, the tools it activated, the files it read, the worker holding its background
//! tasks, and its last round call by call: planned, running (the
//! tool was about to run) or finished with its result. A round its dispatcher did not finish
//! is settled by whoever takes the session over ([`RoundRecord::settle`]): a running call's
//! fate is unknown, a call that never started is reported as not started, and every call
//! gets exactly one result.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::ApprovalMode;
use crate::event::{StopReason, ToolResult};
use crate::plan::approval::SessionApprovals;
use crate::plan::loop_guard::LoopGuardState;
use crate::stream::Dialect;
use crate::tool::{ErrorCategory, ToolError};

/// The record's format; a record of another format is not read.
pub const RECORD_FORMAT: u32 = 1;

/// How the session was opened, so that another dispatcher opens it the same way.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordedOptions {
    /// The workspace root.
    pub workspace: Option<PathBuf>,
    /// The approval mode, when the session chose one.
    pub approval_mode: Option<ApprovalMode>,
    /// The dialect, when the session fixed one.
    pub dialect: Option<Dialect>,
    /// 0 for a host's session; a sub-agent's (`spawn_agent`) is one deeper than its parent's,
    /// and is taken over with the tools of its depth.
    #[serde(default)]
    pub depth: usize,
}

/// One call of a round, as far as it got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum CallMark {
    /// Assembled and planned; nothing ran yet.
    Planned {
        /// The provider's call id.
        id: String,
        /// The tool.
        name: String,
    },
    /// Its tool was about to run (written before it ran).
    Running {
        /// The provider's call id.
        id: String,
        /// The tool.
        name: String,
    },
    /// Its result.
    Finished {
        /// The result as filed.
        result: ToolResult,
    },
}

/// A session's last round, call by call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RoundRecord {
    /// The round's number in the session, from 1.
    pub number: u64,
    /// Calls by index.
    pub calls: BTreeMap<usize, CallMark>,
    /// How many calls the response held, once its end was read.
    pub call_count: Option<usize>,
    /// Why the model stopped, once known.
    pub stop_reason: StopReason,
    /// The assistant's text, once known.
    pub text: String,
    /// Whether every call has its result (the round completed, or was settled).
    pub complete: bool,
    /// Whether the round was settled by a dispatcher that took the session over.
    #[serde(default)]
    pub settled: bool,
}

impl RoundRecord {
    /// Notes a planned call (a later mark of the call is kept).
    pub fn planned(&mut self, index: usize, id: &str, name: &str) {
        self.calls.entry(index).or_insert_with(|| CallMark::Planned {
            id: id.to_string(),
            name: name.to_string(),
        });
    }

    /// Notes that a call's tool is about to run (a result already filed is kept).
    pub fn running(&mut self, index: usize, id: &str, name: &str) {
        if !matches!(self.calls.get(&index), Some(CallMark::Finished { .. })) {
            self.calls.insert(
                index,
                CallMark::Running {
                    id: id.to_string(),
                    name: name.to_string(),
                },
            );
        }
    }

    /// Files a call's result; the first one filed is kept.
    pub fn finished(&mut self, result: ToolResult) {
        if !matches!(self.calls.get(&result.index), Some(CallMark::Finished { .. })) {
            self.calls.insert(result.index, CallMark::Finished { result });
        }
    }

    /// Notes the response's end.
    pub fn ended(&mut self, call_count: usize, stop_reason: StopReason, text: &str) {
        self.call_count = Some(call_count);
        self.stop_reason = stop_reason;
        self.text = text.to_string();
    }

    /// The round completed: these are its results.
    pub fn completed(&mut self, stop_reason: StopReason, text: &str, results: &[ToolResult]) {
        self.call_count = Some(results.len());
        self.stop_reason = stop_reason;
        self.text = text.to_string();
        self.calls = results
            .iter()
            .map(|r| (r.index, CallMark::Finished { result: r.clone() }))
            .collect();
        self.complete = true;
    }

    /// Gives every call without a result one, as a dispatcher that takes the session over
    /// must: a call that was running may have taken effect (`outcome_unknown`), one that
    /// never started did not (`unavailable`, not started). Returns whether anything changed.
    pub fn settle(&mut self) -> bool {
        if self.complete {
            return false;
        }
        let last = self.calls.keys().next_back().map_or(0, |i| i + 1);
        let count = self.call_count.unwrap_or(0).max(last);
        for index in 0..count {
            let result = match self.calls.get(&index) {
                Some(CallMark::Finished { .. }) => continue,
                Some(CallMark::Running { id, name }) => unsettled(
                    index,
                    id,
                    name,
                    &ToolError::outcome_unknown(format!(
                        "`{name}` was running when the dispatcher that ran this session stopped (it was killed, or lost the session's lease); its outcome is unknown. Check before retrying it."
                    )),
                ),
                Some(CallMark::Planned { id, name }) => unsettled(index, id, name, &not_started(name)),
                None => unsettled(index, "", "", &not_started("this call's tool")),
            };
            self.calls.insert(index, CallMark::Finished { result });
        }
        self.call_count = Some(count);
        self.complete = true;
        self.settled = true;
        true
    }

    /// The round's results by index, when it is complete.
    pub fn results(&self) -> Option<Vec<ToolResult>> {
        self.complete.then(|| {
            self.calls
                .values()
                .filter_map(|m| match m {
                    CallMark::Finished { result } => Some(result.clone()),
                    _ => None,
                })
                .collect()
        })
    }
}

fn not_started(name: &str) -> ToolError {
    ToolError::refused(
        ErrorCategory::Unavailable,
        format!("Not run: the dispatcher that ran this session stopped before {name} started; nothing was run."),
    )
}

fn unsettled(index: usize, id: &str, name: &str, error: &ToolError) -> ToolResult {
    ToolResult {
        index,
        tool_use_id: id.to_string(),
        name: name.to_string(),
        is_error: true,
        content: error.to_model_text(),
        blocks: None,
        structured: None,
    }
}

/// Everything a durable session keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// [`RECORD_FORMAT`].
    pub format: u32,
    /// How it was opened.
    pub options: RecordedOptions,
    /// Remembered approval decisions.
    pub approvals: SessionApprovals,
    /// The loop guard's counts.
    pub loop_guard: LoopGuardState,
    /// Deferred tools the session activated, in order.
    pub activated: Vec<String>,
    /// Files the session read, with the modification time it saw (an edit needs a read).
    #[serde(default)]
    pub files: BTreeMap<PathBuf, std::time::SystemTime>,
    /// The worker that holds the session's background tasks, when they run on workers.
    #[serde(default)]
    pub task_owner: Option<String>,
    /// The outputs the session saved (file names in its overflow folder, oldest first), each
    /// also kept in the object store, so a dispatcher that takes the session over can put them
    /// back and `retrieve_tool_result` reads them there.
    #[serde(default)]
    pub saved: Vec<String>,
    /// The last round, once one began.
    pub last_round: Option<RoundRecord>,
}

impl SessionRecord {
    /// A new session's record.
    pub fn new(options: RecordedOptions) -> Self {
        Self {
            format: RECORD_FORMAT,
            options,
            approvals: SessionApprovals::default(),
            loop_guard: LoopGuardState::default(),
            activated: Vec::new(),
            files: BTreeMap::new(),
            task_owner: None,
            saved: Vec::new(),
            last_round: None,
        }
    }

    /// Notes a saved output, keeping the newest `max` names (0: none).
    pub fn saved(&mut self, name: &str, max: usize) {
        if !self.saved.iter().any(|n| n == name) {
            self.saved.push(name.to_string());
        }
        let over = self.saved.len().saturating_sub(max);
        self.saved.drain(..over);
    }

    /// Starts the next round's record, replacing the last one.
    pub fn begin_round(&mut self) -> &mut RoundRecord {
        let number = self.last_round.as_ref().map_or(0, |r| r.number) + 1;
        self.last_round.insert(RoundRecord {
            number,
            ..RoundRecord::default()
        })
    }

    /// Notes activated tools (each once, in order).
    pub fn activate(&mut self, names: &[String]) {
        for n in names {
            if !self.activated.contains(n) {
                self.activated.push(n.clone());
            }
        }
    }

    /// Reads a record.
    ///
    /// # Errors
    /// A reason when the bytes are not a record of this format.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let record: Self = serde_json::from_slice(bytes).map_err(|e| format!("not a session record: {e}"))?;
        if record.format != RECORD_FORMAT {
            return Err(format!(
                "session record format {} (this build reads {RECORD_FORMAT})",
                record.format
            ));
        }
        Ok(record)
    }

    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        // Plain data (strings, numbers, JSON values, maps keyed by strings): always serializes.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(index: usize) -> ToolResult {
        ToolResult {
            index,
            tool_use_id: format!("c{index}"),
            name: "t".into(),
            is_error: false,
            content: "ok".into(),
            blocks: None,
            structured: None,
        }
    }

    fn category(r: &ToolResult) -> String {
        let meta: serde_json::Value = serde_json::from_str(r.content.lines().last().unwrap()).unwrap();
        meta["error"].as_str().unwrap().to_string()
    }

    #[test]
    fn settling_gives_every_call_exactly_one_result_by_what_it_reached() {
        let mut rec = SessionRecord::new(RecordedOptions::default());
        let r = rec.begin_round();
        r.planned(0, "c0", "t");
        r.planned(1, "c1", "exec_shell");
        r.planned(2, "c2", "t");
        r.finished(done(0));
        r.running(1, "c1", "exec_shell");
        r.ended(4, StopReason::ToolUse, "x");
        let bytes = rec.encode();
        let mut back = SessionRecord::decode(&bytes).unwrap();
        let r = back.last_round.as_mut().unwrap();
        assert!(r.settle());
        assert!(!r.settle(), "settled once");
        let results = r.results().unwrap();
        assert_eq!(results.iter().map(|r| r.index).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        assert_eq!(results[0].content, "ok");
        assert_eq!(category(&results[1]), "outcome_unknown");
        assert!(results[1].content.contains("exec_shell"));
        assert_eq!(category(&results[2]), "unavailable");
        assert!(results[2].content.contains("not_started"));
        assert_eq!(category(&results[3]), "unavailable");
    }

    #[test]
    fn a_result_is_never_replaced_and_running_never_hides_one() {
        let mut r = RoundRecord::default();
        r.finished(done(0));
        r.running(0, "c0", "t");
        let mut second = done(0);
        second.content = "second".into();
        r.finished(second);
        r.ended(1, StopReason::ToolUse, "");
        r.settle();
        assert_eq!(r.results().unwrap()[0].content, "ok");
    }

    #[test]
    fn saved_outputs_are_noted_once_and_only_the_newest_kept() {
        let mut rec = SessionRecord::new(RecordedOptions::default());
        for n in ["a.txt", "b.txt", "a.txt", "c.txt"] {
            rec.saved(n, 2);
        }
        assert_eq!(rec.saved, vec!["b.txt".to_string(), "c.txt".to_string()]);
        rec.saved("d.txt", 0);
        assert!(rec.saved.is_empty());
    }

    #[test]
    fn rounds_are_numbered_and_a_record_of_another_format_is_refused() {
        let mut rec = SessionRecord::new(RecordedOptions::default());
        rec.begin_round();
        assert_eq!(rec.begin_round().number, 2);
        let mut v: serde_json::Value = serde_json::from_slice(&rec.encode()).unwrap();
        v["format"] = 99.into();
        assert!(SessionRecord::decode(v.to_string().as_bytes()).is_err());
        assert!(SessionRecord::decode(b"{").is_err());
    }
}
