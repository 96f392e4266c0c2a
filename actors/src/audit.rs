//! A session's audit ledger (`audit.ledger_dir`): the slot's hash-chained [`Ledger`], opened on
//! the session's first record and written on the blocking pool, so that the fsync every record
//! waits for never stalls the other sessions of the thread.
//!
//! The executor writes a call's decision before the call runs (a write that fails refuses the
//! call) and its outcome once it ended, before the result is handed on.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use toolslot::ledger::{Entry, Kind, Ledger, LedgerError, Source};
use toolslot::plan::approval::Trace;
use toolslot::tool::{ErrorCategory, ToolError};

use crate::chain::CallHead;

/// The session's ledger, or none (`audit.ledger_dir = ""`).
#[derive(Debug)]
pub struct Audit {
    dir: Option<PathBuf>,
    session: String,
    /// Opened on the first record; an open that failed is tried again by the next record.
    open: Mutex<Option<Ledger>>,
}

/// One record to append, owned (it travels to the blocking pool).
#[derive(Debug, Clone)]
pub struct Record {
    head: CallHead,
    kind: Kind,
    decision: &'static str,
    source: Source,
    rule: Option<Value>,
    outcome: Option<&'static str>,
    detail: Option<String>,
}

impl Record {
    /// The decision on `head`: `allow` when it runs, `deny` when it does not; who decided is the
    /// trace's (a call refused before anything judged it, such as a call with invalid arguments,
    /// is the runtime's own refusal: `mode`, with its error category as detail).
    pub fn decision(head: &CallHead, trace: &Trace, runs: bool, refusal: Option<&ToolError>) -> Self {
        let detail = match (&trace.source, refusal) {
            (None, Some(e)) => Some(format!("not judged: {}", e.category_name())),
            _ => trace.reason.clone(),
        };
        Self {
            head: head.clone(),
            kind: Kind::Decision,
            decision: if runs { "allow" } else { "deny" },
            source: trace.source.unwrap_or(Source::Mode),
            rule: trace.rule.as_ref().and_then(|r| serde_json::to_value(r).ok()),
            outcome: None,
            detail,
        }
    }

    /// How `head` ended (`ok`, `error` or `withheld`), under the decision that let it run.
    pub fn outcome(head: &CallHead, trace: &Trace, outcome: &'static str) -> Self {
        Self {
            head: head.clone(),
            kind: Kind::Outcome,
            decision: "allow",
            source: trace.source.unwrap_or(Source::Mode),
            rule: trace.rule.as_ref().and_then(|r| serde_json::to_value(r).ok()),
            outcome: Some(outcome),
            detail: None,
        }
    }
}

impl Audit {
    /// The ledger of session `session` under `dir` (`None`: no ledger).
    pub fn new(dir: Option<PathBuf>, session: &str) -> Self {
        Self {
            dir,
            session: session.to_string(),
            open: Mutex::new(None),
        }
    }

    /// Whether a ledger is kept.
    pub fn is_on(&self) -> bool {
        self.dir.is_some()
    }

    /// Appends `record`, flushed and synced, on the blocking pool. Without a ledger it returns
    /// at once (on its first poll).
    ///
    /// # Errors
    /// [`LedgerError`] when the record is not on disk.
    pub async fn append(self: &Arc<Self>, record: Record) -> Result<(), LedgerError> {
        let Some(dir) = self.dir.clone() else {
            return Ok(());
        };
        let me = Arc::clone(self);
        let failed = |reason: String| LedgerError { path: dir.clone(), reason };
        let written = tokio::task::spawn_blocking(move || me.append_now(record)).await;
        written.map_err(|e| failed(format!("the writer failed: {e}")))?
    }

    fn append_now(&self, record: Record) -> Result<(), LedgerError> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.is_none() {
            *open = Some(Ledger::open(dir, &self.session)?);
        }
        let Some(ledger) = open.as_mut() else {
            return Ok(());
        };
        let entry = Entry {
            call_id: &record.head.id,
            index: record.head.index,
            tool: &record.head.name,
            input: &record.head.input,
            kind: record.kind,
            decision: record.decision,
            source: record.source,
            rule: record.rule.clone(),
            outcome: record.outcome,
            detail: record.detail.as_deref(),
        };
        ledger.append(&entry).map(|_| ())
    }
}

/// The refusal of a call whose decision could not be recorded.
pub fn unrecorded(error: &LedgerError) -> ToolError {
    ToolError::refused(
        ErrorCategory::Unavailable,
        format!("Not run: the decision could not be recorded in the ledger ({error}); nothing was run."),
    )
}
