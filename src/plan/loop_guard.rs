//! The loop guard: identical repeats are blocked, failure streaks warn and then pause.

use std::collections::HashMap;

use serde_json::Value;

use super::canonical_json;
use crate::config::LoopGuardConfig;
use crate::notice::{Notice, NoticeKind};
use crate::tool::{ErrorCategory, ToolError};

/// Per-session loop state. Feed it every call in index order ([`LoopGuard::check`]) and
/// every outcome ([`LoopGuard::record`]).
#[derive(Debug, Clone)]
pub struct LoopGuard {
    cfg: LoopGuardConfig,
    seen: HashMap<String, u32>,
    consecutive_failures: u32,
    paused: bool,
}

impl LoopGuard {
    /// A fresh guard.
    pub fn new(cfg: LoopGuardConfig) -> Self {
        Self {
            cfg,
            seen: HashMap::new(),
            consecutive_failures: 0,
            paused: false,
        }
    }

    /// Counts this occurrence of `tool` with `input` and decides whether it may run.
    ///
    /// # Errors
    /// `loop_blocked` on the configured repeat (successful or not), unless the tool is
    /// exempt; `unavailable` while the session is paused.
    pub fn check(&mut self, tool: &str, input: &Value, exempt: bool) -> Result<(), ToolError> {
        if self.paused {
            return Err(paused_error());
        }
        if exempt || self.cfg.exempt.iter().any(|t| t == tool) {
            return Ok(());
        }
        let key = format!("{tool}\u{0}{}", canonical_json(input));
        let n = self.seen.entry(key).or_insert(0);
        *n += 1;
        if *n >= self.cfg.repeat_block {
            return Err(ToolError::refused(
                ErrorCategory::LoopBlocked,
                format!(
                    "Blocked: this is call number {n} of `{tool}` with exactly these arguments in this \
                     session, and repeating it will not give a different answer. Use the result you \
                     already have, change the arguments, or try a different approach."
                ),
            ));
        }
        Ok(())
    }

    /// Records a call's outcome. Returns the notices it raises and, when the streak reached
    /// the warning threshold, a hint to append to that call's result.
    pub fn record(&mut self, index: usize, failed: bool) -> (Vec<Notice>, Option<String>) {
        if !failed {
            self.consecutive_failures = 0;
            return (Vec::new(), None);
        }
        self.consecutive_failures += 1;
        let n = self.consecutive_failures;
        let mut notices = Vec::new();
        let mut hint = None;
        if n >= self.cfg.failure_pause && !self.paused {
            self.paused = true;
            notices.push(Notice::for_call(
                NoticeKind::LoopPaused,
                index,
                format!("{n} calls in a row failed; the session is paused until the host resumes it"),
            ));
        } else if n == self.cfg.failure_warn {
            notices.push(Notice::for_call(
                NoticeKind::LoopWarning,
                index,
                format!("{n} calls in a row failed"),
            ));
            hint = Some(format!(
                "Note: your last {n} tool calls all failed. Stop and reconsider: read the error messages, \
                 check the tool's expected arguments, or ask the user."
            ));
        }
        (notices, hint)
    }

    /// Whether the session is paused.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Resumes a paused session (the host's call) and clears the failure streak.
    pub fn resume(&mut self) {
        self.paused = false;
        self.consecutive_failures = 0;
    }

    /// The counts, to keep where a session resumed elsewhere finds them.
    pub fn state(&self) -> LoopGuardState {
        LoopGuardState {
            seen: self.seen.clone().into_iter().collect(),
            consecutive_failures: self.consecutive_failures,
            paused: self.paused,
        }
    }

    /// Takes over counts kept by [`LoopGuard::state`] (the configuration stays this one's).
    pub fn restore(&mut self, state: LoopGuardState) {
        self.seen = state.seen.into_iter().collect();
        self.consecutive_failures = state.consecutive_failures;
        self.paused = state.paused;
    }
}

/// What a loop guard has counted, as plain data: a durable session keeps it between
/// dispatchers, so a restart does not reset a repeat or a failure streak.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LoopGuardState {
    /// Occurrences per tool and canonical arguments.
    pub seen: std::collections::BTreeMap<String, u32>,
    /// Failures in a row.
    pub consecutive_failures: u32,
    /// Whether the session is paused.
    pub paused: bool,
}

/// The result of a call not run because the session is paused.
pub fn paused_error() -> ToolError {
    ToolError::refused(
        ErrorCategory::Unavailable,
        "Not run: the session is paused after too many failed calls in a row. Wait for the user \
         to resume it; explain what went wrong in the meantime.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn guard() -> LoopGuard {
        LoopGuard::new(crate::config::Config::builtin().loop_guard)
    }

    #[test]
    fn third_identical_call_is_blocked_whatever_the_key_order() {
        let mut g = guard();
        assert!(g.check("read_file", &json!({"path": "a", "limit": 5}), false).is_ok());
        assert!(g.check("read_file", &json!({"limit": 5, "path": "a"}), false).is_ok());
        let err = g.check("read_file", &json!({"path": "a", "limit": 5}), false).unwrap_err();
        assert_eq!(err.category, ErrorCategory::LoopBlocked);
        assert!(err.message.contains("call number 3"));
        assert!(
            g.check("read_file", &json!({"path": "b"}), false).is_ok(),
            "other arguments still run"
        );
    }

    #[test]
    fn exempt_tools_repeat_freely() {
        let mut g = guard();
        for _ in 0..5 {
            assert!(g.check("poll", &json!({}), true).is_ok());
        }
    }

    #[test]
    fn failures_warn_then_pause_and_resume() {
        let mut g = guard();
        let mut kinds = Vec::new();
        let mut hints = 0;
        for i in 0..8 {
            let (n, h) = g.record(i, true);
            kinds.extend(n.into_iter().map(|n| n.kind));
            hints += usize::from(h.is_some());
        }
        assert_eq!(kinds, vec![NoticeKind::LoopWarning, NoticeKind::LoopPaused]);
        assert_eq!(hints, 1);
        assert!(g.is_paused());
        assert_eq!(g.check("x", &json!({}), false).unwrap_err().category, ErrorCategory::Unavailable);
        g.resume();
        assert!(g.check("x", &json!({}), false).is_ok());
    }

    #[test]
    fn restored_counts_block_and_pause_as_before() {
        let mut g = guard();
        g.check("read_file", &json!({"path": "a"}), false).unwrap();
        g.check("read_file", &json!({"path": "a"}), false).unwrap();
        let kept: LoopGuardState = serde_json::from_str(&serde_json::to_string(&g.state()).unwrap()).unwrap();
        let mut h = guard();
        h.restore(kept);
        assert_eq!(
            h.check("read_file", &json!({"path": "a"}), false).unwrap_err().category,
            ErrorCategory::LoopBlocked
        );
    }

    #[test]
    fn a_success_breaks_the_streak() {
        let mut g = guard();
        g.record(0, true);
        g.record(1, true);
        g.record(2, false);
        let (n, _) = g.record(3, true);
        assert!(n.is_empty());
    }
}
