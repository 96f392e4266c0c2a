//! What a session is on a worker: the state its tools keep there (background shell tasks, the
//! files it read), and nothing of the dispatcher's (catalog, saved outputs, tool search).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use toolslot::builtin::background::TaskTable;
use toolslot::tool::{ErrorCategory, SessionServices, SessionState, ToolError, ToolFinder};

/// One session's state on this worker.
#[derive(Default)]
pub struct WorkerSession {
    files: Mutex<HashMap<PathBuf, SystemTime>>,
    state: SessionState,
}

impl SessionServices for WorkerSession {
    fn file_read_state(&self, path: &Path) -> Option<SystemTime> {
        self.files.lock().unwrap_or_else(|p| p.into_inner()).get(path).copied()
    }
    fn record_file_state(&self, path: &Path, modified: SystemTime) {
        self.files
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(path.to_path_buf(), modified);
    }
    fn activate_tools(&self, _names: &[String]) {}
    fn search_index(&self) -> Option<Arc<dyn ToolFinder>> {
        None
    }
    fn load_overflow(&self, id: &str) -> Result<String, ToolError> {
        Err(ToolError::refused(
            ErrorCategory::Unavailable,
            format!("saved output `{id}` is kept by the dispatcher, not by workers"),
        ))
    }
    fn state(&self) -> Option<&SessionState> {
        Some(&self.state)
    }
    fn run_detached(&self, work: toolslot::tool::Detached) -> Result<(), toolslot::tool::Detached> {
        // A background task's log pump and watchdog run on the worker's runtime.
        tokio::spawn(work);
        Ok(())
    }
}

/// The sessions this worker has seen, each dropped (killing its background tasks) once it has
/// none left and was idle for `idle`.
#[derive(Default)]
pub struct WorkerSessions {
    sessions: Mutex<HashMap<String, (Arc<WorkerSession>, Instant)>>,
}

impl WorkerSessions {
    /// The session `id`, made on first use; sessions idle past `idle` with no background task
    /// left are forgotten on the way.
    pub fn get(&self, id: &str, idle: std::time::Duration) -> Arc<WorkerSession> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions.retain(|sid, (s, at)| sid == id || at.elapsed() < idle || !s.state.get_or_default::<TaskTable>().is_empty());
        let entry = sessions
            .entry(id.to_string())
            .or_insert_with(|| (Arc::new(WorkerSession::default()), Instant::now()));
        entry.1 = Instant::now();
        Arc::clone(&entry.0)
    }
}

/// What one call on a worker sees of its session: the session's state, and a line back to the
/// dispatcher for the tool's progress reports.
pub struct CallServices {
    /// The session on this worker.
    pub session: Arc<WorkerSession>,
    /// The connection the reports are published on.
    pub client: async_nats::Client,
    /// The call's progress subject.
    pub subject: String,
    /// Seals the reports, so that the dispatcher can tell them from a forger's.
    pub sealer: toolslot::remote::seal::Sealer,
    /// The call's key (what a report is sealed for).
    pub key: String,
    /// What the dispatcher's session hides from the call ([`Job::hidden`](toolslot::remote::wire::Job)).
    pub hidden: Option<Arc<dyn toolslot::tool::HiddenPaths>>,
}

impl SessionServices for CallServices {
    fn file_read_state(&self, path: &Path) -> Option<SystemTime> {
        self.session.file_read_state(path)
    }
    fn record_file_state(&self, path: &Path, modified: SystemTime) {
        self.session.record_file_state(path, modified)
    }
    fn activate_tools(&self, names: &[String]) {
        self.session.activate_tools(names)
    }
    fn search_index(&self) -> Option<Arc<dyn ToolFinder>> {
        None
    }
    fn load_overflow(&self, id: &str) -> Result<String, ToolError> {
        self.session.load_overflow(id)
    }
    fn progress(&self, _index: usize, _call_id: &str, progress: f64, total: Option<f64>, message: Option<String>) {
        let report = toolslot::remote::wire::ProgressReport { progress, total, message };
        let Ok(bytes) = serde_json::to_vec(&report) else { return };
        let bytes = self.sealer.seal(toolslot::remote::seal::Domain::Progress, &self.key, &bytes);
        let (client, subject) = (self.client.clone(), self.subject.clone());
        // A report is a hint: it is published on its own task and never holds the tool up.
        tokio::spawn(async move {
            let _ = client.publish(subject, bytes.into()).await;
        });
    }
    fn state(&self) -> Option<&SessionState> {
        self.session.state()
    }
    fn run_detached(&self, work: toolslot::tool::Detached) -> Result<(), toolslot::tool::Detached> {
        self.session.run_detached(work)
    }
    fn hidden(&self) -> Option<Arc<dyn toolslot::tool::HiddenPaths>> {
        self.hidden.clone()
    }
}
