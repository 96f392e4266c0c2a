//! A session's shared state: what every stage of the session may read or signal.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, mpsc, watch};

use crate::pipeline::sink::EventSink;
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
        self.memory.record_file_state(path, modified);
        if let Some(d) = self.shared.upgrade().as_ref().and_then(|s| s.durable.get()) {
            d.file_read(path, modified);
        }
    }
    fn activate_tools(&self, names: &[String]) {
        self.memory.activate_tools(names);
        if let Some(d) = self.shared.upgrade().as_ref().and_then(|s| s.durable.get()) {
            d.activated(names);
        }
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
                id: call_id.into(),
                progress,
                total,
                message,
            });
        }
    }
    fn request_input(
        &self,
        index: usize,
        call_id: &str,
        request: toolslot::tool::InputRequest,
    ) -> futures::future::BoxFuture<'static, toolslot::tool::InputAnswer> {
        use toolslot::tool::InputAnswer;
        let Some(shared) = self.shared.upgrade().filter(|s| s.answers_input.load(Ordering::SeqCst)) else {
            return Box::pin(std::future::ready(InputAnswer::Decline));
        };
        let (n, rx) = shared.inputs.open(request.schema.clone());
        tracing::info!(session = %shared.id, index, n, server = %request.server, "input requested");
        shared.emit(PipelineEvent::InputRequired {
            n,
            index,
            id: call_id.to_string(),
            server: request.server,
            message: request.message,
            requested_schema: request.schema,
        });
        let wait = std::time::Duration::from_millis(shared.config.mcp.elicitation_timeout_ms);
        let weak = self.shared.clone();
        drop(shared);
        Box::pin(async move {
            // Silence, a dropped question (round cancelled, session closed) and a closed
            // session all decline.
            let answer = match tokio::time::timeout(wait, rx).await {
                Ok(Ok(answer)) => answer,
                _ => InputAnswer::Decline,
            };
            if let Some(shared) = weak.upgrade() {
                shared.inputs.forget(n);
                shared.emit(PipelineEvent::InputAnswered {
                    n,
                    index,
                    action: answer.action(),
                });
            }
            answer
        })
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
    fn hidden(&self) -> Option<Arc<dyn toolslot::tool::HiddenPaths>> {
        // The session's policy: what its deny rules name by path is hidden from every way of
        // reading (tools' walks, the sandbox's masks).
        self.shared
            .upgrade()
            .map(|s| Arc::clone(&s.policy) as Arc<dyn toolslot::tool::HiddenPaths>)
    }
}

/// How many calls' preceding texts a session keeps ([`SessionShared::text_before`]): more than a
/// round asks about at once.
const TEXTS_KEPT: usize = 64;

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
    /// The session's ledger of decisions and outcomes (`audit.ledger_dir`).
    pub audit: Arc<crate::pipeline::audit::Audit>,
    /// Dialect, if fixed.
    pub dialect: Option<Dialect>,
    /// The session's language servers (started on the first edit that needs one).
    pub lsp: crate::sources::lsp::SessionLsp,
    /// Questions of MCP servers waiting for the host's answer.
    pub inputs: crate::pipeline::inputs::PendingInputs,
    /// Whether the host answers them (otherwise they are declined at once).
    pub answers_input: AtomicBool,
    /// Where events go: the running submission's stream, and live subscribers.
    sink: EventSink,
    /// Submissions running or waiting for their turn: 0, 1, or 2 when one waits behind a
    /// submission whose last round has completed.
    pub submissions: AtomicUsize,
    /// The last event sent was a `round_complete`: a host that saw it may submit the next
    /// round at once, and it waits for the rest of this submission (the end of its body)
    /// instead of being refused.
    pub settled: AtomicBool,
    /// True while a submission holds the session; the one that waits starts when it turns
    /// false.
    pub busy: watch::Sender<bool>,
    /// The span the host was in when it submitted the running submission (none: the rounds
    /// start traces of their own): its rounds' spans are its children. Held until the
    /// submission finishes.
    pub trace_parent: Mutex<tracing::Span>,
    /// Cancellation of the running round (true = cancelled), for those that wait on it; set
    /// through [`SessionShared::set_cancelled`].
    pub cancel: watch::Sender<bool>,
    /// The same, for those that only look (every call looks, twice): a load, not a lock.
    cancelled: AtomicBool,
    /// Closed sessions run nothing more.
    pub closed: AtomicBool,
    /// Which numbered submission holds the session; a cancellation aimed at one submission
    /// takes this lock, as its start and end do, so it can never land on the next one (see
    /// `submission::cancel_submission`).
    turn: Mutex<crate::pipeline::turn::Turn>,
    /// Stages told to panic on their next message (tests of supervision).
    faults: Mutex<Vec<Stage>>,
    /// Whether `faults` may hold anything: every handler checks, so the lock is only taken
    /// once a test armed a fault.
    faults_armed: AtomicBool,
    /// The assistant's text before each recent call, by call id (newest last, at most
    /// [`TEXTS_KEPT`]): what a host deciding on a call's approval reads as its cause.
    texts: Mutex<std::collections::VecDeque<(String, String)>>,
    /// The loop guard: session state read by the Planner (checks) and written by the
    /// PostProcessor (outcomes). A session's stages share one arbiter thread, so the lock is
    /// never contended; it replaces a message round trip per batch.
    guard: Mutex<LoopGuard>,
    /// With `remote.nats_url` set (in `toolslot serve`), the writer of the session's record.
    pub durable: std::sync::OnceLock<crate::sources::remote::DurableSession>,
    /// Without a durable record, the last completed round, for `GET …/rounds/last`.
    last_round: Mutex<Option<toolslot::remote::session_record::RoundRecord>>,
}

impl std::fmt::Debug for SessionShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionShared").field("id", &self.id).finish_non_exhaustive()
    }
}

impl SessionShared {
    /// Which numbered submission holds the session. Each change is a plain store of numbers:
    /// a panic cannot leave it half-changed, so poison is ignored.
    pub(crate) fn turn(&self) -> std::sync::MutexGuard<'_, crate::pipeline::turn::Turn> {
        self.turn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The submission is over: the session is free for the next one before the host's
    /// receiver ends, so a host that submits as soon as it sees the end is not refused.
    /// Called by the tail behind the submission's last round, or when its start failed.
    pub(crate) fn submission_finished(&self) {
        self.turn().end();
        self.set_sink(None);
        // The host's span ends with its request, not with the next submission.
        *self.trace_parent.lock().unwrap_or_else(|p| p.into_inner()) = tracing::Span::none();
        // The sink is cleared first, so the submission that waits sets its own after.
        self.busy.send_replace(false);
        self.submissions.fetch_sub(1, Ordering::SeqCst);
    }

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
        let sink = EventSink::new(config.execution.live_buffer);
        let workspace = options.workspace.unwrap_or_else(|| PathBuf::from("."));
        let policy = options
            .policy
            .unwrap_or_else(|| Arc::new(Policy::load(&config, &workspace).unwrap_or_else(|e| Policy::refusing(e.to_string()))));
        // What the policy tells the host (a project file whose allow rules were not applied)
        // comes with the session's first submission, as the sandbox's notice does.
        memory.tell_once(policy.notices());
        Self {
            policy,
            audit: Arc::new(crate::pipeline::audit::Audit::new(&config.audit, &workspace, &id)),
            lsp: crate::sources::lsp::SessionLsp::new(Arc::clone(&config), workspace.clone()),
            inputs: crate::pipeline::inputs::PendingInputs::default(),
            answers_input: AtomicBool::new(false),
            workspace,
            mode: options.approval_mode.unwrap_or(config.approval.mode),
            dialect: options.dialect,
            id,
            memory,
            services,
            config,
            sink,
            submissions: AtomicUsize::new(0),
            settled: AtomicBool::new(false),
            busy: watch::channel(false).0,
            trace_parent: Mutex::new(tracing::Span::none()),
            cancel,
            cancelled: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            turn: Mutex::new(crate::pipeline::turn::Turn::default()),
            faults: Mutex::new(Vec::new()),
            faults_armed: AtomicBool::new(false),
            guard: Mutex::new(guard),
            texts: Mutex::new(std::collections::VecDeque::new()),
            durable: std::sync::OnceLock::new(),
            last_round: Mutex::new(None),
        }
    }

    /// A round completed: it is the session's last round (in its durable record, or here).
    pub fn round_completed(
        &self,
        round: u64,
        stop_reason: toolslot::event::StopReason,
        text: &str,
        results: &[toolslot::event::ToolResult],
    ) {
        if let Some(d) = self.durable.get() {
            d.guard(self.guard().state());
            d.completed(round, stop_reason, text, results);
            return;
        }
        let mut last = self.last_round.lock().unwrap_or_else(|p| p.into_inner());
        let number = last.as_ref().map_or(0, |r| r.number) + 1;
        let mut r = toolslot::remote::session_record::RoundRecord {
            number,
            ..Default::default()
        };
        r.completed(stop_reason, text, results);
        *last = Some(r);
    }

    /// The session's last round as recorded (complete, or still running).
    pub fn last_round(&self) -> Option<toolslot::remote::session_record::RoundRecord> {
        match self.durable.get() {
            Some(d) => d.last_round(),
            None => self.last_round.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        }
    }

    /// Keeps the assistant's text before call `id` (only calls that may be asked about need it).
    pub fn remember_text(&self, id: &str, text: &str) {
        let mut texts = self.texts.lock().unwrap_or_else(|p| p.into_inner());
        if texts.len() == TEXTS_KEPT {
            texts.pop_front();
        }
        texts.push_back((id.to_string(), text.to_string()));
    }

    /// The assistant's text before call `id`, "" when not kept.
    pub fn text_before(&self, id: &str) -> String {
        let texts = self.texts.lock().unwrap_or_else(|p| p.into_inner());
        texts
            .iter()
            .rev()
            .find(|(i, _)| i == id)
            .map(|(_, t)| t.clone())
            .unwrap_or_default()
    }

    /// Sends an event to the running submission's stream and to live subscribers.
    pub fn emit(&self, event: PipelineEvent) {
        // Before the event leaves, so a host that reacts to it finds the session settled.
        self.settled
            .store(matches!(event, PipelineEvent::RoundComplete { .. }), Ordering::SeqCst);
        self.sink.emit(event);
    }

    /// A receiver of every event from now on. Subscribers that fall `execution.live_buffer`
    /// events behind lose the oldest ones; they never slow the pipeline.
    pub fn subscribe(&self) -> broadcast::Receiver<PipelineEvent> {
        self.sink.subscribe()
    }

    /// Emits a notice.
    pub fn notice(&self, notice: Notice) {
        self.emit(PipelineEvent::Notice(notice));
    }

    /// Points the event sink at a new submission's stream (`None`: it is over).
    pub fn set_sink(&self, tx: Option<mpsc::UnboundedSender<PipelineEvent>>) {
        self.sink.set_round(tx);
    }

    /// Whether the running round was cancelled (or the session closed).
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst) || self.closed.load(Ordering::SeqCst)
    }

    /// Cancels the running round (or clears the cancellation for a new one).
    pub fn set_cancelled(&self, cancelled: bool) {
        self.cancelled.store(cancelled, Ordering::SeqCst);
        self.cancel.send_replace(cancelled);
    }

    /// Arms a panic in `stage` on its next message.
    pub fn inject_fault(&self, stage: Stage) {
        self.faults.lock().unwrap_or_else(|p| p.into_inner()).push(stage);
        self.faults_armed.store(true, Ordering::SeqCst);
    }

    /// Panics if a fault was armed for `stage` (called at the top of each stage handler,
    /// inside its panic boundary).
    pub fn trip(&self, stage: Stage) {
        if !self.faults_armed.load(Ordering::Relaxed) {
            return;
        }
        let mut faults = self.faults.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = faults.iter().position(|s| *s == stage) {
            faults.remove(i);
            drop(faults);
            panic!("injected fault in {stage:?}");
        }
    }

    /// Reports that a stage failed and is being restarted by its supervisor.
    pub fn restarted(&self, stage: Stage) {
        tracing::warn!(session = %self.id, ?stage, "actor restarted");
        self.notice(Notice::new(
            NoticeKind::ActorRestarted,
            format!("{stage:?} failed and was restarted; the calls it held got error results"),
        ));
    }
}
