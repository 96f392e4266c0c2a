//! A session's audit ledger (`audit.ledger_dir`): the slot's keyed, sealed [`Ledger`], opened on
//! the session's first record (on the blocking pool). A record is written under the ledger's
//! lock and synced after it ([`toolslot::ledger::Sealer`]), so the records of a round's parallel
//! calls share one sync. A record is written on the caller's thread when the ledger is open and
//! free (a write to the page cache: a round's parallel decisions then all land before the first
//! sync starts); its sync runs on the blocking pool, so it never stalls the thread's other
//! sessions, in one task that syncs for every decision written meanwhile while the others await
//! its word (`Audit::synced_through`). That task starts once the work ready on the thread has
//! run, so a round's calls, handled one after another, share one sync.
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
    /// The decisions waiting for a sync, and whether a task of the blocking pool is syncing.
    syncing: Mutex<Syncing>,
    /// What the syncing task has made durable, or the last sync that failed and up to which
    /// record: the decisions' writers wait on it.
    synced: tokio::sync::watch::Sender<Synced>,
}

/// The decisions written and waiting for a sync.
#[derive(Debug, Default)]
struct Syncing {
    /// The newest decision written that waits.
    wanted: u64,
    /// A task of the blocking pool syncs (and goes on while decisions keep coming).
    running: bool,
    /// How many syncs the syncing tasks ran.
    #[cfg(test)]
    passes: u64,
}

/// What the syncing task made durable.
#[derive(Debug, Clone, Default)]
struct Synced {
    through: u64,
    /// The last failure, with the newest record it was to seal.
    failed: Option<(u64, LedgerError)>,
}

/// The closing record of a session's ledger, being written on the blocking pool: awaiting
/// [`Sealing::wait`] waits until it is on disk (or failed, which it also logs). Dropping it
/// leaves the write to finish on its own.
#[derive(Debug)]
pub struct Sealing {
    writing: Option<tokio::task::JoinHandle<Result<(), LedgerError>>>,
    /// The ledger's folder.
    dir: PathBuf,
    /// A durable session's record and lease being removed from the session store: until they
    /// are, another dispatcher would still find the session and answer as if it were open.
    forgetting: Option<tokio::sync::oneshot::Receiver<()>>,
}

impl Sealing {
    /// Nothing to write (no ledger, or already closed).
    pub fn done() -> Self {
        Self {
            writing: None,
            dir: PathBuf::new(),
            forgetting: None,
        }
    }

    /// Also waits, in [`Sealing::wait`], for `forgotten` to be answered (or dropped).
    #[must_use]
    pub fn and_forgotten(mut self, forgotten: tokio::sync::oneshot::Receiver<()>) -> Self {
        self.forgetting = Some(forgotten);
        self
    }

    /// Waits for the closing record.
    ///
    /// # Errors
    /// [`LedgerError`] when it could not be written.
    pub async fn wait(self) -> Result<(), LedgerError> {
        if let Some(forgetting) = self.forgetting {
            // A writer that stopped (its session lost) drops the sender: nothing to wait for.
            let _ = forgetting.await;
        }
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
            syncing: Mutex::new(Syncing::default()),
            synced: tokio::sync::watch::Sender::new(Synced::default()),
        }
    }

    /// Whether a ledger is kept.
    pub fn is_on(&self) -> bool {
        self.dir.is_some()
    }

    /// Appends `record` and returns once it is synced (a decision: by the syncing task of the
    /// blocking pool) or written (an outcome, synced within `audit.lazy_seal_ms`). Without a
    /// ledger it returns at once (on its first poll).
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
        self.synced_through(sealer, seq).await
    }

    /// Returns once record `seq` is synced. One task of the blocking pool syncs for every
    /// decision written meanwhile, going on while more come; the other writers wait for its
    /// word rather than each waking a thread to find its record already synced.
    async fn synced_through(self: &Arc<Self>, sealer: Arc<Sealer>, seq: u64) -> Result<(), LedgerError> {
        let mut word = self.synced.subscribe();
        let start = {
            let mut syncing = self.syncing.lock().unwrap_or_else(|p| p.into_inner());
            syncing.wanted = syncing.wanted.max(seq);
            !std::mem::replace(&mut syncing.running, true)
        };
        if start {
            // Started once the work ready on this thread has run: a round's calls arrive as
            // messages handled one after another (the early ones as the stream is read), and a
            // sync started by the first would leave the others' decisions to a second. Yielding
            // lets them be written first, so the round shares one sync (they wait, `running`
            // being set); it costs no wake-up, the task being queued on this thread.
            tokio::task::yield_now().await;
            let me = Arc::clone(self);
            // Not awaited: its word comes through `synced`, and a task that panicked says so
            // there too.
            drop(tokio::task::spawn_blocking(move || me.sync_while_wanted(&sealer)));
        }
        let seen = word
            .wait_for(|s| s.through >= seq || s.failed.as_ref().is_some_and(|(upto, _)| *upto >= seq))
            .await
            .map_err(|_| LedgerError {
                path: self.dir.clone().unwrap_or_default(),
                reason: "the ledger's syncing task ended".into(),
            })?;
        match &*seen {
            s if s.through >= seq => Ok(()),
            Synced { failed: Some((_, e)), .. } => Err(e.clone()),
            _ => Ok(()),
        }
    }

    /// The syncing task: syncs through the newest decision wanted, says so, and again while
    /// newer ones were written meanwhile.
    fn sync_while_wanted(&self, sealer: &Arc<Sealer>) {
        let mut target = self.syncing.lock().unwrap_or_else(|p| p.into_inner()).wanted;
        loop {
            #[cfg(test)]
            {
                self.syncing.lock().unwrap_or_else(|p| p.into_inner()).passes += 1;
            }
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sealer.seal_through_within(target, self.lazy_seal)))
                .unwrap_or_else(|_| {
                    Err(LedgerError {
                        path: self.dir.clone().unwrap_or_default(),
                        reason: "the sync panicked".into(),
                    })
                });
            self.synced.send_modify(|s| match result {
                Ok(()) => s.through = s.through.max(target),
                Err(e) => s.failed = Some((target, e)),
            });
            let mut syncing = self.syncing.lock().unwrap_or_else(|p| p.into_inner());
            if syncing.wanted > target {
                target = syncing.wanted;
                continue;
            }
            syncing.running = false;
            return;
        }
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
                forgetting: None,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn audit(dir: &Path) -> Arc<Audit> {
        let mut config = toolslot::config::Config::builtin().audit;
        config.ledger_dir = dir.join("ledger").display().to_string();
        config.key_file = dir.join("keys/ledger.key").display().to_string();
        Arc::new(Audit::new(&config, &dir.join("ws"), "s"))
    }

    fn decision(index: usize) -> Record {
        let head = CallHead {
            index,
            id: format!("call_{index}").into(),
            name: "read_file".into(),
            input: Arc::new(serde_json::json!({"path": "a"})),
            repair: toolslot::event::RepairMark::None,
        };
        Record::decision(&head, &Trace::default(), true, None)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn parallel_decisions_return_once_synced_and_a_failed_sync_reaches_its_waiter() {
        let dir = tempfile::tempdir().unwrap();
        let audit = audit(dir.path());
        // Opened by the first; the next eight at once, sharing the syncing task.
        audit.append(decision(0)).await.unwrap();
        let all = futures::future::join_all((1..=8).map(|i| audit.append(decision(i)))).await;
        assert!(all.iter().all(Result::is_ok), "{all:?}");
        let heads = dir.path().join("keys/heads");
        let head = toolslot::ledger::read_head(&heads, "s").unwrap().unwrap();
        assert_eq!(head.records, 9, "every decision sealed before its append returned");
        // A sync that fails (here: for a record never written) answers the writer waiting for
        // it with the error, never a hang.
        let sealer = audit.open.lock().unwrap().as_ref().unwrap().sealer();
        let err = audit.synced_through(sealer, 50).await.unwrap_err();
        assert!(err.reason.contains("never written"), "{err}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_decisions_written_in_one_turn_of_the_thread_share_one_sync() {
        let dir = tempfile::tempdir().unwrap();
        let audit = audit(dir.path());
        audit.append(decision(0)).await.unwrap();
        let before = audit.syncing.lock().unwrap().passes;
        // A round's calls, handled one after another on the session's thread: the first one's
        // sync waits until the others are written.
        let all = futures::future::join_all((1..=4).map(|i| audit.append(decision(i)))).await;
        assert!(all.iter().all(Result::is_ok), "{all:?}");
        assert_eq!(audit.syncing.lock().unwrap().passes - before, 1, "one sync for the four decisions");
        let head = toolslot::ledger::read_head(&dir.path().join("keys/heads"), "s").unwrap().unwrap();
        assert_eq!(head.records, 5);
    }
}
