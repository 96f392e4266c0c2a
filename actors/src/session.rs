//! A session's shared state: what every stage of the session may read or signal.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, mpsc, watch};
use toolslot::config::{ApprovalMode, Config};
use toolslot::event::PipelineEvent;
use toolslot::notice::{Notice, NoticeKind};
use toolslot::plan::loop_guard::LoopGuard;
use toolslot::policy::Policy;
use toolslot::registry::LiveRegistry;
use toolslot::session::SessionMemory;
use toolslot::stream::Dialect;

/// The pipeline stages, for supervision reports and fault injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// StreamAssembler.
    StreamAssembler,
    /// Planner.
    Planner,
    /// Approval.
    Approval,
    /// BatchExecutor.
    BatchExecutor,
    /// PostProcessor.
    PostProcessor,
}

/// How a session is opened.
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    /// Workspace root for file tools (default: the current folder).
    pub workspace: Option<PathBuf>,
    /// Approval mode (default: the config's).
    pub approval_mode: Option<ApprovalMode>,
    /// Dialect of the streams (default: detected).
    pub dialect: Option<Dialect>,
    /// The session's policy, already loaded (default: loaded for the workspace when the session
    /// opens; one that does not load refuses every call with its error).
    pub policy: Option<Arc<Policy>>,
}

/// What a session's tools may consult: its memory, and the round's event stream for
/// progress reports.
pub struct PipelineServices {
    memory: Arc<SessionMemory>,
    shared: std::sync::Weak<SessionShared>,
}

impl toolslot::tool::SessionServices for PipelineServices {
    fn file_read_state(&self, path: &std::path::Path) -> Option<std::time::SystemTime> {
        self.memory.file_read_state(path)
    }
    fn record_file_state(&self, path: &std::path::Path, modified: std::time::SystemTime) {
        self.memory.record_file_state(path, modified)
    }
    fn activate_tools(&self, names: &[String]) {
        self.memory.activate_tools(names)
    }
    fn search_index(&self) -> Option<Arc<dyn toolslot::tool::ToolFinder>> {
        self.memory.search_index()
    }
    fn load_overflow(&self, id: &str) -> Result<String, toolslot::tool::ToolError> {
        self.memory.load_overflow(id)
    }
    fn progress(&self, index: usize, call_id: &str, progress: f64, total: Option<f64>, message: Option<String>) {
        if let Some(shared) = self.shared.upgrade() {
            shared.emit(PipelineEvent::Progress {
                index,
                id: call_id.to_string(),
                progress,
                total,
                message,
            });
        }
    }
    fn relay(&self, event: PipelineEvent) {
        if let Some(shared) = self.shared.upgrade() {
            shared.emit(event);
        }
    }
    fn state(&self) -> Option<&toolslot::tool::SessionState> {
        self.memory.state()
    }
    fn output_file(&self) -> Option<Box<dyn toolslot::tool::OutputFile>> {
        self.memory.output_file()
    }
    fn run_detached(&self, work: toolslot::tool::Detached) -> Result<(), toolslot::tool::Detached> {
        // Background work runs on the session's thread, beside its rounds; it holds what it
        // needs and ends when the session drops the task it serves.
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(work);
                Ok(())
            }
            Err(_) => Err(work),
        }
    }
    fn approval_mode(&self) -> Option<toolslot::config::ApprovalMode> {
        self.shared.upgrade().map(|s| s.mode)
    }
}

/// Where a session's events go.
#[derive(Default)]
struct Sinks {
    /// The running round's event stream.
    round: Option<mpsc::UnboundedSender<PipelineEvent>>,
    /// Every event of the session, for UIs; made on the first subscription, since most
    /// sessions never have a watcher and a channel's buffer costs memory per session.
    live: Option<broadcast::Sender<PipelineEvent>>,
}

/// State shared by a session's stages and its rounds.
pub struct SessionShared {
    /// The session id.
    pub id: String,
    /// Memory shared with tools.
    pub memory: Arc<SessionMemory>,
    /// What tools see of the session (memory plus progress reporting).
    pub services: Arc<PipelineServices>,
    /// Configuration.
    pub config: Arc<Config>,
    /// Workspace root.
    pub workspace: PathBuf,
    /// Approval mode.
    pub mode: ApprovalMode,
    /// Policy rules and hooks.
    pub policy: Arc<Policy>,
    /// Dialect, if fixed.
    pub dialect: Option<Dialect>,
    /// Where events go: the running round's stream, and live subscribers. One lock for both,
    /// taken once per event.
    sinks: Mutex<Sinks>,
    /// Set while a round runs.
    pub round_running: AtomicBool,
    /// Cancellation of the running round (true = cancelled).
    pub cancel: watch::Sender<bool>,
    /// Closed sessions run nothing more.
    pub closed: AtomicBool,
    /// Stages told to panic on their next message (tests of supervision).
    faults: Mutex<Vec<Stage>>,
    /// The loop guard: session state read by the Planner (checks) and written by the
    /// PostProcessor (outcomes). A session's stages share one arbiter thread, so the lock is
    /// never contended; it replaces a message round trip per batch.
    guard: Mutex<LoopGuard>,
}

impl std::fmt::Debug for SessionShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionShared").field("id", &self.id).finish_non_exhaustive()
    }
}

impl SessionShared {
    /// The session's loop guard. A panic while it was held leaves it as it was after the
    /// last whole update (each update is one call's bookkeeping), so poison is ignored.
    pub fn guard(&self) -> std::sync::MutexGuard<'_, LoopGuard> {
        self.guard.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new session's state.
    pub fn new(
        id: String,
        registry: LiveRegistry,
        config: Arc<Config>,
        options: SessionOptions,
        overflow: Arc<toolslot::output::OverflowStore>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me: &std::sync::Weak<SessionShared>| {
            let memory = Arc::new(SessionMemory::new(id.clone(), registry, overflow));
            let services = Arc::new(PipelineServices {
                memory: Arc::clone(&memory),
                shared: me.clone(),
            });
            Self::build(id, memory, services, config, options)
        })
    }

    fn build(
        id: String,
        memory: Arc<SessionMemory>,
        services: Arc<PipelineServices>,
        config: Arc<Config>,
        options: SessionOptions,
    ) -> Self {
        let (cancel, _) = watch::channel(false);
        let guard = LoopGuard::new(config.loop_guard.clone());
        let workspace = options.workspace.unwrap_or_else(|| PathBuf::from("."));
        let policy = options
            .policy
            .unwrap_or_else(|| Arc::new(Policy::load(&config, &workspace).unwrap_or_else(|e| Policy::refusing(e.to_string()))));
        Self {
            workspace,
            policy,
            mode: options.approval_mode.unwrap_or(config.approval.mode),
            dialect: options.dialect,
            id,
            memory,
            services,
            config,
            sinks: Mutex::new(Sinks::default()),
            round_running: AtomicBool::new(false),
            cancel,
            closed: AtomicBool::new(false),
            faults: Mutex::new(Vec::new()),
            guard: Mutex::new(guard),
        }
    }

    /// Sends an event to the running round's stream and to live subscribers.
    pub fn emit(&self, event: PipelineEvent) {
        let sinks = self.sinks.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(live) = sinks.live.as_ref()
            && live.receiver_count() > 0
        {
            let _ = live.send(event.clone());
        }
        if let Some(tx) = sinks.round.as_ref() {
            let _ = tx.send(event);
        }
    }

    /// A receiver of every event from now on. Subscribers that fall `execution.live_buffer`
    /// events behind lose the oldest ones; they never slow the pipeline.
    pub fn subscribe(&self) -> broadcast::Receiver<PipelineEvent> {
        let mut sinks = self.sinks.lock().unwrap_or_else(|p| p.into_inner());
        sinks
            .live
            .get_or_insert_with(|| broadcast::channel(self.config.execution.live_buffer.max(1)).0)
            .subscribe()
    }

    /// Emits a notice.
    pub fn notice(&self, notice: Notice) {
        self.emit(PipelineEvent::Notice(notice));
    }

    /// Points the event sink at a new round's stream.
    pub fn set_sink(&self, tx: Option<mpsc::UnboundedSender<PipelineEvent>>) {
        self.sinks.lock().unwrap_or_else(|p| p.into_inner()).round = tx;
    }

    /// Whether the running round was cancelled (or the session closed).
    pub fn is_cancelled(&self) -> bool {
        *self.cancel.borrow() || self.closed.load(Ordering::SeqCst)
    }

    /// Arms a panic in `stage` on its next message.
    pub fn inject_fault(&self, stage: Stage) {
        self.faults.lock().unwrap_or_else(|p| p.into_inner()).push(stage);
    }

    /// Panics if a fault was armed for `stage` (called at the top of each stage handler,
    /// inside its panic boundary).
    pub fn trip(&self, stage: Stage) {
        let mut faults = self.faults.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = faults.iter().position(|s| *s == stage) {
            faults.remove(i);
            drop(faults);
            panic!("injected fault in {stage:?}");
        }
    }

    /// Reports that a stage was restarted by its supervisor.
    pub fn restarted(&self, stage: Stage) {
        tracing::warn!(session = %self.id, ?stage, "actor restarted");
        self.notice(Notice::new(
            NoticeKind::ActorRestarted,
            format!("{stage:?} failed and was restarted; the calls it held got error results"),
        ));
    }
}
