//! The rmcp connection to one MCP server, over stdio or streamable HTTP.
//!
//! This is the only file that speaks rmcp. Results cross it as JSON (the wire shape), so the
//! rest of the slot does not depend on rmcp's types.

use std::sync::Arc;
use std::time::Duration;

use std::collections::HashMap;
use std::sync::Mutex;

use rmcp::ClientHandler;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, CustomRequest, CustomResult,
    ProgressNotificationParam, ReadResourceRequestParams, RequestId, ServerResult,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, Peer, PeerRequestOptions, RequestHandle, RoleClient, RunningService,
};

use super::stdio::{FrameLimits, UNREADABLE_ANSWER};
use super::{CallHooks, InputSink, ProgressSink};
use serde_json::{Value, json};

use crate::config::McpServerConfig;

/// Handles what the server sends unasked. Server→client requests (sampling, elicitation)
/// are refused by rmcp's defaults and roots are answered empty, so no request is left
/// unanswered (an unanswered one keeps Node servers alive long after stdin closes).
/// Elicitation is answered by the session of the call in flight, when the host can answer.
#[derive(Clone, Default)]
struct Handler {
    on_tools_changed: Option<ToolsChanged>,
    /// Where each running call's progress goes, by progress token.
    progress: Arc<Mutex<HashMap<String, ProgressSink>>>,
    /// Where the server's questions go: the calls in flight that can take one, oldest first.
    inputs: Arc<Mutex<Vec<InputRoute>>>,
    /// Whether to announce elicitation: only when the host can answer.
    elicitation: bool,
    server: String,
}

/// A call in flight that can take its server's questions.
#[derive(Clone)]
struct InputRoute {
    key: u64,
    session: String,
    sink: InputSink,
}

/// Numbers the calls registered for questions, per process.
static INPUT_KEYS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each change under these locks is one insert or removal: a poisoned lock holds whole data.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ClientHandler for Handler {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        // What `initialize` offers when the server is not a newest-revision one (see
        // `lifecycle`): the newest revision with that handshake; a server may answer an older
        // one, which rmcp accepts.
        let mut capabilities = rmcp::model::ClientCapabilities::default();
        if self.elicitation {
            // Forms only: answers are checked against the requested schema before they go.
            capabilities.elicitation = Some(
                rmcp::model::ElicitationCapability::default()
                    .with_form(rmcp::model::FormElicitationCapability::new().with_schema_validation(true)),
            );
        }
        rmcp::model::ClientConfig::new(
            capabilities,
            rmcp::model::Implementation::new("toolslot", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
        let decline = Ok(ElicitResult::new(ElicitationAction::Decline));
        let ElicitRequestParams::FormElicitationParams {
            message, requested_schema, ..
        } = request
        else {
            // URL elicitation is not announced.
            return decline;
        };
        // The protocol does not say which call a question belongs to. It goes to the calls in
        // flight at this server when they all belong to one session (the oldest's index);
        // with calls of several sessions in flight it could reach the wrong user, so it is
        // declined.
        let routes = lock(&self.inputs).clone();
        let Some(first) = routes.first() else {
            return decline;
        };
        if routes.iter().any(|r| r.session != first.session) {
            tracing::warn!(server = %self.server, "elicitation declined: calls of several sessions are in flight");
            return decline;
        }
        let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
        let answer = (first.sink)(crate::tool::InputRequest {
            server: self.server.clone(),
            message,
            schema,
        })
        .await;
        Ok(elicit_result(answer))
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

/// How a connection negotiates its protocol revision: the newest revisions rmcp knows (those
/// without an `initialize` handshake) are offered first through `server/discover`; a server
/// that answers it with an error is an older one, and is then initialized with the newest
/// revision that has the handshake, falling back to whatever older revision it answers.
fn lifecycle() -> ClientLifecycleMode {
    use rmcp::model::ProtocolVersion;
    let mut newest: Vec<ProtocolVersion> = ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .filter(|v| !v.has_initialize())
        .cloned()
        .collect();
    newest.reverse();
    ClientLifecycleMode::Auto {
        preferred_versions: newest,
        legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
    }
}

/// Told when the server says its tool list changed (`notifications/tools/list_changed`); it
/// should list the tools again. Called on the connection's task: it must not block.
pub type ToolsChanged = Arc<dyn Fn() + Send + Sync>;

/// A `tools/call` request sent and not yet answered.
pub struct PendingCall {
    handle: RequestHandle<RoleClient>,
    _hooks: Registered,
    /// What a retry needs when the server answers "input required" (the newest revisions'
    /// multi round-trip requests): the request, this call's own question sink, and the
    /// request id now in flight (which a canceller reads).
    params: CallToolRequestParams,
    ask: Option<InputSink>,
    server: String,
    current: Arc<Mutex<RequestId>>,
}

/// How many "input required" rounds one call may take: a server that keeps asking is stopped.
const MAX_INPUT_ROUNDS: usize = 10;

/// A call's hooks, registered with its connection until the call ends (answered, timed out or
/// dropped): progress and questions for a call nobody waits for go nowhere.
struct Registered {
    progress_key: String,
    progress: Arc<Mutex<HashMap<String, ProgressSink>>>,
    input_key: u64,
    inputs: Arc<Mutex<Vec<InputRoute>>>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        lock(&self.progress).remove(&self.progress_key);
        lock(&self.inputs).retain(|r| r.key != self.input_key);
    }
}

/// Sends a server the cancellation of one request (what to do when its caller goes away).
pub struct Canceller {
    peer: Peer<RoleClient>,
    id: Arc<Mutex<RequestId>>,
}

impl Canceller {
    /// Sends `notifications/cancelled` for the request.
    ///
    /// # Cancel safety
    /// Dropping it may not send the notification.
    pub async fn cancel(self, reason: &str) {
        let id = lock(&self.id).clone();
        let params = CancelledNotificationParam::new(Some(id), Some(reason.to_string()));
        let _ = self.peer.notify_cancelled(params).await;
    }
}

impl PendingCall {
    /// What cancels this request at the server.
    pub fn canceller(&self) -> Canceller {
        Canceller {
            peer: self.handle.peer.clone(),
            id: Arc::clone(&self.current),
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
        let PendingCall {
            mut handle,
            _hooks,
            mut params,
            ask,
            server,
            current,
        } = self;
        let deadline = tokio::time::Instant::now() + timeout;
        let peer = handle.peer.clone();
        for _ in 0..=MAX_INPUT_ROUNDS {
            let answer = tokio::time::timeout_at(deadline, handle.await_response()).await;
            match answer.map_err(|_| RequestFailure::Timeout)?.map_err(failure)? {
                ServerResult::CallToolResult(r) => {
                    return serde_json::to_value(r).map_err(|e| RequestFailure::Rpc(format!("unreadable result: {e}")));
                }
                // The newest revisions ask for input by answering with the questions; the
                // call is sent again with the answers (and the server's state) until it ends.
                ServerResult::InputRequiredResult(required) => {
                    let answers = answer_rounds(&server, ask.as_ref(), required.input_requests.unwrap_or_default()).await?;
                    params.input_responses = (!answers.is_empty()).then_some(answers);
                    params.request_state = required.request_state;
                    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
                    handle = peer
                        .send_request_with_option(request, PeerRequestOptions::no_options())
                        .await
                        .map_err(failure)?;
                    *lock(&current) = handle.id.clone();
                }
                // Not quoted: what a server sends in place of a result is not ours to repeat.
                _ => return Err(RequestFailure::Unreadable("its answer to tools/call is not a tool result".into())),
            }
        }
        Err(RequestFailure::Rpc(format!(
            "the server asked for input more than {MAX_INPUT_ROUNDS} times without finishing the call"
        )))
    }
}

/// Answers the questions of an "input required" round: elicitations go to this call's own
/// session (declined where there is none), roots are answered empty; a request for sampling,
/// which this client does not offer, ends the call.
async fn answer_rounds(
    server: &str,
    ask: Option<&InputSink>,
    requests: rmcp::model::InputRequests,
) -> Result<rmcp::model::InputResponses, RequestFailure> {
    use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, InputRequest};
    let mut answers = rmcp::model::InputResponses::new();
    for (key, request) in requests {
        let answer = match request {
            InputRequest::Elicitation(request) => {
                let result = match (request.params, ask) {
                    (
                        ElicitRequestParams::FormElicitationParams {
                            message, requested_schema, ..
                        },
                        Some(ask),
                    ) => {
                        let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
                        let answer = ask(crate::tool::InputRequest {
                            server: server.to_string(),
                            message,
                            schema,
                        })
                        .await;
                        elicit_result(answer)
                    }
                    _ => ElicitResult::new(ElicitationAction::Decline),
                };
                serde_json::to_value(result).unwrap_or(Value::Null)
            }
            InputRequest::ListRoots(_) => serde_json::json!({"roots": []}),
            _ => {
                return Err(RequestFailure::Rpc(format!(
                    "the server asked for `{key}`, a kind of input toolslot does not give (sampling)"
                )));
            }
        };
        answers.insert(key, answer);
    }
    Ok(answers)
}

/// An answer as MCP's elicitation result.
fn elicit_result(answer: crate::tool::InputAnswer) -> rmcp::model::ElicitResult {
    use rmcp::model::{ElicitResult, ElicitationAction};
    match answer {
        crate::tool::InputAnswer::Accept(content) => {
            let mut result = ElicitResult::new(ElicitationAction::Accept);
            result.content = Some(content);
            result
        }
        crate::tool::InputAnswer::Decline => ElicitResult::new(ElicitationAction::Decline),
        crate::tool::InputAnswer::Cancel => ElicitResult::new(ElicitationAction::Cancel),
    }
}

/// A server's tool-list changes on the newest revisions (a `subscriptions/listen` stream).
pub struct ToolChanges(rmcp::service::Subscription);

impl ToolChanges {
    /// Waits for the next change; `false` once the stream has ended (the server went away).
    ///
    /// # Cancel safety
    /// Dropping it may lose a notification in flight; the next listing sees the change.
    pub async fn next(&mut self) -> bool {
        loop {
            match self.0.next().await {
                Ok(Some(rmcp::model::ServerNotification::ToolListChangedNotification(_))) => return true,
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => return false,
            }
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
    inputs: Arc<Mutex<Vec<InputRoute>>>,
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
    /// Announce elicitation (the host can put a server's questions to a user and answer
    /// them); without it, servers are told nothing and their questions declined.
    pub elicitation: bool,
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
            elicitation: false,
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
    let started = tokio::time::Instant::now();
    let startup = options.startup;
    let retry = ConnectOptions {
        on_tools_changed: options.on_tools_changed.clone(),
        ..options
    };
    match open_with(cfg, options, lifecycle()).await {
        Ok(client) => Ok(client),
        // A server that fails the newest revisions' discovery in a way rmcp cannot read as
        // "older server" (answering it with an empty result, closing the stream) is reached
        // again, on a fresh connection, with the `initialize` handshake alone.
        Err(first) => {
            let left = startup.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(first);
            }
            tracing::debug!(server = %cfg.name, reason = %first, "discovery failed; connecting again with initialize");
            let retry = ConnectOptions { startup: left, ..retry };
            open_with(cfg, retry, ClientLifecycleMode::Initialize).await
        }
    }
}

/// One connection attempt with `lifecycle`.
async fn open_with(cfg: &McpServerConfig, options: ConnectOptions, lifecycle: ClientLifecycleMode) -> Result<McpClient, String> {
    let ConnectOptions {
        startup,
        max_redirects,
        stderr_tail_bytes,
        on_tools_changed,
        limits,
        max_tools,
        elicitation,
    } = options;
    let handler = Handler {
        on_tools_changed,
        elicitation,
        server: cfg.name.clone(),
        ..Handler::default()
    };
    let progress = Arc::clone(&handler.progress);
    let inputs = Arc::clone(&handler.inputs);
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
        let service = match tokio::time::timeout(startup, handler.serve_with_lifecycle(transport, lifecycle.clone())).await {
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
            inputs,
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
    let failed = match tokio::time::timeout(startup, handler.serve_with_lifecycle(transport, lifecycle.clone())).await {
        Ok(Ok(service)) => {
            return Ok(McpClient {
                server: cfg.name.clone(),
                service,
                progress,
                inputs,
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

    /// Where the server says its tool list changed, on the newest revisions (which send such
    /// notifications only on a `subscriptions/listen` stream): opened when the server offers
    /// `tools.listChanged`. `None` on older revisions, whose notifications reach
    /// [`ConnectOptions::on_tools_changed`], or when the server offers none.
    pub async fn tool_changes(&self) -> Option<ToolChanges> {
        let info = self.service.peer_info()?;
        if info.protocol_version.has_initialize() {
            return None;
        }
        let offered = info.capabilities.tools.as_ref().and_then(|t| t.list_changed).unwrap_or(false);
        if !offered {
            return None;
        }
        let mut filter = rmcp::model::SubscriptionFilter::new();
        filter.tools_list_changed = Some(true);
        match self.service.peer().listen(filter).await {
            Ok(subscription) => Some(ToolChanges(subscription)),
            Err(e) => {
                tracing::warn!(server = %self.server, error = %e, "subscribing to tool list changes failed");
                None
            }
        }
    }

    /// The protocol revision the server and this client agreed on.
    pub fn protocol_version(&self) -> Option<String> {
        self.service.peer_info().map(|info| info.protocol_version.to_string())
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

    /// Sends a `tools/call` whose progress notifications and questions go to `hooks`. The
    /// caller finishes it with [`PendingCall::finish`] and cancels it with
    /// [`PendingCall::canceller`] if it gives up.
    ///
    /// # Errors
    /// [`RequestFailure`] when the request cannot be sent.
    pub async fn start_call(&self, tool: &str, args: Value, hooks: CallHooks) -> Result<PendingCall, RequestFailure> {
        let CallHooks { progress, input } = hooks;
        // A server may ask its question the moment it reads the call: the route is in place
        // before the request goes.
        let input_key = INPUT_KEYS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let ask = input.as_ref().map(|(_, sink)| Arc::clone(sink));
        if let Some((session, sink)) = input {
            lock(&self.inputs).push(InputRoute {
                key: input_key,
                session,
                sink,
            });
        }
        let mut registered = Registered {
            progress_key: String::new(),
            progress: Arc::clone(&self.progress),
            input_key,
            inputs: Arc::clone(&self.inputs),
        };
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = args.as_object().cloned();
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
        let handle = self
            .service
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
            .map_err(failure)?;
        registered.progress_key = serde_json::to_string(&handle.progress_token).unwrap_or_default();
        if let Some(sink) = progress {
            lock(&self.progress).insert(registered.progress_key.clone(), sink);
        }
        let current = Arc::new(Mutex::new(handle.id.clone()));
        Ok(PendingCall {
            handle,
            _hooks: registered,
            params,
            ask,
            server: self.server.clone(),
            current,
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
