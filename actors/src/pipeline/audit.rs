//! A session's audit ledger (`audit.ledger_dir`): the slot's keyed, sealed [`Ledger`], opened on
//! the session's first record (on the blocking pool). A record is written under the ledger's
//! lock and synced after it ([`toolslot::ledger::Sealer`]), so the records of a round's parallel
//! calls share one sync. A record is written on the caller's thread when the ledger is open and
//! free (a write to the page cache: a round's parallel decisions then all land before the first
//! sync starts); its sync runs on the blocking pool, so it never stalls the thread's other
//! sessions.
//!
//! The executor writes a call's decision before the call runs (a write that fails refuses the
//! call) and its outcome once it ended, before the result is handed on. The decision is synced
//! before the call runs, its head written then and synced within `audit.lazy_seal_ms`; the
//! outcome is synced within that bound ([`toolslot::ledger::seal_within`]), by the session's
//! next sync or the sealing thread (0: everything synced at once). When the session closes
//! ([`Audit::close`]) its closing record is appended and sealed, head included; after that no
//! call is allowed to run (its decision is refused), and the outcomes of calls that were still
//! ending follow the closing record.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use toolslot::config::AuditConfig;
use toolslot::ledger::{Entry, Kind, Ledger, LedgerError, Seal, Sealer, Source};
use toolslot::plan::approval::Trace;
use toolslot::tool::{ErrorCategory, ToolError};

use crate::pipeline::chain::CallHead;

/// The session's ledger, or none (`audit.ledger_dir = ""`).
#[derive(Debug)]
pub struct Audit {
    dir: Option<PathBuf>,
    /// The key (`audit.key_file`), which must stay out of `dir` and of the workspace.
    key_file: PathBuf,
    workspace: PathBuf,
    session: String,
    /// How long an outcome, and a head, may wait for its sync (`audit.lazy_seal_ms`).
    lazy_seal: Duration,
    /// Opened on the first record; an open that failed is tried again by the next record.
    open: Mutex<Option<Ledger>>,
    /// The session closed: nothing more may run.
    closed: AtomicBool,
}

/// The closing record of a session's ledger, being written on the blocking pool: awaiting
/// [`Sealing::wait`] waits until it is on disk (or failed, which it also logs). Dropping it
/// leaves the write to finish on its own.
#[derive(Debug)]
pub struct Sealing {
    writing: Option<tokio::task::JoinHandle<Result<(), LedgerError>>>,
    /// The ledger's folder.
    dir: PathBuf,
}

impl Sealing {
    /// Nothing to write (no ledger, or already closed).
    pub fn done() -> Self {
        Self {
            writing: None,
            dir: PathBuf::new(),
        }
    }

    /// Waits for the closing record.
    ///
    /// # Errors
    /// [`LedgerError`] when it could not be written.
    pub async fn wait(self) -> Result<(), LedgerError> {
        let Some(writing) = self.writing else {
            return Ok(());
        };
        writing.await.map_err(|e| LedgerError {
            path: self.dir,
            reason: format!("the writer failed: {e}"),
        })?
    }
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
    /// The ledger of session `session` as `config` says (none when `audit.ledger_dir` is ""),
    /// its key kept out of `workspace`.
    pub fn new(config: &AuditConfig, workspace: &Path, session: &str) -> Self {
        Self {
            dir: config.ledger_path(),
            key_file: config.key_path(),
            workspace: workspace.to_path_buf(),
            session: session.to_string(),
            lazy_seal: config.lazy_seal(),
            open: Mutex::new(None),
            closed: AtomicBool::new(false),
        }
    }

    /// Whether a ledger is kept.
    pub fn is_on(&self) -> bool {
        self.dir.is_some()
    }

    /// Appends `record`, flushed and synced, on the blocking pool; an outcome that may wait for
    /// its seal is written here and sealed later. Without a ledger it returns at once (on its
    /// first poll).
    ///
    /// # Errors
    /// [`LedgerError`] when the record is not on disk, or it would let a call run in a session
    /// that closed.
    pub async fn append(self: &Arc<Self>, record: Record) -> Result<(), LedgerError> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let failed = |reason: String| LedgerError { path: dir.clone(), reason };
        // Written here when the ledger is open and nobody holds it (a write to the page cache):
        // a round's parallel calls then all write before the first sync starts, so they share
        // it. Opening it (files made and synced) or waiting for it goes to the blocking pool.
        let kind = record.kind;
        let (sealer, seq) = match self.try_write(&record) {
            Some(written) => written?,
            None => {
                let me = Arc::clone(self);
                let written = tokio::task::spawn_blocking(move || me.write_now(&record)).await;
                written.map_err(|e| failed(format!("the writer failed: {e}")))??
            }
        };
        if kind == Kind::Outcome {
            return toolslot::ledger::seal_within(sealer, seq, self.lazy_seal);
        }
        let within = self.lazy_seal;
        let sealed = tokio::task::spawn_blocking(move || sealer.seal_through_within(seq, within)).await;
        sealed.map_err(|e| failed(format!("the writer failed: {e}")))?
    }

    /// Appends the closing record, on the blocking pool when there is one (at once otherwise);
    /// a session that never wrote a record gets no ledger. From now on no decision to run a
    /// call is recorded (so none runs). Only the first close writes.
    pub fn close(self: &Arc<Self>) -> Sealing {
        let Some(dir) = self.dir.clone() else {
            return Sealing::done();
        };
        if self.closed.swap(true, Ordering::SeqCst) {
            return Sealing::done();
        }
        let me = Arc::clone(self);
        let sealed = move || {
            let written = me.close_now();
            if let Err(e) = &written {
                tracing::error!(session = %me.session, error = %e, "ledger: the closing record could not be written");
            }
            written
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => Sealing {
                writing: Some(runtime.spawn_blocking(sealed)),
                dir,
            },
            Err(_) => {
                let _ = sealed();
                Sealing::done()
            }
        }
    }

    /// The open ledger, opened (its key made on first use) if it is not yet.
    fn ledger<'a>(&self, open: &'a mut Option<Ledger>, dir: &Path) -> Result<&'a mut Ledger, LedgerError> {
        if open.is_none() {
            let seal = Seal::open_or_create(&self.key_file, &[dir, &self.workspace])?;
            *open = Some(Ledger::open(dir, &self.session, seal)?);
        }
        open.as_mut().ok_or_else(|| LedgerError {
            path: dir.to_path_buf(),
            reason: "not open".into(),
        })
    }

    fn close_now(&self) -> Result<(), LedgerError> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.is_none() && !Ledger::file_in(dir, &self.session).exists() {
            return Ok(());
        }
        let ledger = self.ledger(&mut open, dir)?;
        let (_, seq) = ledger.close_written()?;
        let sealer = ledger.sealer();
        drop(open);
        sealer.seal_through(seq)
    }

    /// Writes `record` when the ledger is open and free; `None` sends it to the blocking pool.
    fn try_write(&self, record: &Record) -> Option<Result<(Arc<Sealer>, u64), LedgerError>> {
        let dir = self.dir.as_deref()?;
        let mut open = self.open.try_lock().ok()?;
        open.as_ref()?;
        Some(self.write_locked(&mut open, dir, record))
    }

    /// Writes `record` (opening the ledger if need be), not yet synced.
    fn write_now(&self, record: &Record) -> Result<(Arc<Sealer>, u64), LedgerError> {
        let dir = self.dir.as_deref().ok_or_else(|| LedgerError {
            path: PathBuf::new(),
            reason: "no ledger is kept".into(),
        })?;
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        self.write_locked(&mut open, dir, record)
    }

    fn write_locked(&self, open: &mut Option<Ledger>, dir: &Path, record: &Record) -> Result<(Arc<Sealer>, u64), LedgerError> {
        // Checked under the lock the closing record is written under: no call is allowed
        // after it.
        if record.kind == Kind::Decision && record.decision == "allow" && self.closed.load(Ordering::SeqCst) {
            return Err(LedgerError {
                path: Ledger::file_in(dir, &self.session),
                reason: "the session is closed: nothing more runs in it".into(),
            });
        }
        let ledger = self.ledger(open, dir)?;
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
        let (_, seq) = ledger.append_written(&entry)?;
        Ok((ledger.sealer(), seq))
    }
}

/// The refusal of a call whose decision could not be recorded.
pub fn unrecorded(error: &LedgerError) -> ToolError {
    ToolError::refused(
        ErrorCategory::Unavailable,
        format!("Not run: the decision could not be recorded in the ledger ({error}); nothing was run."),
    )
}
