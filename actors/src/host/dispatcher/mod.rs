//! The Dispatcher: the one handle a host holds.
//!
//! `mod.rs` opens, takes over, drives and closes sessions; `answers.rs` carries the host's
//! answers to a session's questions (approvals, MCP servers' inputs); `error.rs` says why a
//! call was refused.

mod answers;
mod error;

pub use error::DispatchError;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use actix::Arbiter;
use actix_rt::ArbiterHandle;
use tokio::sync::{broadcast, mpsc};
use toolslot::config::Config;
use toolslot::event::PipelineEvent;
use toolslot::output::{OverflowStore, random_hex};
use toolslot::registry::{Catalog, LiveRegistry, Registry};
use toolslot::tool::ToolMetadata;

use crate::host::session_table::SessionTable;
use crate::pipeline::audit::Sealing;
use crate::pipeline::chain::RoundInput;
use crate::pipeline::session::{SessionOptions, SessionShared, Stage};
use crate::pipeline::submission::{self, NotStarted};
use crate::pipeline::turn::SubmissionState;
use crate::pipeline::wiring::Stages;
use crate::sources::remote::{DurableSession, LeaseError, SessionStore};
use toolslot::remote::session_record::{RecordedOptions, RoundRecord, SessionRecord};

/// Builds the registry of a session at a depth (0: a host's own; a sub-agent's one below its
/// parent's); `spawn_agent`'s registry factory is one.
pub type DepthRegistries = Arc<dyn Fn(usize) -> Arc<Registry> + Send + Sync>;

/// Which thread a new session's stages live on.
#[derive(Clone, Copy)]
enum Place {
    /// The next of the dispatcher's workers.
    Spread,
    /// The calling thread's arbiter, when it runs one.
    Here,
}

struct SessionHandle {
    shared: Arc<SessionShared>,
    stages: Stages,
    arbiter: ArbiterHandle,
}

struct Inner {
    config: Arc<Config>,
    registry: LiveRegistry,
    overflow: Arc<OverflowStore>,
    /// The worker threads' arbiters, each with its own copy of the configuration: every call
    /// hands its tool the configuration (a reference count), and one count shared by all
    /// threads would be a cache line every core writes.
    workers: Vec<(ArbiterHandle, Arc<Config>)>,
    /// Kept so worker threads live as long as the Dispatcher.
    _arbiters: Vec<Arbiter>,
    next_worker: AtomicUsize,
    sessions: SessionTable<SessionHandle>,
    /// The host answers `input_required` events (see [`Dispatcher::answering_inputs`]).
    answers_input: std::sync::atomic::AtomicBool,
    /// Where durable sessions are kept (see [`Dispatcher::keep_sessions_in`]).
    store: std::sync::OnceLock<Arc<SessionStore>>,
    /// One take-over at a time, so a session is never opened twice here.
    adopting: tokio::sync::Mutex<()>,
    /// Builds a sub-agent session's registry for its depth, when one is taken over.
    children: std::sync::OnceLock<DepthRegistries>,
}

/// Hands each output a durable session saves to its record's writer, which keeps a copy in
/// NATS.
struct DurableSaves {
    inner: std::sync::Weak<Inner>,
}

impl toolslot::output::SavedObserver for DurableSaves {
    fn saved(&self, session: &str, file: &std::path::Path) {
        let Some(inner) = self.inner.upgrade() else { return };
        if let Some(d) = inner.sessions.get(session).as_ref().and_then(|h| h.shared.durable.get()) {
            d.saved(file);
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        for a in &self._arbiters {
            a.stop();
        }
    }
}

/// The handle a host holds: open sessions, submit rounds, receive events, answer approvals.
/// Cheap to clone. Must be created inside an actix `System`.
#[derive(Clone)]
pub struct Dispatcher {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("workers", &self.inner.workers.len())
            .finish_non_exhaustive()
    }
}

impl Dispatcher {
    /// A dispatcher over `registry` (a fixed [`Registry`] or a [`LiveRegistry`] that grows;
    /// each session adopts its newest generation between submissions). Sessions are spread over `execution.workers` worker
    /// threads (0: the calling thread's arbiter); saved outputs older than the retention are
    /// removed now.
    pub fn new(config: Arc<Config>, registry: impl Into<LiveRegistry>) -> Self {
        let registry = registry.into();
        let overflow = Arc::new(OverflowStore::new(config.overflow.dir_path()));
        let removed = overflow.remove_older_than(config.overflow.retention_days);
        if removed > 0 {
            tracing::info!(removed, "expired saved outputs removed");
        }
        // 0: every session on the arbiter of the thread that made the Dispatcher, so a host
        // driving rounds from that thread pays no cross-thread wake-up per event; N: N worker
        // threads, for a server whose sessions should use every core.
        let arbiters: Vec<Arbiter> = (0..config.execution.workers).map(|_| Arbiter::new()).collect();
        let workers = if arbiters.is_empty() {
            vec![(Arbiter::current(), Arc::clone(&config))]
        } else {
            arbiters.iter().map(|a| (a.handle(), Arc::new(Config::clone(&config)))).collect()
        };
        Self {
            inner: Arc::new(Inner {
                config,
                registry,
                overflow,
                workers,
                _arbiters: arbiters,
                next_worker: AtomicUsize::new(0),
                sessions: SessionTable::default(),
                answers_input: std::sync::atomic::AtomicBool::new(false),
                store: std::sync::OnceLock::new(),
                adopting: tokio::sync::Mutex::new(()),
                children: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Says the host answers servers' questions (`input_required` events, through
    /// [`Dispatcher::answer_input`]); sessions opened from now on put them to it. Without it a
    /// question is declined at once (nobody would answer), and no event is sent.
    pub fn answering_inputs(self) -> Self {
        self.inner.answers_input.store(true, Ordering::SeqCst);
        self
    }

    /// Keeps the sessions opened from now on in `store` (JetStream KV, under a lease): another
    /// dispatcher, or this one restarted, takes them over ([`Dispatcher::adopt`]).
    pub fn keep_sessions_in(&self, store: Arc<SessionStore>) {
        let _ = self.inner.store.set(store);
        self.inner.overflow.observe(Arc::new(DurableSaves {
            inner: Arc::downgrade(&self.inner),
        }));
    }

    /// The configuration in force.
    pub fn config(&self) -> &Arc<Config> {
        &self.inner.config
    }

    /// The newest registry generation.
    pub fn registry(&self) -> Arc<Registry> {
        self.inner.registry.current()
    }

    /// Metadata snapshots of every tool of the newest generation, sorted by name.
    pub fn metadata(&self) -> Vec<ToolMetadata> {
        self.inner.registry.current().metadata()
    }

    /// Number of open sessions.
    pub fn session_count(&self) -> usize {
        self.inner.sessions.len()
    }

    /// Ids of the open sessions.
    pub fn session_ids(&self) -> Vec<String> {
        let mut ids = self.inner.sessions.ids();
        ids.sort();
        ids
    }

    fn session(&self, id: &str) -> Result<Arc<SessionHandle>, DispatchError> {
        let handle = self
            .inner
            .sessions
            .get(id)
            .ok_or_else(|| DispatchError::UnknownSession(id.to_string()))?;
        if handle.shared.durable.get().is_some_and(DurableSession::is_lost) {
            // Lost to another dispatcher: this one no longer acts for it.
            self.inner.sessions.remove(id);
            return Err(DispatchError::LeasedElsewhere(format!(
                "session `{id}` was taken over by another dispatcher"
            )));
        }
        Ok(handle)
    }

    /// Opens a session with an unguessable id (128 random bits) and starts its five stages,
    /// each under a supervisor and wired into a chain, on one worker thread.
    pub fn open_session(&self, options: SessionOptions) -> String {
        self.open_at(options, Place::Spread)
    }

    /// A top-level session over this dispatcher's registry, its stages at `place`.
    fn open_at(&self, options: SessionOptions, place: Place) -> String {
        let recorded = RecordedOptions {
            workspace: options.workspace.clone(),
            approval_mode: options.approval_mode,
            dialect: options.dialect,
            depth: 0,
        };
        let durable = self.inner.store.get().map(|_| (SessionRecord::new(recorded), 0, 0));
        self.start_session(random_hex(16), options, self.inner.registry.clone(), durable, place)
    }

    /// Refuses a new session past `max` open ones (0: no limit).
    fn within_limit(&self, max: usize) -> Result<(), DispatchError> {
        if max > 0 && self.session_count() >= max {
            return Err(DispatchError::TooManySessions(max));
        }
        Ok(())
    }

    /// As [`Dispatcher::open_session_limited`], with the session's stages on the calling
    /// thread's arbiter when it runs one (an HTTP worker whose connection carries every request
    /// of the session: a call then reaches its stages, and its result the connection, without
    /// waking another thread), else on a worker as usual.
    ///
    /// # Errors
    /// [`DispatchError::TooManySessions`].
    pub fn open_session_here_limited(&self, options: SessionOptions, max: usize) -> Result<String, DispatchError> {
        self.within_limit(max)?;
        Ok(self.open_at(options, Place::Here))
    }

    /// As [`Dispatcher::open_session`], over another registry: a sub-agent's session at
    /// `depth`, whose tools are built one level deeper, lives beside its parent so that the
    /// host can answer its approvals through this dispatcher. It is durable as its parent is:
    /// with a session store, a dispatcher that takes it over settles its last round and opens
    /// it with the tools of its depth.
    pub fn open_session_on(&self, options: SessionOptions, registry: impl Into<LiveRegistry>, depth: usize) -> String {
        let recorded = RecordedOptions {
            workspace: options.workspace.clone(),
            approval_mode: options.approval_mode,
            dialect: options.dialect,
            depth,
        };
        let durable = self.inner.store.get().map(|_| (SessionRecord::new(recorded), 0, 0));
        self.start_session(random_hex(16), options, registry.into(), durable, Place::Spread)
    }

    /// How sub-agent sessions' registries are built (see [`Dispatcher::open_session_on`]), for
    /// taking one over at its depth; without it a taken-over sub-agent gets this dispatcher's
    /// own tools (the same when no runner offers `spawn_agent`).
    pub fn build_children_with(&self, factory: DepthRegistries) {
        let _ = self.inner.children.set(factory);
    }

    /// Starts session `id`'s stages; with `durable` (its record, the record's revision and the
    /// lease's, 0 where not written yet), its state is kept in the session store.
    fn start_session(
        &self,
        id: String,
        options: SessionOptions,
        registry: LiveRegistry,
        durable: Option<(SessionRecord, u64, u64)>,
        place: Place,
    ) -> String {
        let here = match place {
            Place::Here => Arbiter::try_current().map(|a| (a, Arc::clone(&self.inner.config))),
            Place::Spread => None,
        };
        let (arbiter, config) = here.unwrap_or_else(|| {
            let i = self.inner.next_worker.fetch_add(1, Ordering::Relaxed) % self.inner.workers.len();
            self.inner.workers[i].clone()
        });
        let shared = SessionShared::new(id.clone(), registry, config, options, Arc::clone(&self.inner.overflow));
        shared
            .answers_input
            .store(self.inner.answers_input.load(Ordering::SeqCst), Ordering::SeqCst);
        if let (Some(store), Some((record, revision, lease))) = (self.inner.store.get(), durable) {
            shared.guard().restore(record.loop_guard.clone());
            {
                use toolslot::tool::SessionServices;
                if !record.activated.is_empty() {
                    shared.memory.activate_tools(&record.activated);
                }
                for (path, modified) in &record.files {
                    shared.memory.record_file_state(path, *modified);
                }
                if let (Some(owner), Some(state)) = (&record.task_owner, shared.memory.state()) {
                    state.get_or_default::<toolslot::remote::TaskOwner>().set(owner.clone());
                }
            }
            let weak = Arc::downgrade(&shared);
            let fenced = Box::new(move || {
                if let Some(s) = weak.upgrade() {
                    s.closed.store(true, Ordering::SeqCst);
                    s.set_cancelled(true);
                }
            });
            let (durable, writer) = store.start(id.clone(), record, revision, lease, fenced);
            // The writer lives on the session's thread, as its stages do.
            arbiter.spawn(writer);
            let _ = shared.durable.set(durable);
        }
        let stages = Stages::start(&arbiter, &shared);
        self.inner
            .sessions
            .insert(id.clone(), Arc::new(SessionHandle { shared, stages, arbiter }));
        id
    }

    /// As [`Dispatcher::open_session`], refusing past `max` open sessions.
    ///
    /// # Errors
    /// [`DispatchError::TooManySessions`].
    pub fn open_session_limited(&self, options: SessionOptions, max: usize) -> Result<String, DispatchError> {
        self.within_limit(max)?;
        Ok(self.open_session(options))
    }

    /// Closes a session: its running round is cancelled, its stages stop, its audit ledger
    /// gets its closing record, written on the blocking pool, and a durable session's record
    /// and lease are removed from the session store: await [`Sealing::wait`] to know both are
    /// done (a host that exits right after closing should, and so does an answer that says
    /// the session is gone).
    ///
    /// # Errors
    /// [`DispatchError::UnknownSession`].
    pub fn close_session(&self, id: &str) -> Result<Sealing, DispatchError> {
        let handle = self
            .inner
            .sessions
            .remove(id)
            .ok_or_else(|| DispatchError::UnknownSession(id.to_string()))?;
        let sealing = submission::close(&handle.shared, &handle.stages);
        Ok(match handle.shared.durable.get() {
            Some(d) => sealing.and_forgotten(d.close()),
            None => sealing,
        })
    }

    /// Makes sure session `id` is open here: a durable session that exists only in the
    /// session store (its dispatcher was killed or stopped, or is another replica whose lease
    /// ran out) is taken over: its lease claimed, its unfinished round settled (every call
    /// given exactly one result: `outcome_unknown` for a call that was running,
    /// `unavailable` not started for one that never ran), and its state restored.
    ///
    /// # Errors
    /// [`DispatchError::UnknownSession`] when no dispatcher has it,
    /// [`DispatchError::LeasedElsewhere`] while another dispatcher holds it, and
    /// [`DispatchError::Store`] when NATS does not answer.
    pub async fn adopt(&self, id: &str) -> Result<(), DispatchError> {
        if self.inner.sessions.get(id).is_some() {
            return self.session(id).map(|_| ());
        }
        // Only ids this program makes are looked up: anything else is not a key.
        let Some(store) = self
            .inner
            .store
            .get()
            .filter(|_| !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric()))
        else {
            return Err(DispatchError::UnknownSession(id.to_string()));
        };
        let _one = self.inner.adopting.lock().await;
        if self.inner.sessions.get(id).is_some() {
            return Ok(());
        }
        let leased = |e: LeaseError| match e {
            LeaseError::Held { .. } => DispatchError::LeasedElsewhere(e.to_string()),
            LeaseError::Store(_) => DispatchError::Store(e.to_string()),
        };
        let Some((first, _)) = store.load(id).await.map_err(leased)? else {
            return Err(DispatchError::UnknownSession(id.to_string()));
        };
        // Checked before the lease is taken, so a dispatcher that may not run the session
        // leaves it to one that may.
        let refused = |reason: String| DispatchError::WorkspaceRefused(format!("session `{id}` is not taken over: {reason}"));
        let root = &self.inner.config.server.workspace_root;
        crate::host::workspace::admit(first.options.workspace.as_deref(), root).map_err(refused)?;
        let lease = store.claim(id).await.map_err(leased)?;
        // Read again under the lease: the previous holder may have written meanwhile.
        let Some((mut record, revision)) = store.load(id).await.map_err(leased)? else {
            return Err(DispatchError::UnknownSession(id.to_string()));
        };
        // Again on what was read under the lease: that is the workspace the session gets.
        let workspace = match crate::host::workspace::admit(record.options.workspace.as_deref(), root) {
            Ok(w) => w,
            Err(reason) => {
                store.release(id, lease).await;
                return Err(refused(reason));
            }
        };
        // Its saved outputs first, so refs the previous dispatcher handed out read back here
        // and new handles are numbered after its.
        store.restore_saved(id, &record.saved, &self.inner.overflow).await;
        let settled = record.last_round.as_mut().is_some_and(|r| r.settle());
        // Written even when nothing was settled: the new revision fences the previous holder.
        let revision = match store.write(id, &record, revision).await {
            Ok(Some(rev)) => rev,
            Ok(None) => {
                return Err(DispatchError::LeasedElsewhere(format!(
                    "session `{id}` changed while it was being taken over; try again"
                )));
            }
            Err(reason) => return Err(DispatchError::Store(format!("session store: {reason}"))),
        };
        tracing::info!(session = %id, settled, "durable session taken over");
        let options = SessionOptions {
            workspace,
            approval_mode: record.options.approval_mode,
            dialect: record.options.dialect,
            policy: None,
        };
        // A sub-agent's session gets the tools of its depth, as when it was spawned.
        let registry = match (record.options.depth, self.inner.children.get()) {
            (0, _) | (_, None) => self.inner.registry.clone(),
            (depth, Some(build)) => LiveRegistry::from(build(depth)),
        };
        self.start_session(id.to_string(), options, registry, Some((record, revision, lease)), Place::Spread);
        Ok(())
    }

    /// The session's last round, as recorded (complete, settled, or still running).
    ///
    /// # Errors
    /// [`DispatchError::UnknownSession`].
    pub fn last_round(&self, id: &str) -> Result<Option<RoundRecord>, DispatchError> {
        Ok(self.session(id)?.shared.last_round())
    }

    /// Submits a round: the input goes to the head of the session's chain. Events stream on
    /// the returned receiver, the last being `round_complete` (one per message in the
    /// submission); the receiver ends after it.
    ///
    /// # Errors
    /// [`DispatchError::UnknownSession`], or [`DispatchError::RoundRunning`] while a round
    /// of the session is still running.
    ///
    /// # Cancel safety
    /// Dropping the receiver does not stop the round; use [`Dispatcher::cancel_round`].
    pub fn submit_round(&self, id: &str, input: RoundInput) -> Result<mpsc::UnboundedReceiver<PipelineEvent>, DispatchError> {
        self.submit_round_in(id, input, None)
    }

    /// As [`Dispatcher::submit_round`], with the round's dialect given (it overrides the
    /// session's for this submission).
    ///
    /// # Errors
    /// As [`Dispatcher::submit_round`].
    pub fn submit_round_in(
        &self,
        id: &str,
        input: RoundInput,
        dialect: Option<toolslot::stream::Dialect>,
    ) -> Result<mpsc::UnboundedReceiver<PipelineEvent>, DispatchError> {
        self.submit_numbered(id, input, dialect).map(|(_, events)| events)
    }

    /// As [`Dispatcher::submit_round_in`], with the submission's number in the session, which
    /// [`Dispatcher::cancel_submission`] and [`Dispatcher::submission_state`] take: a host that
    /// may give a submission up later names the one it means, never the one after it.
    ///
    /// # Errors
    /// As [`Dispatcher::submit_round`].
    pub fn submit_numbered(
        &self,
        id: &str,
        input: RoundInput,
        dialect: Option<toolslot::stream::Dialect>,
    ) -> Result<(u64, mpsc::UnboundedReceiver<PipelineEvent>), DispatchError> {
        let handle = self.session(id)?;
        submission::start(&handle.shared, &handle.stages, &handle.arbiter, input, dialect).map_err(|e| match e {
            NotStarted::Running => DispatchError::RoundRunning(id.to_string()),
            NotStarted::Gone => DispatchError::Gone(id.to_string()),
        })
    }

    /// Cancels submission `number` of the session, as [`Dispatcher::cancel_round`] does, but
    /// only while it is the one running: one that ended, or a later one, is left alone.
    /// Returns whether it was cancelled.
    ///
    /// # Errors
    /// [`DispatchError::UnknownSession`].
    pub fn cancel_submission(&self, id: &str, number: u64) -> Result<bool, DispatchError> {
        let handle = self.session(id)?;
        Ok(submission::cancel_submission(&handle.shared, &handle.stages, number))
    }

    /// Where submission `number` of the session is: waiting for its turn, running, or over.
    ///
    /// # Errors
    /// [`DispatchError::UnknownSession`].
    pub fn submission_state(&self, id: &str, number: u64) -> Result<SubmissionState, DispatchError> {
        Ok(submission::state(&self.session(id)?.shared, number))
    }

    /// Runs `future` on the worker thread of session `id`. A host that drives many sessions
    /// (a load generator, a server's per-session task) can drive each from its own session's
    /// thread: its events then arrive without a wake-up of another thread, and the driving
    /// spreads over the workers as the sessions do.
    ///
    /// # Errors
    /// [`DispatchError::UnknownSession`], or [`DispatchError::Gone`] when the worker has
    /// stopped.
    pub fn run_beside(&self, id: &str, future: impl Future<Output = ()> + Send + 'static) -> Result<(), DispatchError> {
        let handle = self.session(id)?;
        if handle.arbiter.spawn(future) {
            Ok(())
        } else {
            Err(DispatchError::Gone(id.to_string()))
        }
    }

    /// Cancels the session's running round: waiting approvals end as rejections, running
    /// calls are stopped with a `cancelled` result, and the round still completes.
    ///
    /// # Errors
    /// [`DispatchError::UnknownSession`].
    pub fn cancel_round(&self, id: &str) -> Result<(), DispatchError> {
        let handle = self.session(id)?;
        submission::cancel(&handle.shared, &handle.stages);
        Ok(())
    }

    /// Resumes a session the loop guard paused.
    ///
    /// # Errors
    /// [`DispatchError::UnknownSession`] or [`DispatchError::Gone`].
    ///
    /// # Cancel safety
    /// Dropping the future may leave the session paused.
    pub async fn resume(&self, id: &str) -> Result<(), DispatchError> {
        self.session(id)?.shared.guard().resume();
        Ok(())
    }

    /// Every event of the session from now on (for live UIs).
    ///
    /// # Errors
    /// [`DispatchError::UnknownSession`].
    pub fn subscribe(&self, id: &str) -> Result<broadcast::Receiver<PipelineEvent>, DispatchError> {
        Ok(self.session(id)?.shared.subscribe())
    }

    /// The session's current catalog (resident tools, then activated and later-added ones),
    /// on the newest registry generation: what the host should send with its next request.
    ///
    /// # Errors
    /// [`DispatchError::UnknownSession`].
    pub fn catalog(&self, id: &str) -> Result<Catalog, DispatchError> {
        let memory = &self.session(id)?.shared.memory;
        memory.refresh();
        Ok(memory.catalog())
    }

    /// Whether the session is running a round.
    ///
    /// # Errors
    /// [`DispatchError::UnknownSession`].
    pub fn is_running(&self, id: &str) -> Result<bool, DispatchError> {
        Ok(self.session(id)?.shared.submissions.load(Ordering::SeqCst) > 0)
    }

    /// Makes `stage` of the session panic on its next message, to test supervision.
    ///
    /// # Errors
    /// [`DispatchError::UnknownSession`].
    #[doc(hidden)]
    pub fn inject_fault(&self, id: &str, stage: Stage) -> Result<(), DispatchError> {
        self.session(id)?.shared.inject_fault(stage);
        Ok(())
    }
}
