//! The connection to one language server process: `initialize`, documents kept in sync, and
//! the diagnostics of one edit, pulled where the server supports it, published otherwise.
//! The process runs in the OS sandbox, granted nothing ([`connect`]).
//!
//! The JSON-RPC framing and request bookkeeping are async-lsp's; this file only says what a
//! diagnostics client asks and answers. Which diagnostics belong to which edit is decided by
//! the slot's [`Documents`].

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_lsp::lsp_types::notification::{DidChangeTextDocument, DidOpenTextDocument, Exit, Initialized, PublishDiagnostics};
use async_lsp::lsp_types::request::{
    DocumentDiagnosticRequest, Initialize, RegisterCapability, Request, ShowMessageRequest, Shutdown, UnregisterCapability,
    WorkDoneProgressCreate, WorkspaceConfiguration, WorkspaceDiagnosticRefresh, WorkspaceFoldersRequest,
};
use async_lsp::lsp_types::{
    ClientCapabilities, ClientInfo, Diagnostic, DiagnosticClientCapabilities, DidChangeTextDocumentParams, DidOpenTextDocumentParams,
    DocumentDiagnosticReport, DocumentDiagnosticReportResult, InitializeParams, InitializedParams, PublishDiagnosticsClientCapabilities,
    TextDocumentClientCapabilities, TextDocumentContentChangeEvent, TextDocumentIdentifier, TextDocumentItem,
    TextDocumentSyncClientCapabilities, Url, VersionedTextDocumentIdentifier, WorkspaceClientCapabilities, WorkspaceFolder,
};
use async_lsp::router::Router;
use async_lsp::{MainLoop, ServerSocket};
use tokio::sync::watch;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};
use toolslot::config::{LspServerConfig, ShellConfig};
use toolslot::lsp::{Documents, Expect, SyncKind};
use toolslot::sandbox::{self, Backend, Guard, Sandboxed};

use super::process::kill_group;

/// `textDocument/diagnostic` with only the fields this client sets: lsp-types writes the
/// unset optional ones as `null`, which strict servers (TypeScript's own `tsc --lsp`) refuse.
enum PullDiagnostics {}

/// [`PullDiagnostics`]' parameters.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PullParams {
    text_document: TextDocumentIdentifier,
}

impl Request for PullDiagnostics {
    type Params = PullParams;
    type Result = DocumentDiagnosticReportResult;
    const METHOD: &'static str = DocumentDiagnosticRequest::METHOD;
}

/// What the connection's reader and its users share.
#[derive(Default)]
struct Shared {
    docs: Mutex<Documents>,
    /// The server registered `textDocument/diagnostic` (pull) after `initialize`.
    pull_registered: AtomicBool,
}

impl Shared {
    fn docs(&self) -> MutexGuard<'_, Documents> {
        // Each update of the documents is whole by the time the lock is released.
        self.docs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The reader's state: it records publications and registrations, and wakes the waiters.
struct ReaderState {
    shared: Arc<Shared>,
    changed: watch::Sender<u64>,
    workspace: Vec<WorkspaceFolder>,
    /// Held so the main loop always has a sender (it ends only with the connection).
    _socket: ServerSocket,
}

impl ReaderState {
    fn wake(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// A live connection to one language server.
pub struct LspClient {
    name: String,
    socket: ServerSocket,
    shared: Arc<Shared>,
    changed: watch::Receiver<u64>,
    closed: watch::Receiver<bool>,
    pull_static: bool,
    pid: Option<u32>,
    stderr: Mutex<Option<tokio::process::ChildStderr>>,
    /// Owned so the process is reaped; its group is killed when the client is dropped.
    _child: tokio::process::Child,
    /// What the sandbox needs while the server runs.
    _sandbox: Guard,
}

impl std::fmt::Debug for LspClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LspClient")
            .field("name", &self.name)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl Drop for LspClient {
    fn drop(&mut self) {
        // Servers start helpers of their own (typescript-language-server runs tsserver): the
        // whole group goes, not only the process we started.
        kill_group(self.pid);
    }
}

fn client_capabilities() -> ClientCapabilities {
    ClientCapabilities {
        text_document: Some(TextDocumentClientCapabilities {
            synchronization: Some(TextDocumentSyncClientCapabilities::default()),
            publish_diagnostics: Some(PublishDiagnosticsClientCapabilities {
                // Versions are how a publication is matched to the edit that caused it.
                version_support: Some(true),
                ..PublishDiagnosticsClientCapabilities::default()
            }),
            // Pull is preferred: its answer is the answer to this edit's request. Servers
            // such as pyright offer it only by dynamic registration.
            diagnostic: Some(DiagnosticClientCapabilities {
                dynamic_registration: Some(true),
                related_document_support: Some(false),
            }),
            ..TextDocumentClientCapabilities::default()
        }),
        workspace: Some(WorkspaceClientCapabilities {
            configuration: Some(true),
            workspace_folders: Some(true),
            ..WorkspaceClientCapabilities::default()
        }),
        ..ClientCapabilities::default()
    }
}

/// The requests a server may send us, each answered so that none waits: settings are the
/// server's defaults (`null` per item), progress and registrations are acknowledged.
fn router(state: ReaderState) -> Router<ReaderState> {
    let mut router = Router::new(state);
    router
        .notification::<PublishDiagnostics>(|st, params| {
            st.shared.docs().publish(&params.uri, params.version, params.diagnostics);
            st.wake();
            ControlFlow::Continue(())
        })
        .request::<RegisterCapability, _>(|st, params| {
            if params.registrations.iter().any(|r| r.method == DocumentDiagnosticRequest::METHOD) {
                st.shared.pull_registered.store(true, Ordering::SeqCst);
                st.wake();
            }
            std::future::ready(Ok(()))
        })
        .request::<UnregisterCapability, _>(|_, _| std::future::ready(Ok(())))
        .request::<WorkspaceConfiguration, _>(|_, params| std::future::ready(Ok(vec![serde_json::Value::Null; params.items.len()])))
        .request::<WorkspaceFoldersRequest, _>(|st, _| std::future::ready(Ok(Some(st.workspace.clone()))))
        .request::<WorkDoneProgressCreate, _>(|_, _| std::future::ready(Ok(())))
        .request::<WorkspaceDiagnosticRefresh, _>(|_, _| std::future::ready(Ok(())))
        .request::<ShowMessageRequest, _>(|_, _| std::future::ready(Ok(None)))
        // Logs, progress and server-specific notifications (pyright/beginProgress) say
        // nothing a diagnostics client needs; the default would end the connection.
        .unhandled_notification(|_, _| ControlFlow::Continue(()));
    router
}

/// Starts `cfg`'s server in `workspace`, in the sandbox (see [`sandboxed`]), and completes the
/// `initialize` handshake within `startup`. The server's stderr is handed to the caller
/// ([`LspClient::take_stderr`]), who must keep reading it.
///
/// # Errors
/// A one-line reason: no sandbox works here, the process could not start, or the handshake
/// failed or timed out.
pub async fn connect(cfg: &LspServerConfig, workspace: &Path, shell: &ShellConfig, startup: Duration) -> Result<LspClient, String> {
    let root = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    let root_uri = Url::from_directory_path(&root).map_err(|()| {
        format!(
            "language server `{}`: the workspace {} is not an absolute path",
            cfg.name,
            root.display()
        )
    })?;
    let Sandboxed {
        mut command,
        guard: mut sandbox,
        ..
    } = sandboxed(cfg, &root, shell).map_err(|reason| format!("language server `{}`: {reason}", cfg.name))?;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("language server `{}`: its sandboxed process could not start: {e}", cfg.name))?;
    sandbox.spawned();
    let pid = child.id();
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        kill_group(pid);
        return Err(format!("language server `{}`: its stdio could not be piped", cfg.name));
    };
    let stderr = child.stderr.take();
    let shared = Arc::new(Shared::default());
    let (changed_tx, changed) = watch::channel(0u64);
    let (closed_tx, closed) = watch::channel(false);
    let folder = WorkspaceFolder {
        uri: root_uri.clone(),
        name: root
            .file_name()
            .map_or_else(|| "workspace".to_string(), |n| n.to_string_lossy().into_owned()),
    };
    let reader_shared = Arc::clone(&shared);
    let workspace_folders = vec![folder.clone()];
    let (main_loop, socket) = MainLoop::new_client(move |socket| {
        router(ReaderState {
            shared: reader_shared,
            changed: changed_tx,
            workspace: workspace_folders,
            _socket: socket,
        })
    });
    let name = cfg.name.clone();
    // The connection's reader runs as long as the server's stdout is open.
    tokio::spawn(async move {
        let ended = main_loop.run_buffered(stdout.compat(), stdin.compat_write()).await;
        tracing::debug!(server = %name, ?ended, "language server connection ended");
        let _ = closed_tx.send(true);
    });
    let params = InitializeParams {
        process_id: Some(std::process::id()),
        #[allow(deprecated)]
        root_uri: Some(root_uri),
        capabilities: client_capabilities(),
        workspace_folders: Some(vec![folder]),
        client_info: Some(ClientInfo {
            name: "toolslot".into(),
            version: Some(env!("CARGO_PKG_VERSION").into()),
        }),
        ..InitializeParams::default()
    };
    let failed = |reason: String| {
        kill_group(pid);
        Err(format!("language server `{}`: {reason}", cfg.name))
    };
    let init = match tokio::time::timeout(startup, socket.request::<Initialize>(params)).await {
        Ok(Ok(init)) => init,
        Ok(Err(e)) => return failed(format!("initialize failed: {e}")),
        Err(_) => return failed(format!("did not initialize within {} ms", startup.as_millis())),
    };
    if let Err(e) = socket.notify::<Initialized>(InitializedParams {}) {
        return failed(format!("the connection closed after initialize: {e}"));
    }
    Ok(LspClient {
        name: cfg.name.clone(),
        socket,
        shared,
        changed,
        closed,
        pull_static: init.capabilities.diagnostic_provider.is_some(),
        pid,
        stderr: Mutex::new(stderr),
        _child: child,
        _sandbox: sandbox,
    })
}

/// `cfg`'s server as a sandboxed process in `root`, as hooks and extension programs run: every
/// folder readable and none writable (the workspace included), no network (so no unix socket
/// either), toolslot's processes out of sight, the environment of every program the model
/// drives (`shell.env_core`, less `shell.env_exclude`) plus the server's own `env`.
///
/// The sandbox is not optional here: a language server runs programs the workspace names
/// (basedpyright runs a checkout's `.venv/bin/python` to learn its search paths; other servers
/// load the project's plugins or build scripts), so a session's first edit of a cloned
/// repository would run that repository's code with the user's rights and keys. Without a
/// working sandbox the server is not started.
///
/// No write grant: one would make the workspace writable too, and bubblewrap's private `/tmp`
/// is not needed by the servers this is tested with; a server that wants a cache finds its
/// folders read-only and does without.
///
/// # Errors
/// A one-line reason: no sandbox works, the program is not there, or the sandbox could not be
/// set up.
fn sandboxed(cfg: &LspServerConfig, root: &Path, shell: &ShellConfig) -> Result<Sandboxed, String> {
    let Some((program, args)) = cfg.command.split_first() else {
        return Err("it has no command".into());
    };
    if sandbox::backend(shell.sandbox) == Backend::None {
        return Err("not started: no OS sandbox works here (shell.sandbox)".into());
    }
    let path = program_path(program, cfg.env.get("PATH").map(String::as_str)).map_err(|e| format!("cannot start `{program}`: {e}"))?;
    let path = path
        .to_str()
        .ok_or_else(|| format!("cannot start `{}`: its path is not UTF-8", path.display()))?;
    // A server reads the workspace and its own installation; it has no business writing
    // either, nor reaching the network.
    let secrets = sandbox::secret_paths(shell, root);
    let mut sandboxed = sandbox::command(&sandbox::Request::granted_nothing(path, args, root, shell, &secrets))
        .map_err(|e| format!("its sandbox could not be set up: {e}"))?;
    if sandboxed.backend == Backend::None {
        return Err("not started: no OS sandbox works here (shell.sandbox)".into());
    }
    // The sandbox makes it the leader of its own session and process group (what `kill_group`
    // ends), so no `process_group` here: `setsid` fails in a process that already leads one.
    sandboxed.command.envs(&cfg.env);
    Ok(sandboxed)
}

/// The server's program as an absolute path, checked to be there, so that a missing program
/// reads the same under every backend (bubblewrap would start and then fail to exec it). A
/// path with a slash means what it means for MCP servers: relative to where toolslot was
/// started; a bare name is looked up on `path_var` (the server's own `PATH`) or toolslot's.
fn program_path(program: &str, path_var: Option<&str>) -> std::io::Result<PathBuf> {
    use std::io::{Error, ErrorKind};
    let is_program = |p: &Path| std::fs::metadata(p).map(|m| m.is_file());
    if program.contains('/') {
        let path = match std::env::current_dir() {
            Ok(here) if Path::new(program).is_relative() => here.join(program),
            _ => PathBuf::from(program),
        };
        return if is_program(&path)? {
            Ok(path)
        } else {
            Err(Error::new(ErrorKind::InvalidInput, "not a file"))
        };
    }
    let searched = path_var
        .map(std::ffi::OsString::from)
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_default();
    toolslot::child_env::path_dirs(&searched)
        .into_iter()
        .map(|d| d.join(program))
        .find(|p| is_program(p).unwrap_or(false))
        .ok_or_else(|| Error::new(ErrorKind::NotFound, "not found on PATH"))
}

impl LspClient {
    /// The server process's id.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Whether the connection is gone (the process exited or broke the protocol).
    pub fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }

    /// The server's stderr, once: whoever takes it must keep reading it.
    pub fn take_stderr(&self) -> Option<tokio::process::ChildStderr> {
        self.stderr.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    fn pulls(&self) -> bool {
        self.pull_static || self.shared.pull_registered.load(Ordering::SeqCst)
    }

    /// Tells the server `path` now holds `text` (opening it the first time) and returns the
    /// diagnostics of exactly this version: pulled where the server supports it, else the
    /// publication for this version (one without a version is taken once the server stayed
    /// quiet for `settle`). Waits as long as it takes: the caller bounds it.
    ///
    /// # Errors
    /// A one-line reason: the connection closed, or a later edit of the same file was sent
    /// before an answer came (what arrives now cannot be told apart from the later edit's).
    ///
    /// # Cancel safety
    /// Dropping the future abandons the wait; the document stays in sync and a late answer
    /// is kept only until the next edit of the file, never handed to another caller.
    pub async fn diagnose(&self, path: &Path, language_id: &str, text: String, settle: Duration) -> Result<Vec<Diagnostic>, String> {
        let uri = Url::from_file_path(path).map_err(|()| format!("{} is not an absolute path", path.display()))?;
        let expect = self.sync(&uri, language_id, text)?;
        let mut changed = self.changed.clone();
        let mut closed = self.closed.clone();
        // An unversioned publication for this edit, and when it counts as final.
        let mut candidate: Option<(u64, Vec<Diagnostic>, tokio::time::Instant)> = None;
        loop {
            // A server that offers pull answers this request for the document as it now is
            // (requests are handled in order after the edit): that answer is exact.
            if self.pulls() {
                return self.pull(&uri).await.map_err(|e| format!("its diagnostic request failed: {e}"));
            }
            {
                let docs = self.shared.docs();
                match docs.fresh(&expect) {
                    Some(found) if found.exact => return Ok(found.diagnostics.to_vec()),
                    // A newer publication for this edit restarts the quiet time.
                    Some(found) if candidate.as_ref().is_none_or(|(seq, ..)| *seq != found.seq) => {
                        let until = tokio::time::Instant::now() + settle;
                        candidate = Some((found.seq, found.diagnostics.to_vec(), until));
                    }
                    Some(_) => {}
                    None if docs.superseded(&expect) => {
                        return Err("a later edit of the file was sent before they came".into());
                    }
                    None => {}
                }
            }
            if self.is_closed() {
                return Err("the server's connection closed".into());
            }
            let settled = async {
                match &candidate {
                    Some((.., until)) => tokio::time::sleep_until(*until).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                r = changed.changed() => if r.is_err() { return Err("the server's connection closed".into()) },
                _ = closed.changed() => {}
                () = settled => {
                    if let Some((_, diagnostics, _)) = candidate.take() {
                        return Ok(diagnostics);
                    }
                }
            }
        }
    }

    /// Records the edit and sends it, in that order under one lock, so the order of edits on
    /// the wire is the order [`Documents`] knows.
    fn sync(&self, uri: &Url, language_id: &str, text: String) -> Result<Expect, String> {
        let mut docs = self.shared.docs();
        let (kind, expect) = docs.edit(uri);
        let sent = match kind {
            SyncKind::Open => self.socket.notify::<DidOpenTextDocument>(DidOpenTextDocumentParams {
                text_document: TextDocumentItem::new(uri.clone(), language_id.to_string(), expect.version, text),
            }),
            SyncKind::Change => self.socket.notify::<DidChangeTextDocument>(DidChangeTextDocumentParams {
                text_document: VersionedTextDocumentIdentifier::new(uri.clone(), expect.version),
                // The whole text, which every server accepts whatever sync kind it asked for.
                content_changes: vec![TextDocumentContentChangeEvent {
                    range: None,
                    range_length: None,
                    text,
                }],
            }),
        };
        sent.map_err(|e| format!("the server's connection closed: {e}"))?;
        Ok(expect)
    }

    async fn pull(&self, uri: &Url) -> Result<Vec<Diagnostic>, String> {
        let params = PullParams {
            text_document: TextDocumentIdentifier::new(uri.clone()),
        };
        match self.socket.request::<PullDiagnostics>(params).await {
            Ok(DocumentDiagnosticReportResult::Report(DocumentDiagnosticReport::Full(full))) => {
                Ok(full.full_document_diagnostic_report.items)
            }
            // No previous result id was sent, so "unchanged" and partial answers are not ones
            // a server should give; they carry no list to show.
            Ok(other) => Err(format!("unexpected answer: {other:?}")),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Asks the server to shut down and exit, waiting at most `grace`; the process group is
    /// killed when the client is dropped in any case.
    ///
    /// # Cancel safety
    /// Dropping it skips the polite part; the kill on drop still happens.
    pub async fn shutdown(&self, grace: Duration) {
        if self.is_closed() {
            return;
        }
        if let Ok(Ok(())) = tokio::time::timeout(grace, self.socket.request::<Shutdown>(())).await {
            let _ = self.socket.notify::<Exit>(());
            let mut closed = self.closed.clone();
            let _ = tokio::time::timeout(grace, closed.wait_for(|c| *c)).await;
        }
    }
}
