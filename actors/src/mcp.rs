//! MCP servers as supervised actors, and their tools in the registry.
//!
//! Each configured server is one [`McpServerActor`] under a supervisor. It owns the
//! connection and its lifecycle: Starting, Ready, Failed. A call to a dead server restarts it
//! (after a backoff that doubles with each failed start), and calls that arrive meanwhile
//! share that one reconnect. A call in flight when the server dies is never replayed blindly:
//! read-only tools are retried once, others get an error saying the outcome is unknown.
//! While a server is down its tools answer "unavailable"; the catalog keeps its shape.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use serde_json::Value;
use toolslot::config::{Config, McpServerConfig};
use toolslot::mcp::ProgressSink;
use toolslot::mcp::client::{McpClient, RequestFailure, connect};
use toolslot::mcp::{
    ListMcpResources, McpCallError, McpCaller, McpTool, McpToolDef, ReadMcpResource, ResourceSource, capabilities_for, tool_name,
};
use toolslot::notice::{Notice, NoticeKind};
use toolslot::tool::ToolSpec;

/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "state", content = "reason", rename_all = "snake_case")]
pub enum ServerState {
    /// Starting (or restarting).
    Starting,
    /// Connected.
    Ready,
    /// Not running; the reason.
    Failed(String),
}

type Connecting = Shared<BoxFuture<'static, Result<Arc<McpClient>, String>>>;

/// One server's supervisor-held state.
pub struct McpServerActor {
    cfg: McpServerConfig,
    startup: Duration,
    backoff: Duration,
    backoff_max: Duration,
    client: Option<Arc<McpClient>>,
    connecting: Option<Connecting>,
    state: ServerState,
    failures: u32,
    not_before: Option<Instant>,
}

impl McpServerActor {
    fn new(cfg: McpServerConfig, global: &Config) -> Self {
        let m = &global.mcp;
        Self {
            startup: Duration::from_millis(cfg.startup_timeout_ms.unwrap_or(m.startup_timeout_ms)),
            backoff: Duration::from_millis(m.restart_backoff_ms),
            backoff_max: Duration::from_millis(m.restart_backoff_max_ms),
            cfg,
            client: None,
            connecting: None,
            state: ServerState::Starting,
            failures: 0,
            not_before: None,
        }
    }

    fn mark_dead(&mut self, reason: String) {
        if let Some(c) = self.client.take() {
            tracing::warn!(server = %self.cfg.name, pid = ?c.pid(), %reason, "MCP server stopped");
        }
        self.state = ServerState::Failed(reason);
    }
}

impl Actor for McpServerActor {
    type Context = Context<Self>;
}

impl Supervised for McpServerActor {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        // The actor failed, not necessarily the server; a fresh connection is made on the
        // next call.
        self.client = None;
        self.connecting = None;
        self.state = ServerState::Starting;
        tracing::warn!(server = %self.cfg.name, "MCP server actor restarted");
    }
}

/// A live connection, starting the server if it is not running.
#[derive(Message)]
#[rtype(result = "Result<Arc<McpClient>, McpCallError>")]
pub struct GetClient;

/// The connection failed; forget it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ReportDead(pub String);

/// The server's state.
#[derive(Message)]
#[rtype(result = "ServerState")]
pub struct Status;

impl Handler<GetClient> for McpServerActor {
    type Result = ResponseActFuture<Self, Result<Arc<McpClient>, McpCallError>>;

    fn handle(&mut self, _msg: GetClient, _ctx: &mut Context<Self>) -> Self::Result {
        if let Some(c) = &self.client {
            if !c.is_closed() {
                return Box::pin(fut::ready(Ok(Arc::clone(c))));
            }
            self.mark_dead("its connection closed".into());
        }
        let server = self.cfg.name.clone();
        if let Some(t) = self.not_before
            && Instant::now() < t
        {
            let reason = match &self.state {
                ServerState::Failed(r) => format!(
                    "{r}; next restart in {} ms",
                    t.saturating_duration_since(Instant::now()).as_millis()
                ),
                _ => "restarting".into(),
            };
            return Box::pin(fut::ready(Err(McpCallError::Unavailable { server, reason })));
        }
        // Calls that arrive while the server starts share the one start.
        let connecting = self.connecting.get_or_insert_with(|| {
            let cfg = self.cfg.clone();
            let startup = self.startup;
            async move { connect(&cfg, startup).await.map(Arc::new) }.boxed().shared()
        });
        self.state = ServerState::Starting;
        let waiting = connecting.clone();
        Box::pin(waiting.into_actor(self).map(move |result, act, _ctx| {
            act.connecting = None;
            match result {
                Ok(client) => {
                    tracing::info!(server = %act.cfg.name, pid = ?client.pid(), "MCP server ready");
                    act.client = Some(Arc::clone(&client));
                    act.state = ServerState::Ready;
                    act.failures = 0;
                    act.not_before = None;
                    Ok(client)
                }
                Err(reason) => {
                    act.failures += 1;
                    let delay = act
                        .backoff
                        .saturating_mul(1 << act.failures.min(16).saturating_sub(1))
                        .min(act.backoff_max);
                    act.not_before = Some(Instant::now() + delay);
                    act.state = ServerState::Failed(reason.clone());
                    Err(McpCallError::Unavailable { server, reason })
                }
            }
        }))
    }
}

impl Handler<ReportDead> for McpServerActor {
    type Result = ();
    fn handle(&mut self, msg: ReportDead, _ctx: &mut Context<Self>) {
        self.mark_dead(msg.0);
    }
}

impl Handler<Status> for McpServerActor {
    type Result = MessageResult<Status>;
    fn handle(&mut self, _msg: Status, _ctx: &mut Context<Self>) -> Self::Result {
        MessageResult(self.state.clone())
    }
}

/// A server's handle, as its tools see it.
#[derive(Clone)]
pub struct McpServerHandle {
    server: String,
    addr: Addr<McpServerActor>,
    call_timeout: Duration,
}

impl McpServerHandle {
    /// The server's state.
    ///
    /// # Cancel safety
    /// Safe: it only asks.
    pub async fn status(&self) -> ServerState {
        self.addr
            .send(Status)
            .await
            .unwrap_or_else(|_| ServerState::Failed("supervisor gone".into()))
    }

    /// The current connection's process id (tests kill it to test restarts).
    ///
    /// # Cancel safety
    /// Safe: it only asks.
    pub async fn pid(&self) -> Option<u32> {
        self.client().await.ok().and_then(|c| c.pid())
    }

    async fn client(&self) -> Result<Arc<McpClient>, McpCallError> {
        self.addr.send(GetClient).await.unwrap_or_else(|_| {
            Err(McpCallError::Unavailable {
                server: self.server.clone(),
                reason: "its supervisor is gone".into(),
            })
        })
    }
}

impl McpCaller for McpServerHandle {
    fn server(&self) -> &str {
        &self.server
    }

    fn call<'a>(
        &'a self,
        tool: &'a str,
        args: Value,
        read_only: bool,
        progress: Option<ProgressSink>,
    ) -> BoxFuture<'a, Result<Value, McpCallError>> {
        Box::pin(async move {
            // A read-only call may be retried once on a fresh connection; anything else could
            // have acted already, so it is not sent twice.
            let attempts = if read_only { 2 } else { 1 };
            let mut last = String::new();
            for _ in 0..attempts {
                let client = self.client().await?;
                let answer = match client.start_call(tool, args.clone(), progress.clone()).await {
                    Ok(pending) => {
                        // If this future is dropped (the round was cancelled, the call timed
                        // out above us), the server is told to stop.
                        let mut guard = CancelOnDrop(Some(pending.canceller()));
                        let answer = pending.finish(self.call_timeout).await;
                        if !matches!(answer, Err(RequestFailure::Timeout)) {
                            guard.0 = None;
                        }
                        answer
                    }
                    Err(e) => Err(e),
                };
                match answer {
                    Ok(v) => return Ok(v),
                    Err(RequestFailure::Rpc(message)) => {
                        return Err(McpCallError::Refused {
                            server: self.server.clone(),
                            message,
                        });
                    }
                    Err(RequestFailure::Timeout) => {
                        return Err(McpCallError::Timeout {
                            server: self.server.clone(),
                            ms: self.call_timeout.as_millis() as u64,
                        });
                    }
                    Err(RequestFailure::Closed(reason)) => {
                        self.addr.do_send(ReportDead(reason.clone()));
                        last = reason;
                    }
                }
            }
            Err(McpCallError::OutcomeUnknown {
                server: self.server.clone(),
                reason: last,
            })
        })
    }
}

/// Cancels a request at its server when dropped while armed.
struct CancelOnDrop(Option<toolslot::mcp::client::Canceller>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            // Drop cannot wait; the notification goes out on its own task.
            actix::spawn(async move { c.cancel("the caller stopped waiting (round cancelled or call timed out)").await });
        }
    }
}

impl ResourceSource for McpServerHandle {
    fn server(&self) -> &str {
        &self.server
    }
    fn list_resources(&self) -> BoxFuture<'_, Result<Value, McpCallError>> {
        Box::pin(async move {
            let c = self.client().await?;
            c.list_resources().await.map_err(|e| McpCallError::Refused {
                server: self.server.clone(),
                message: format!("{e:?}"),
            })
        })
    }
    fn read_resource<'a>(&'a self, uri: &'a str) -> BoxFuture<'a, Result<Value, McpCallError>> {
        Box::pin(async move {
            let c = self.client().await?;
            c.read_resource(uri).await.map_err(|e| McpCallError::Refused {
                server: self.server.clone(),
                message: format!("{e:?}"),
            })
        })
    }
}

/// The configured servers, started, with their tools.
pub struct McpSet {
    /// Every server tool, plus the discovery helpers when any server is configured.
    pub tools: Vec<Arc<dyn ToolSpec>>,
    /// Servers that could not start (optional ones; a required one is an error).
    pub notices: Vec<Notice>,
    /// One handle per server, by name.
    pub handles: Vec<McpServerHandle>,
}

/// Starts every configured server (in parallel, each within its start-up timeout), lists its
/// tools and makes them `ToolSpec`s. Must run inside an actix system.
///
/// # Errors
/// A one-line reason when a `required` server cannot start.
pub async fn start_servers(config: &Config) -> Result<McpSet, String> {
    let mut handles = Vec::new();
    for cfg in &config.mcp.servers {
        let call_timeout = Duration::from_millis(cfg.call_timeout_ms.unwrap_or(config.mcp.call_timeout_ms));
        let actor_cfg = cfg.clone();
        let global = config.clone();
        let addr = Supervisor::start(move |_| McpServerActor::new(actor_cfg, &global));
        handles.push((
            cfg.clone(),
            McpServerHandle {
                server: cfg.name.clone(),
                addr,
                call_timeout,
            },
        ));
    }
    let listed = futures::future::join_all(handles.iter().map(|(cfg, h)| async move {
        let client = h.client().await.map_err(|e| e.to_string())?;
        let tools = client
            .list_tools()
            .await
            .map_err(|e| format!("server `{}`: listing tools failed: {e:?}", cfg.name))?;
        Ok::<_, String>(tools)
    }))
    .await;
    let mut tools: Vec<Arc<dyn ToolSpec>> = Vec::new();
    let mut notices = Vec::new();
    for ((cfg, handle), listed) in handles.iter().zip(listed) {
        match listed {
            Ok(list) => {
                for t in list {
                    let remote = t.get("name").and_then(Value::as_str).unwrap_or("").to_string();
                    let description = t.get("description").and_then(Value::as_str).unwrap_or("");
                    let schema = t.get("inputSchema").cloned().unwrap_or(Value::Null);
                    let caps = capabilities_for(t.get("annotations"), cfg.trust_annotations);
                    let caller: Arc<dyn McpCaller> = Arc::new(handle.clone());
                    let def = McpToolDef {
                        name: tool_name(&cfg.name, &remote),
                        remote,
                        description: description.to_string(),
                        schema,
                        capabilities: caps,
                        defer: cfg.defer,
                    };
                    tools.push(Arc::new(McpTool::new(def, config.mcp.description_max_chars, caller)));
                }
            }
            Err(reason) if cfg.required => return Err(format!("required MCP server `{}` did not start: {reason}", cfg.name)),
            Err(reason) => {
                tracing::warn!(server = %cfg.name, %reason, "optional MCP server unavailable");
                notices.push(Notice::new(
                    NoticeKind::FailClosedTool,
                    format!("MCP server `{}` is unavailable and offers no tools: {reason}", cfg.name),
                ));
            }
        }
    }
    let handles: Vec<McpServerHandle> = handles.into_iter().map(|(_, h)| h).collect();
    if !handles.is_empty() {
        let sources: Vec<Arc<dyn ResourceSource>> = handles.iter().map(|h| Arc::new(h.clone()) as Arc<dyn ResourceSource>).collect();
        tools.push(Arc::new(ListMcpResources(sources.clone())));
        tools.push(Arc::new(ReadMcpResource(sources)));
    }
    Ok(McpSet { tools, notices, handles })
}
