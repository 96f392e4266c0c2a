//! Language servers: the diagnostics of a file appended to the result of the edit that
//! changed it.
//!
//! Each session has its own servers ([`SessionLsp`]), one supervised [`LspServerActor`] per
//! configured server, started on the first edit of a file it handles, in the session's
//! workspace, and shut down with the session. After a successful `write_file` or `edit_file`
//! the PostProcessor asks [`SessionLsp::after_edit`] for the text to append: the server's
//! diagnostics of the version the edit produced, a note that they were unavailable or not
//! ready within `lsp.wait_ms`, or nothing when no server handles the file.
//!
//! A server runs programs the workspace names (a checkout's own interpreter, its plugins), so
//! it runs in the OS sandbox like a hook (`client.rs`), and is not started at all where none
//! works. What it says is external content: its diagnostics, and a reason that may quote it,
//! reach the model inside the envelope, as an MCP server's answers do.

mod client;
mod process;
mod server;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::{Addr, Supervisor};
use serde_json::Value;
use toolslot::config::{Config, LspServerConfig};
use toolslot::lsp::lsp_types::{Diagnostic, NumberOrString};
use toolslot::lsp::{DiagnosticsNote, format_diagnostics, format_note, language_id, server_for};
use toolslot::output::{neutralize, wrap_external};
use toolslot::sandbox::Backend;
use toolslot::tool::ToolOutput;
use tracing::Instrument;

pub use client::{LspClient, connect};
pub use server::{GetClient, LspServerActor, Shutdown};

/// One session's language servers.
pub struct SessionLsp {
    config: Arc<Config>,
    workspace: PathBuf,
    servers: Mutex<HashMap<String, Addr<LspServerActor>>>,
}

impl std::fmt::Debug for SessionLsp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLsp")
            .field("workspace", &self.workspace)
            .finish_non_exhaustive()
    }
}

impl SessionLsp {
    /// No server runs until an edit needs one.
    pub fn new(config: Arc<Config>, workspace: PathBuf) -> Self {
        Self {
            config,
            workspace,
            servers: Mutex::new(HashMap::new()),
        }
    }

    /// Whether a result of `tool` with `input` gets diagnostics: a file-editing built-in on a
    /// file some configured server handles. Cheap; decides whether post-processing waits.
    pub fn handles(&self, tool: &str, input: &Value) -> bool {
        !self.config.lsp.servers.is_empty()
            && toolslot::observe::edited_file(tool, input, &self.workspace)
                .is_some_and(|p| server_for(&self.config.lsp.servers, &p).is_some())
    }

    /// Starts the server of a file the model just read, if one handles it and it is not
    /// running: an edit usually follows a read, and then finds the server warm. Returns at once.
    pub fn warm_up(&self, tool: &str, input: &Value) {
        if tool != "read_file" || self.config.lsp.servers.is_empty() || !self.sandboxed() {
            return;
        }
        let Some(path) = input.get("path").and_then(Value::as_str) else {
            return;
        };
        if let Ok(path) = toolslot::builtin::workspace::confine(&self.workspace, path, "path")
            && let Some(server) = server_for(&self.config.lsp.servers, &path)
        {
            self.actor(server).do_send(GetClient);
        }
    }

    /// Whether a sandbox works here, so that servers may start (`client.rs` refuses them too).
    fn sandboxed(&self) -> bool {
        toolslot::sandbox::backend(self.config.shell.sandbox) != Backend::None
    }

    /// The server's actor for this session, started under a supervisor on first use (on the
    /// calling thread's arbiter, the session's).
    fn actor(&self, cfg: &LspServerConfig) -> Addr<LspServerActor> {
        let mut servers = self.servers.lock().unwrap_or_else(|p| p.into_inner());
        servers
            .entry(cfg.name.clone())
            .or_insert_with(|| {
                let (cfg, workspace, config) = (cfg.clone(), self.workspace.clone(), Arc::clone(&self.config));
                Supervisor::start(move |_| LspServerActor::new(cfg, workspace, &config))
            })
            .clone()
    }

    /// The text to append to a successful edit's output: the diagnostics of the file it
    /// wrote, within what is left of the output budget, or a note saying why there are none.
    /// `None` when no configured server handles the file (or the call was no edit).
    ///
    /// What the server said (its diagnostics, or a reason that may quote its stderr or its
    /// error) is wrapped as external content from `lsp:<server>`; toolslot's own lines (none
    /// found, not ready in time, not started without a sandbox) are not.
    ///
    /// # Cancel safety
    /// Dropping it abandons the wait; a late answer is never handed to another edit.
    pub async fn after_edit(&self, tool: &str, input: &Value, out: &ToolOutput) -> Option<String> {
        if out.is_error {
            return None;
        }
        let path = toolslot::observe::edited_file(tool, input, &self.workspace)?;
        let server = server_for(&self.config.lsp.servers, &path)?;
        let shown = toolslot::builtin::workspace::display(&self.workspace, &path);
        let lsp = &self.config.lsp;
        let budget = self.config.output.other_max_bytes.saturating_sub(out.content.len() + 2);
        if !self.sandboxed() {
            return Some(format_note(&server.name, &shown, &DiagnosticsNote::NoSandbox)).filter(|t| t.len() <= budget);
        }
        let source = format!("lsp:{}", server.name);
        let addr = self.actor(server);
        let language = language_id(server, &path);
        let span = tracing::info_span!("diagnostics", server = %server.name, file = %shown);
        let started = Instant::now();
        let work = async {
            let (ws, file, max) = (self.workspace.clone(), path.clone(), lsp.max_file_bytes);
            let text = tokio::task::spawn_blocking(move || toolslot::observe::read_back(&ws, &file, max))
                .await
                .map_err(|e| format!("the file could not be read back: {e}"))??;
            let client = addr.send(GetClient).await.map_err(|_| "its supervisor is gone".to_string())??;
            client.diagnose(&path, &language, text, Duration::from_millis(lsp.settle_ms)).await
        };
        let text = match tokio::time::timeout(Duration::from_millis(lsp.wait_ms), work.instrument(span)).await {
            Ok(Ok(diagnostics)) => {
                tracing::debug!(server = %server.name, file = %shown, n = diagnostics.len(), ms = started.elapsed().as_millis() as u64, "diagnostics");
                if diagnostics.is_empty() {
                    format_diagnostics(&server.name, &shown, &diagnostics, lsp.max_diagnostics, budget)
                } else {
                    // Measured as it will be wrapped: neutralized first, so the envelope adds
                    // only its own delimiters and the lines kept fit the budget exactly.
                    let room = budget.saturating_sub(wrap_external(&source, "").len());
                    let neutral: Vec<Diagnostic> = diagnostics.into_iter().map(neutralized).collect();
                    format_diagnostics(&neutralize(&server.name), &neutralize(&shown), &neutral, lsp.max_diagnostics, room)
                        .map(|text| wrap_external(&source, &text))
                }
            }
            Ok(Err(reason)) => Some(wrap_external(
                &source,
                &format_note(&server.name, &shown, &DiagnosticsNote::Unavailable(reason)),
            )),
            Err(_) => Some(format_note(&server.name, &shown, &DiagnosticsNote::NotInTime(lsp.wait_ms))),
        };
        text.filter(|t| t.len() <= budget)
    }

    /// Shuts every started server down (the session closed); each actor stops when its
    /// server has exited or its grace ran out.
    pub fn shutdown(&self) {
        let servers = std::mem::take(&mut *self.servers.lock().unwrap_or_else(|p| p.into_inner()));
        for addr in servers.into_values() {
            addr.do_send(Shutdown);
        }
    }
}

/// `d` with the text a server chose (its message and code) neutralized for the envelope.
fn neutralized(mut d: Diagnostic) -> Diagnostic {
    d.message = neutralize(&d.message).into_owned();
    if let Some(NumberOrString::String(code)) = &mut d.code {
        *code = neutralize(code).into_owned();
    }
    d
}
