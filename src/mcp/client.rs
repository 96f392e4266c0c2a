//! The rmcp connection to one MCP server, over stdio or streamable HTTP.
//!
//! This is the only file that speaks rmcp. Results cross it as JSON (the wire shape), so the
//! rest of the slot does not depend on rmcp's types.

use std::sync::Arc;
use std::time::Duration;

use std::collections::HashMap;
use std::sync::Mutex;

use rmcp::ClientHandler;
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, CustomRequest, CustomResult,
    ProgressNotificationParam, ReadResourceRequestParams, RequestId, ServerResult,
};
use rmcp::service::{NotificationContext, Peer, PeerRequestOptions, RequestHandle, RoleClient, RunningService};

use super::ProgressSink;
use super::stdio::{FrameLimits, UNREADABLE_ANSWER};
use serde_json::{Value, json};

use crate::config::McpServerConfig;

/// Handles what the server sends unasked. Server→client requests (sampling, elicitation)
/// are refused by rmcp's defaults and roots are answered empty, so no request is left
/// unanswered (an unanswered one keeps Node servers alive long after stdin closes).
#[derive(Clone, Default)]
struct Handler {
    on_tools_changed: Option<ToolsChanged>,
    /// Where each running call's progress goes, by progress token.
    progress: Arc<Mutex<HashMap<String, ProgressSink>>>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        // rmcp offers its newest revision, which no released server speaks and the MCP
        // conformance suite rejects; the newest one with an `initialize` handshake is what
        // servers answer (and they may answer an older one, which rmcp accepts).
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::default(),
            rmcp::model::Implementation::new("toolslot", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(hook) = &self.on_tools_changed {
            hook();
        }
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        let key = serde_json::to_string(&params.progress_token).unwrap_or_default();
        let sink = self.progress.lock().unwrap_or_else(|p| p.into_inner()).get(&key).cloned();
        // Progress for a call nobody waits for any more (cancelled, timed out) is dropped.
        if let Some(sink) = sink {
            sink(params.progress, params.total, params.message);
        }
    }
}

/// Told when the server says its tool list changed (`notifications/tools/list_changed`); it
/// should list the tools again. Called on the connection's task: it must not block.
pub type ToolsChanged = Arc<dyn Fn() + Send + Sync>;

/// A `tools/call` request sent and not yet answered.
pub struct PendingCall {
    handle: RequestHandle<RoleClient>,
    key: String,
    progress: Arc<Mutex<HashMap<String, ProgressSink>>>,
}

/// Sends a server the cancellation of one request (what to do when its caller goes away).
pub struct Canceller {
    peer: Peer<RoleClient>,
    id: RequestId,
}

impl Canceller {
    /// Sends `notifications/cancelled` for the request.
    ///
    /// # Cancel safety
    /// Dropping it may not send the notification.
    pub async fn cancel(self, reason: &str) {
        let params = CancelledNotificationParam::new(Some(self.id), Some(reason.to_string()));
        let _ = self.peer.notify_cancelled(params).await;
    }
}

impl PendingCall {
    /// What cancels this request at the server.
    pub fn canceller(&self) -> Canceller {
        Canceller {
            peer: self.handle.peer.clone(),
            id: self.handle.id.clone(),
        }
    }

    /// Waits for the answer, at most `timeout`; the result as JSON.
    ///
    /// # Errors
    /// [`RequestFailure`]; on a timeout the caller should cancel the request.
    ///
    /// # Cancel safety
    /// Dropping it leaves the request running at the server: cancel it with [`PendingCall::canceller`].
    pub async fn finish(self, timeout: Duration) -> Result<Value, RequestFailure> {
        let PendingCall { handle, key, progress } = self;
        let answer = tokio::time::timeout(timeout, handle.await_response()).await;
        progress.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
        match answer.map_err(|_| RequestFailure::Timeout)?.map_err(failure)? {
            ServerResult::CallToolResult(r) => serde_json::to_value(r).map_err(|e| RequestFailure::Rpc(format!("unreadable result: {e}"))),
            // Not quoted: what a server sends in place of a result is not ours to repeat.
            _ => Err(RequestFailure::Unreadable("its answer to tools/call is not a tool result".into())),
        }
    }
}

/// Why a request to a server failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestFailure {
    /// The connection is gone (the process died or closed its pipes).
    Closed(String),
    /// No answer in time; the request was cancelled at the server.
    Timeout,
    /// A JSON-RPC error answer.
    Rpc(String),
    /// An answer toolslot would not read (over `mcp.max_message_bytes`, or not the shape of
    /// an answer): the request was ended at once.
    Unreadable(String),
}

/// A live connection to one server.
pub struct McpClient {
    server: String,
    service: RunningService<RoleClient, Handler>,
    progress: Arc<Mutex<HashMap<String, ProgressSink>>>,
    pid: Option<u32>,
    stderr: Mutex<Option<tokio::process::ChildStderr>>,
    /// The most tools one listing may hold.
    max_tools: usize,
    /// Set once a stdio server's process is stopped and reaped.
    stopped: Option<tokio::sync::watch::Receiver<bool>>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("server", &self.server)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

/// How to connect to a server.
pub struct ConnectOptions {
    /// Start-up (spawn and `initialize`) timeout.
    pub startup: Duration,
    /// Redirects followed at most (streamable HTTP).
    pub max_redirects: usize,
    /// How much of a stdio server's stderr a failed start quotes (bytes, from the end).
    pub stderr_tail_bytes: usize,
    /// Told when the server's tool list changes.
    pub on_tools_changed: Option<ToolsChanged>,
    /// The bounds of a stdio server's messages, and how long stopping it waits.
    pub limits: FrameLimits,
    /// The most tools one listing may hold (pages stop there).
    pub max_tools: usize,
}

impl ConnectOptions {
    /// The options `[mcp]` gives a server started within `startup`.
    pub fn of(mcp: &crate::config::McpConfig, startup: Duration, on_tools_changed: Option<ToolsChanged>) -> Self {
        Self {
            startup,
            max_redirects: mcp.http_max_redirects,
            stderr_tail_bytes: mcp.stderr_tail_bytes,
            on_tools_changed,
            limits: FrameLimits {
                max_message_bytes: mcp.max_message_bytes,
                max_json_depth: mcp.max_json_depth,
                shutdown_grace: Duration::from_millis(mcp.shutdown_grace_ms),
            },
            max_tools: mcp.max_tools_per_server,
        }
    }
}

/// Starts the server's process (or reaches its streamable HTTP endpoint) and completes the
/// `initialize` handshake; `on_tools_changed` hears of later changes to its tool list. A
/// stdio server's stderr is quoted in the error when it fails to start, and handed to the
/// caller otherwise ([`McpClient::take_stderr`]), who must keep reading it.
///
/// # Errors
/// A one-line reason: no command or URL, a URL that is not http(s), a bad `ca_cert`, the
/// process failing to start, or the handshake failing (a certificate the server's name does
/// not match, an untrusted issuer) or timing out.
pub async fn connect(cfg: &McpServerConfig, options: ConnectOptions) -> Result<McpClient, String> {
    let ConnectOptions {
        startup,
        max_redirects,
        stderr_tail_bytes,
        on_tools_changed,
        limits,
        max_tools,
    } = options;
    let handler = Handler {
        on_tools_changed,
        ..Handler::default()
    };
    let progress = Arc::clone(&handler.progress);
    if let Some(url) = &cfg.url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "server `{}`: a streamable HTTP server's url must start with http:// or https://, not `{url}`",
                cfg.name
            ));
        }
        let client = super::http::client_for(cfg, max_redirects)?;
        let mut config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url.as_str())
            .custom_headers(super::http::headers_for(cfg)?);
        if let Some(token) = super::http::bearer_token(cfg)? {
            config = config.auth_header(token);
        }
        let transport = rmcp::transport::StreamableHttpClientTransport::with_client(client.clone(), config);
        let service = match tokio::time::timeout(startup, handler.serve(transport)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                // rmcp's error keeps only the outer text of the HTTP failure; one plain
                // request with the same client recovers the cause (an untrusted certificate,
                // a refused connection).
                let cause = match tokio::time::timeout(startup, client.get(url.as_str()).send()).await {
                    Ok(Err(http)) => format!(" ({})", with_causes(&http)),
                    Ok(Ok(answer)) if matches!(answer.status().as_u16(), 401 | 403) => format!(
                        " (the server answers {} without the right credentials: see bearer_token_env and headers)",
                        answer.status()
                    ),
                    _ => String::new(),
                };
                return Err(format!(
                    "server `{}` at {url}: initialize failed: {}{cause}",
                    cfg.name,
                    with_causes(&e)
                ));
            }
            Err(_) => {
                return Err(format!(
                    "server `{}` at {url} did not initialize within {} ms",
                    cfg.name,
                    startup.as_millis()
                ));
            }
        };
        return Ok(McpClient {
            server: cfg.name.clone(),
            service,
            progress,
            pid: None,
            stderr: Mutex::new(None),
            max_tools,
            stopped: None,
        });
    }
    let Some((program, args)) = cfg.command.split_first() else {
        return Err(format!("server `{}` has no command and no url", cfg.name));
    };
    // Servers log on stderr; it is not part of the protocol, but it is what says why a server
    // would not start.
    let (transport, stderr) = super::stdio::spawn(&cfg.name, program, args, &cfg.env, limits)
        .map_err(|e| format!("server `{}`: cannot start `{program}`: {e}", cfg.name))?;
    let pid = transport.id();
    let stopped = transport.stopped();
    let failed = match tokio::time::timeout(startup, handler.serve(transport)).await {
        Ok(Ok(service)) => {
            return Ok(McpClient {
                server: cfg.name.clone(),
                service,
                progress,
                pid,
                stderr: Mutex::new(stderr),
                max_tools,
                stopped: Some(stopped),
            });
        }
        Ok(Err(e)) => format!("server `{}`: initialize failed: {e}", cfg.name),
        Err(_) => format!("server `{}` did not initialize within {} ms", cfg.name, startup.as_millis()),
    };
    let said = match stderr {
        Some(s) => stderr_tail(s, stderr_tail_bytes).await,
        None => String::new(),
    };
    Err(if said.is_empty() {
        failed
    } else {
        format!("{failed}; its stderr ends: {said}")
    })
}

/// The end of what a failed server wrote on stderr, on one line: read until it closes (a
/// server that died), or briefly (one that hangs: what it said so far is in the pipe). Only
/// the end is kept while reading, however much it writes.
async fn stderr_tail(mut stderr: tokio::process::ChildStderr, max: usize) -> String {
    use tokio::io::AsyncReadExt;
    let mut tail = crate::output::Tail::new(max.max(1));
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_millis(300);
    while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, stderr.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        tail.push(&buf[..n], |_| {});
    }
    one_line(&tail.text(), max)
}

/// `text`'s non-empty lines joined with ` | `, its last `max` bytes.
pub fn one_line(text: &str, max: usize) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let joined = lines.join(" | ");
    let cut = joined.len().saturating_sub(max);
    let start = (cut..=joined.len()).find(|i| joined.is_char_boundary(*i)).unwrap_or(joined.len());
    let tail = &joined[start..];
    if start > 0 { format!("…{tail}") } else { tail.to_string() }
}

/// An error and its causes on one line: the TLS or connection reason of an HTTP failure sits
/// several sources deep, and "error sending request" alone does not say what to fix.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

fn failure(e: rmcp::service::ServiceError) -> RequestFailure {
    use rmcp::service::ServiceError as E;
    match e {
        // Written by our transport, not by the server.
        E::McpError(err) if err.code.0 == UNREADABLE_ANSWER => RequestFailure::Unreadable(err.message.to_string()),
        E::McpError(err) => RequestFailure::Rpc(err.message.to_string()),
        E::Timeout { .. } => RequestFailure::Timeout,
        other => RequestFailure::Closed(other.to_string()),
    }
}

impl McpClient {
    /// The server's name.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The server process's id, if it is a process.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The server process's stderr, once: whoever takes it must keep reading it (a server
    /// whose stderr pipe fills up stops).
    pub fn take_stderr(&self) -> Option<tokio::process::ChildStderr> {
        self.stderr.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Whether the connection is gone.
    pub fn is_closed(&self) -> bool {
        self.service.is_transport_closed() || self.service.is_closed()
    }

    /// Every tool the server offers, each as the JSON its listing holds, unchecked (every
    /// page, up to `mcp.max_tools_per_server` and a cursor seen twice): each is admitted on its
    /// own ([`super::tool_from_entry`]), so one malformed entry costs one tool.
    ///
    /// # Errors
    /// [`RequestFailure`]; an answer without a `tools` array is [`RequestFailure::Unreadable`].
    pub async fn list_tools(&self) -> Result<Vec<Value>, RequestFailure> {
        let mut tools = Vec::new();
        let mut cursors = std::collections::HashSet::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = cursor.as_ref().map(|c| json!({"cursor": c}));
            let request = ClientRequest::CustomRequest(CustomRequest::new("tools/list", params));
            let answer = match self.service.send_request(request).await.map_err(failure)? {
                ServerResult::CustomResult(CustomResult(raw)) => raw,
                // A transport that parses answers itself (streamable HTTP) hands a well-formed
                // listing over typed.
                typed => serde_json::to_value(typed).map_err(|e| RequestFailure::Unreadable(e.to_string()))?,
            };
            let Some(page) = answer.get("tools").and_then(Value::as_array) else {
                return Err(RequestFailure::Unreadable("its answer to tools/list holds no `tools` list".into()));
            };
            tools.extend(page.iter().cloned());
            cursor = answer.get("nextCursor").and_then(Value::as_str).map(str::to_string);
            match &cursor {
                Some(c) if tools.len() <= self.max_tools && cursors.insert(c.clone()) => {}
                _ => break,
            }
        }
        Ok(tools)
    }

    /// Calls `tool`; the `tools/call` result as JSON. Dropping the future (a timeout, a
    /// cancelled round) sends the server a cancellation for the request.
    ///
    /// # Errors
    /// [`RequestFailure`].
    pub async fn call(&self, tool: &str, args: Value, timeout: Duration) -> Result<Value, RequestFailure> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = args.as_object().cloned();
        let call = self.service.call_tool(params);
        let result = tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| RequestFailure::Timeout)?
            .map_err(failure)?;
        serde_json::to_value(result).map_err(|e| RequestFailure::Rpc(format!("unreadable result: {e}")))
    }

    /// Sends a `tools/call` whose progress notifications go to `sink`. The caller finishes it
    /// with [`PendingCall::finish`] and cancels it with [`PendingCall::canceller`] if it gives up.
    ///
    /// # Errors
    /// [`RequestFailure`] when the request cannot be sent.
    pub async fn start_call(&self, tool: &str, args: Value, sink: Option<ProgressSink>) -> Result<PendingCall, RequestFailure> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = args.as_object().cloned();
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = self
            .service
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
            .map_err(failure)?;
        let key = serde_json::to_string(&handle.progress_token).unwrap_or_default();
        if let Some(sink) = sink {
            self.progress.lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone(), sink);
        }
        Ok(PendingCall {
            handle,
            key,
            progress: Arc::clone(&self.progress),
        })
    }

    /// `resources/list` as JSON.
    ///
    /// # Errors
    /// [`RequestFailure`].
    pub async fn list_resources(&self) -> Result<Value, RequestFailure> {
        let r = self.service.list_resources(None).await.map_err(failure)?;
        serde_json::to_value(r).map_err(|e| RequestFailure::Rpc(e.to_string()))
    }

    /// `resources/read` as JSON.
    ///
    /// # Errors
    /// [`RequestFailure`].
    pub async fn read_resource(&self, uri: &str) -> Result<Value, RequestFailure> {
        let mut params = ReadResourceRequestParams::new(uri.to_string());
        params.meta = None;
        let r = self.service.read_resource(params).await.map_err(failure)?;
        serde_json::to_value(r).map_err(|e| RequestFailure::Rpc(e.to_string()))
    }

    /// Closes the connection; the server's process is stopped (stdin closed, then signals).
    pub async fn shutdown(self) {
        let _ = self.service.cancel().await;
    }

    /// Closes a shared connection and waits until the server's process is stopped and
    /// reaped (stdin closed, then SIGTERM, then SIGKILL to its group; see
    /// [`super::stdio`]).
    pub async fn close(&self) {
        self.service.cancellation_token().cancel();
        if let Some(mut stopped) = self.stopped.clone() {
            let _ = stopped.wait_for(|s| *s).await;
        }
    }
}
