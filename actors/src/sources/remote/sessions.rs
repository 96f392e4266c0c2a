//! Durable sessions: each session's record (`toolslot::remote::session_record`) kept in the KV
//! bucket `toolslot_sessions`, written with compare-and-set, by the one dispatcher that holds
//! the session's lease in `toolslot_leases`.
//!
//! A lease is a key (the session id) whose value names its dispatcher; the bucket's entries
//! live `remote.session_lease_ttl_ms` since their last write, and the holder renews it three
//! times per period. Another dispatcher may take the session only once the key is gone; a
//! dispatcher whose name is the lease's (`remote.dispatcher_id`, the same replica started
//! again) takes it back at once. With signing on, a lease is sealed with the dispatcher's key,
//! so that a lease naming this dispatcher proves it was written by a holder of that key.
//! Every write of the record names the revision its writer last saw: a dispatcher that lost
//! the session (its lease ran out and someone took over, who rewrote the record) finds the
//! revision changed, and stops acting for the session ("fenced").
//!
//! Each session's writes go through one task in order ([`DurableSession`]): a mark that a
//! call's tool is about to run is written (and awaited) before the tool runs, so a dispatcher
//! killed mid-call leaves a record that says the call was running; everything else is
//! written as it happens, batched when several marks wait.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::{kv, object_store};
use tokio::sync::{mpsc, oneshot};
use toolslot::config::RemoteConfig;
use toolslot::event::{StopReason, ToolResult};
use toolslot::plan::approval::SessionApprovals;
use toolslot::plan::loop_guard::LoopGuardState;
use toolslot::remote::session_record::{RoundRecord, SessionRecord};
use tracing::Instrument;

use super::broker::{Broker, BrokerError, open_bucket, open_objects};

mod lease;

/// The sessions' records.
pub const SESSIONS_BUCKET: &str = "toolslot_sessions";
/// The sessions' leases.
pub const LEASES_BUCKET: &str = "toolslot_leases";
/// The sessions' saved outputs, as `SESSION/FILE`.
pub const SAVED_STORE: &str = "toolslot_saved";

/// Why a session could not be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    /// Another dispatcher holds it.
    #[error("session `{session}` is held by dispatcher `{holder}` until its lease runs out; try again later")]
    Held {
        /// The session.
        session: String,
        /// Who holds it.
        holder: String,
    },
    /// NATS did not answer, or the record could not be read.
    #[error("session store: {0}")]
    Store(String),
}

/// The dispatcher's side of the session buckets.
pub struct SessionStore {
    records: kv::Store,
    leases: kv::Store,
    saved: object_store::ObjectStore,
    saved_max: usize,
    /// This dispatcher's name in leases.
    me: String,
    lease_ttl: Duration,
    /// Seals the leases this dispatcher writes and opens those it reads.
    sealer: toolslot::remote::seal::Sealer,
}

impl std::fmt::Debug for SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionStore").field("me", &self.me).finish_non_exhaustive()
    }
}

impl SessionStore {
    /// Opens (creating where missing) the two buckets on `broker`'s connection.
    ///
    /// # Errors
    /// [`BrokerError::Setup`].
    pub async fn open(broker: &Broker, cfg: &RemoteConfig) -> Result<Arc<Self>, BrokerError> {
        let records = open_bucket(&broker.js, SESSIONS_BUCKET, Duration::from_secs(cfg.session_ttl_secs.max(1))).await?;
        let lease_ttl = Duration::from_millis(cfg.session_lease_ttl_ms.max(300));
        let leases = open_bucket(&broker.js, LEASES_BUCKET, lease_ttl).await?;
        let saved = open_objects(&broker.js, SAVED_STORE, Duration::from_secs(cfg.session_ttl_secs.max(1))).await?;
        Ok(Arc::new(Self {
            records,
            leases,
            saved,
            saved_max: cfg.session_saved_max,
            me: match cfg.dispatcher_id.trim() {
                "" => format!("dispatcher-{}", toolslot::output::random_hex(6)),
                id => id.to_string(),
            },
            lease_ttl,
            sealer: broker.sealer.clone(),
        }))
    }

    /// This dispatcher's name in leases.
    pub fn me(&self) -> &str {
        &self.me
    }

    /// The session's record and its revision, if it has one.
    ///
    /// # Errors
    /// [`LeaseError::Store`] when NATS did not answer or the record is unreadable.
    pub async fn load(&self, session: &str) -> Result<Option<(SessionRecord, u64)>, LeaseError> {
        let Some(entry) = self.records.entry(session).await.map_err(|e| LeaseError::Store(e.to_string()))? else {
            return Ok(None);
        };
        if entry.operation != kv::Operation::Put {
            return Ok(None);
        }
        let record = SessionRecord::decode(&entry.value).map_err(|e| LeaseError::Store(format!("session `{session}`: {e}")))?;
        Ok(Some((record, entry.revision)))
    }

    /// Writes `record` over revision `revision` (0: the session has no record yet).
    ///
    /// # Errors
    /// A reason; `Ok(None)` when someone else wrote meanwhile.
    pub async fn write(&self, session: &str, record: &SessionRecord, revision: u64) -> Result<Option<u64>, String> {
        let bytes = record.encode().into();
        let written = if revision == 0 {
            self.records.create(session, bytes).await.map_err(|e| match e.kind() {
                kv::CreateErrorKind::AlreadyExists => None,
                _ => Some(e.to_string()),
            })
        } else {
            self.records.update(session, bytes, revision).await.map_err(|e| match e.kind() {
                kv::UpdateErrorKind::WrongLastRevision => None,
                _ => Some(e.to_string()),
            })
        };
        match written {
            Ok(rev) => Ok(Some(rev)),
            Err(None) => Ok(None),
            Err(Some(reason)) => Err(reason),
        }
    }

    /// Puts back in `overflow` the saved outputs `names` of `session` that the object store
    /// still holds; one it cannot read is skipped (its ref answers "no saved output").
    pub async fn restore_saved(&self, session: &str, names: &[String], overflow: &toolslot::output::OverflowStore) {
        use tokio::io::AsyncReadExt;
        for name in names {
            let mut bytes = Vec::new();
            let read = async {
                let mut object = self.saved.get(saved_key(session, name)).await.map_err(|e| e.to_string())?;
                object.read_to_end(&mut bytes).await.map_err(|e| e.to_string())
            };
            if let Err(e) = read.await {
                tracing::warn!(session, name, error = %e, "a saved output could not be restored");
                continue;
            }
            if let Err(e) = overflow.restore(session, name, &bytes) {
                tracing::warn!(session, name, error = %e, "a saved output could not be restored");
            }
        }
    }

    /// Removes a closed session's record and lease (only revisions this dispatcher wrote).
    async fn forget(&self, session: &str, revision: u64, lease: u64) {
        if let Err(e) = self.records.delete_expect_revision(session, Some(revision)).await {
            tracing::warn!(session, error = %e, "the closed session's record was left in place");
        }
        let _ = self.leases.delete_expect_revision(session, Some(lease)).await;
    }

    /// The writer of `session`, whose record is `record` at `revision` (0: not written yet)
    /// and whose lease this dispatcher holds at `lease` (0: not claimed yet), and the task
    /// that writes, for the caller to spawn beside the session. `fenced` runs once if the
    /// session is lost to another dispatcher.
    pub fn start(
        self: &Arc<Self>,
        session: String,
        record: SessionRecord,
        revision: u64,
        lease: u64,
        fenced: Box<dyn FnOnce() + Send>,
    ) -> (DurableSession, impl std::future::Future<Output = ()> + Send + 'static) {
        let (tx, rx) = mpsc::unbounded_channel();
        let last = Arc::new(Mutex::new(record.last_round.clone()));
        let lost = Arc::new(AtomicBool::new(false));
        let approvals = record.approvals.clone();
        let owner = Mutex::new(record.task_owner.clone());
        let writer = Writer {
            store: Arc::clone(self),
            span: tracing::info_span!("durable", session = %session),
            session,
            record,
            revision,
            lease,
            round: None,
            last: Arc::clone(&last),
            lost: Arc::clone(&lost),
            fenced: Some(fenced),
        };
        let span = writer.span.clone();
        let task = writer.run(rx).instrument(span);
        let handle = DurableSession {
            tx,
            last,
            lost,
            approvals,
            owner,
        };
        (handle, task)
    }
}

/// What a session's writer is told, in order.
enum Op {
    Planned {
        round: u64,
        index: usize,
        id: String,
        name: String,
    },
    Running {
        round: u64,
        index: usize,
        id: String,
        name: String,
        ack: oneshot::Sender<bool>,
    },
    Finished {
        round: u64,
        result: ToolResult,
    },
    Ended {
        round: u64,
        call_count: usize,
        stop_reason: StopReason,
        text: String,
    },
    Completed {
        round: u64,
        stop_reason: StopReason,
        text: String,
        results: Vec<ToolResult>,
    },
    Approvals(SessionApprovals),
    Guard(LoopGuardState),
    Activated(Vec<String>),
    FileRead(std::path::PathBuf, std::time::SystemTime),
    TaskOwner(Option<String>),
    Saved(std::path::PathBuf),
    /// Answered once the record and lease are removed.
    Close(oneshot::Sender<()>),
}

/// Copies a saved output into the object store; its name once it is there. Done in line
/// with the other marks, so that the record never names an output (nor files a result
/// pointing at one) the store does not hold yet.
async fn keep(store: &SessionStore, session: &str, path: &std::path::Path) -> Option<String> {
    if store.saved_max == 0 {
        return None;
    }
    let name = path.file_name()?.to_str()?.to_string();
    let file = match tokio::fs::File::open(path).await {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(name, error = %e, "a saved output could not be read for the session store");
            return None;
        }
    };
    let mut file = tokio::io::BufReader::new(file);
    match store.saved.put(saved_key(session, &name).as_str(), &mut file).await {
        Ok(_) => Some(name),
        Err(e) => {
            tracing::warn!(name, error = %e, "a saved output was not kept in the session store");
            None
        }
    }
}

/// A saved output's name in the object store.
fn saved_key(session: &str, name: &str) -> String {
    format!("{session}/{name}")
}

/// A session's handle on its writer.
#[derive(Debug)]
pub struct DurableSession {
    tx: mpsc::UnboundedSender<Op>,
    last: Arc<Mutex<Option<RoundRecord>>>,
    lost: Arc<AtomicBool>,
    /// The approvals the record held when this dispatcher took the session.
    approvals: SessionApprovals,
    /// The task owner last written.
    owner: Mutex<Option<String>>,
}

impl DurableSession {
    /// The remembered approvals the session had when this dispatcher took it.
    pub fn restored_approvals(&self) -> SessionApprovals {
        self.approvals.clone()
    }

    /// Whether the session was lost to another dispatcher (nothing more is written).
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// The last round as recorded.
    pub fn last_round(&self) -> Option<RoundRecord> {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn send(&self, op: Op) {
        // A writer that stopped (the session closed or was lost) takes nothing more.
        let _ = self.tx.send(op);
    }

    /// Notes a planned call of local round `round`.
    pub fn planned(&self, round: u64, index: usize, id: &str, name: &str) {
        self.send(Op::Planned {
            round,
            index,
            id: id.into(),
            name: name.into(),
        });
    }

    /// Writes that a call's tool is about to run; true once it is on the server. A call whose
    /// mark could not be written must not run: a dispatcher killed after it ran would leave a
    /// record saying it never started.
    pub async fn running(&self, round: u64, index: usize, id: &str, name: &str) -> bool {
        let (ack, rx) = oneshot::channel();
        self.send(Op::Running {
            round,
            index,
            id: id.into(),
            name: name.into(),
            ack,
        });
        rx.await.unwrap_or(false)
    }

    /// Files a call's result.
    pub fn finished(&self, round: u64, result: ToolResult) {
        self.send(Op::Finished { round, result });
    }

    /// Notes the response's end.
    pub fn ended(&self, round: u64, call_count: usize, stop_reason: StopReason, text: &str) {
        self.send(Op::Ended {
            round,
            call_count,
            stop_reason,
            text: text.into(),
        });
    }

    /// The round completed with these results.
    pub fn completed(&self, round: u64, stop_reason: StopReason, text: &str, results: &[ToolResult]) {
        self.send(Op::Completed {
            round,
            stop_reason,
            text: text.into(),
            results: results.to_vec(),
        });
    }

    /// The remembered approvals changed.
    pub fn approvals(&self, approvals: &SessionApprovals) {
        self.send(Op::Approvals(approvals.clone()));
    }

    /// The loop guard's counts at a round's end.
    pub fn guard(&self, state: LoopGuardState) {
        self.send(Op::Guard(state));
    }

    /// Tools the session activated.
    pub fn activated(&self, names: &[String]) {
        self.send(Op::Activated(names.to_vec()));
    }

    /// A file the session read, and the modification time it saw.
    pub fn file_read(&self, path: &std::path::Path, modified: std::time::SystemTime) {
        self.send(Op::FileRead(path.to_path_buf(), modified));
    }

    /// The worker holding the session's background tasks, when it changed.
    pub fn task_owner(&self, owner: Option<String>) {
        let mut last = self.owner.lock().unwrap_or_else(|p| p.into_inner());
        if *last != owner {
            last.clone_from(&owner);
            self.send(Op::TaskOwner(owner));
        }
    }

    /// The session saved an output (`file`, in its overflow folder): it is kept in the object
    /// store and named in the record.
    pub fn saved(&self, file: &std::path::Path) {
        self.send(Op::Saved(file.to_path_buf()));
    }

    /// The session closed: its record and lease are removed; the receiver is answered once
    /// they are (and dropped unanswered when the session was lost, with nothing to remove).
    pub fn close(&self) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        self.send(Op::Close(tx));
        rx
    }
}

struct Writer {
    store: Arc<SessionStore>,
    span: tracing::Span,
    session: String,
    record: SessionRecord,
    revision: u64,
    lease: u64,
    /// The local round the record's last round is (rounds are numbered anew by each
    /// dispatcher; the record numbers them for the session).
    round: Option<u64>,
    last: Arc<Mutex<Option<RoundRecord>>>,
    lost: Arc<AtomicBool>,
    fenced: Option<Box<dyn FnOnce() + Send>>,
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Op>) {
        if self.lease == 0 {
            match self.store.claim(&self.session).await {
                Ok(rev) => self.lease = rev,
                Err(e) => {
                    tracing::warn!(error = %e, "session not taken");
                    return self.lose(rx);
                }
            }
        }
        let period = self.store.lease_ttl / 3;
        let mut renew = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        let mut renewed = Instant::now();
        let mut dirty = self.revision == 0;
        loop {
            if dirty {
                match self.flush().await {
                    Flush::Written => dirty = false,
                    Flush::Lost => return self.lose(rx),
                    // NATS is away: the marks stay in the record and go with the next write.
                    Flush::Failed => {}
                }
            }
            let op = tokio::select! {
                op = rx.recv() => op,
                _ = renew.tick() => {
                    match self.store.leases.update(&self.session, self.store.lease_value(&self.session), self.lease).await {
                        Ok(rev) => {
                            self.lease = rev;
                            renewed = Instant::now();
                        }
                        Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => return self.lose(rx),
                        Err(e) => {
                            tracing::warn!(error = %e, "lease not renewed");
                            if renewed.elapsed() >= self.store.lease_ttl {
                                return self.lose(rx);
                            }
                        }
                    }
                    continue;
                }
            };
            let Some(op) = op else { return };
            let mut acks = Vec::new();
            let mut close = self.apply(op, &mut acks).await;
            while let Ok(op) = rx.try_recv() {
                close = close.or(self.apply(op, &mut acks).await);
            }
            if let Some(closed) = close {
                self.store.forget(&self.session, self.revision, self.lease).await;
                let _ = closed.send(());
                return;
            }
            let outcome = self.flush().await;
            let ok = matches!(outcome, Flush::Written);
            dirty = matches!(outcome, Flush::Failed);
            for ack in acks {
                let _ = ack.send(ok);
            }
            if matches!(outcome, Flush::Lost) {
                return self.lose(rx);
            }
        }
    }

    /// Applies `op` to the record; the close's answer when the session closed.
    async fn apply(&mut self, op: Op, acks: &mut Vec<oneshot::Sender<bool>>) -> Option<oneshot::Sender<()>> {
        match op {
            Op::Planned { round, index, id, name } => {
                if let Some(r) = self.round_mut(round) {
                    r.planned(index, &id, &name);
                }
            }
            Op::Running {
                round,
                index,
                id,
                name,
                ack,
            } => match self.round_mut(round) {
                Some(r) => {
                    r.running(index, &id, &name);
                    acks.push(ack);
                }
                // A round older than the one recorded: nothing of it may run now.
                None => {
                    let _ = ack.send(false);
                }
            },
            Op::Finished { round, result } => {
                if let Some(r) = self.round_mut(round) {
                    r.finished(result);
                }
            }
            Op::Ended {
                round,
                call_count,
                stop_reason,
                text,
            } => {
                if let Some(r) = self.round_mut(round) {
                    r.ended(call_count, stop_reason, &text);
                }
            }
            Op::Completed {
                round,
                stop_reason,
                text,
                results,
            } => {
                if let Some(r) = self.round_mut(round) {
                    r.completed(stop_reason, &text, &results);
                }
            }
            Op::Approvals(a) => self.record.approvals = a,
            Op::Guard(g) => self.record.loop_guard = g,
            Op::Activated(names) => self.record.activate(&names),
            Op::FileRead(path, modified) => {
                self.record.files.insert(path, modified);
            }
            Op::TaskOwner(owner) => self.record.task_owner = owner,
            Op::Saved(path) => {
                if let Some(name) = keep(&self.store, &self.session, &path).await {
                    self.record.saved(&name, self.store.saved_max);
                }
            }
            Op::Close(closed) => return Some(closed),
        }
        None
    }

    /// The record of local round `round`, begun when it is new; `None` for an older one.
    fn round_mut(&mut self, round: u64) -> Option<&mut RoundRecord> {
        match self.round {
            Some(r) if round < r => return None,
            Some(r) if round == r => {}
            _ => {
                self.round = Some(round);
                self.record.begin_round();
            }
        }
        self.record.last_round.as_mut()
    }

    async fn flush(&mut self) -> Flush {
        match self.store.write(&self.session, &self.record, self.revision).await {
            Ok(Some(rev)) => {
                self.revision = rev;
                *self.last.lock().unwrap_or_else(|p| p.into_inner()) = self.record.last_round.clone();
                Flush::Written
            }
            Ok(None) => Flush::Lost,
            Err(reason) => {
                tracing::warn!(%reason, "session record not written");
                Flush::Failed
            }
        }
    }

    /// The session belongs to another dispatcher now: nothing more is written, every call
    /// waiting to run is refused, and the session stops acting.
    fn lose(mut self, mut rx: mpsc::UnboundedReceiver<Op>) {
        let _enter = self.span.enter();
        tracing::warn!("session lost to another dispatcher; it stops here");
        self.lost.store(true, Ordering::SeqCst);
        if let Some(f) = self.fenced.take() {
            f();
        }
        rx.close();
        while let Ok(op) = rx.try_recv() {
            if let Op::Running { ack, .. } = op {
                let _ = ack.send(false);
            }
        }
        // Later marks find the channel closed; a running mark's waiter reads the drop as false.
    }
}

enum Flush {
    Written,
    Lost,
    Failed,
}
