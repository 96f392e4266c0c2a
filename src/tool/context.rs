//! What a running tool may know about its session.

use std::path::PathBuf;
use std::sync::Arc;

use super::ToolError;
use super::services::{InputAnswer, InputRequest, SessionState, ToolFinder};
use crate::config::Config;

/// The per-call context handed to [`super::Tool::run`].
#[derive(Clone)]
pub struct ToolContext {
    /// The session this call belongs to.
    pub session_id: String,
    /// The workspace root every file tool is confined to.
    pub workspace: PathBuf,
    /// The call's provider id.
    pub call_id: String,
    /// The call's index in the response.
    pub index: usize,
    /// The configuration in force.
    pub config: Arc<Config>,
    /// Session services shared by tools (read tracking, overflow store, tool search).
    pub services: Arc<dyn SessionServices>,
    /// What the approval gate cleared this call to do; the OS sandbox holds the programs the
    /// call starts to it. The default grants nothing beyond reading.
    pub grant: Grant,
}

/// What the approval gate cleared a call to do, which the sandbox enforces on what it runs.
///
/// A call that ran without approval because it was judged read-only (Auto) gets nothing: a
/// read-only view of the files and no network, so a judgement that missed something still
/// cannot write or send. A call that needed approval and got it (or whose mode runs such
/// calls) may write the workspace, and reach the network unless `network.policy` is deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Grant {
    /// May write the workspace (and a private temporary folder).
    pub write: bool,
    /// May reach the network.
    pub network: bool,
}

impl ToolContext {
    /// The files and folders the session's policy hides from `tool` that exist now (absolute,
    /// symlinks resolved), for the sandbox to mask from the programs `tool` starts; none where
    /// the session has no policy.
    ///
    /// # Errors
    /// An `unavailable` error, nothing started, when they could not all be found (the search
    /// passed `policy.mask_max_entries`).
    pub fn hidden_paths(&self, tool: &str) -> Result<Vec<PathBuf>, ToolError> {
        match self.services.hidden() {
            None => Ok(Vec::new()),
            Some(h) => h
                .existing(tool, &self.workspace)
                .map_err(|e| ToolError::refused(super::ErrorCategory::Unavailable, format!("`{tool}` was not started: {e}"))),
        }
    }

    /// What the session's policy hides from `tool`, as a test of one absolute path, for a tool
    /// that walks the workspace; `None` when nothing is hidden.
    pub fn screen(&self, tool: &str) -> Option<super::Screen> {
        self.services.hidden()?.screen(tool, &self.workspace)
    }
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("session_id", &self.session_id)
            .field("workspace", &self.workspace)
            .field("call_id", &self.call_id)
            .field("index", &self.index)
            .field("grant", &self.grant)
            .finish_non_exhaustive()
    }
}

/// Session state tools may consult, provided by whoever hosts the session.
pub trait SessionServices: Send + Sync {
    /// The modification time a file had when this session last read (or wrote) it, so edit
    /// tools can refuse to edit a file the model has not seen, or that changed since.
    fn file_read_state(&self, path: &std::path::Path) -> Option<std::time::SystemTime>;
    /// Records that the session now knows `path` as of `modified` (a read or a write).
    fn record_file_state(&self, path: &std::path::Path, modified: std::time::SystemTime);
    /// Activates deferred tools for this session (tool_search).
    fn activate_tools(&self, names: &[String]);
    /// Ranks the deferred tools for tool_search, if any tools are deferred.
    fn search_index(&self) -> Option<Arc<dyn ToolFinder>>;
    /// Reads back an output this session saved when it was truncated, or the JSON text a
    /// handle (`h1`, …) of this session holds.
    ///
    /// # Errors
    /// An `invalid_input` error on the `ref` field saying why (unknown, expired, another
    /// session's, not a ref).
    fn load_overflow(&self, id: &str) -> Result<String, ToolError>;
    /// A running call's progress, for the host (no-op where nobody listens).
    fn progress(&self, index: usize, call_id: &str, progress: f64, total: Option<f64>, message: Option<String>) {
        let _ = (index, call_id, progress, total, message);
    }
    /// Asks the session's user the question a running call's server asked (MCP
    /// elicitation), and waits for the answer. Where no host can answer, it is declined at
    /// once.
    fn request_input(&self, index: usize, call_id: &str, request: InputRequest) -> futures::future::BoxFuture<'static, InputAnswer> {
        let _ = (index, call_id, request);
        Box::pin(std::future::ready(InputAnswer::Decline))
    }
    /// Passes an event of a session this call runs (spawn_agent's child) to the host.
    fn relay(&self, event: crate::event::PipelineEvent) {
        let _ = event;
    }
    /// Per-session state tools keep for themselves (background shell tasks), where the
    /// session keeps any.
    fn state(&self) -> Option<&SessionState> {
        None
    }
    /// A file to stream a call's output into as it is produced (saved like a truncated output,
    /// for retrieve_tool_result), where the session keeps saved outputs.
    fn output_file(&self) -> Option<Box<dyn super::OutputFile>> {
        None
    }
    /// Runs `work` beside the session's rounds until it ends (the host spawns it on its own
    /// runtime); hands it back where the host cannot.
    ///
    /// # Errors
    /// The work itself, not started.
    fn run_detached(&self, work: super::Detached) -> Result<(), super::Detached> {
        Err(work)
    }
    /// The session's approval mode, where a session has one (a child session inherits it).
    fn approval_mode(&self) -> Option<crate::config::ApprovalMode> {
        None
    }
    /// What the session's policy hides from every way of reading (the paths its deny rules
    /// name by a `path` glob alone), where the session has a policy: tools that walk the
    /// workspace skip them, and the sandbox masks them from the programs tools start.
    fn hidden(&self) -> Option<Arc<dyn super::HiddenPaths>> {
        None
    }
}

/// Services for contexts that have no session (tests, one-off calls): nothing is known,
/// nothing is remembered.
#[derive(Debug, Default)]
pub struct NoServices;

impl SessionServices for NoServices {
    fn file_read_state(&self, _path: &std::path::Path) -> Option<std::time::SystemTime> {
        None
    }
    fn record_file_state(&self, _path: &std::path::Path, _modified: std::time::SystemTime) {}
    fn activate_tools(&self, _names: &[String]) {}
    fn search_index(&self) -> Option<Arc<dyn ToolFinder>> {
        None
    }
    fn load_overflow(&self, id: &str) -> Result<String, ToolError> {
        Err(ToolError::invalid(
            "ref",
            format!("no saved output `{id}`: this call has no session"),
        ))
    }
}
