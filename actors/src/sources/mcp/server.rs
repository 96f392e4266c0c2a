//! One MCP server's supervised actor: its connection, its lifecycle, its listings.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use serde_json::Value;
use toolslot::config::{Config, McpConfig, McpServerConfig};
use toolslot::mcp::client::{ConnectOptions, McpClient, ToolChanges, ToolsChanged, connect, one_line};
use toolslot::mcp::{McpCallError, McpCaller};
use toolslot::output::Tail;

use super::handle::{Live, McpServerHandle};
use super::intake::ToolIntake;

/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "state", content = "reason", rename_all = "snake_case")]
pub enum ServerState {
    /// Not started: its tools come from the kept listing; the first call starts it.
    Idle,
    /// Starting (or restarting).
    Starting,
    /// Connected, tools listed.
    Ready,
    /// Not running; the reason.
    Failed(String),
}

/// A started connection: the client, its first listing, and (newest revisions) the stream of
/// its tool-list changes, taken by whoever records the start.
type Started = (Arc<McpClient>, Vec<Value>, Arc<std::sync::Mutex<Option<ToolChanges>>>);

type Connecting = Shared<BoxFuture<'static, Result<Started, String>>>;

/// One server's supervisor-held state.
pub struct McpServerActor {
    cfg: McpServerConfig,
    mcp: McpConfig,
    startup: Duration,
    call_timeout: Duration,
    stderr_tail_bytes: usize,
    /// Whether the host can answer the server's questions (elicitation is announced).
    elicitation: bool,
    /// The end of what the running server wrote on stderr, quoted when it dies: a ring of
    /// `mcp.stderr_tail_bytes`, however much it writes.
    stderr_tail: Tail,
    /// Set when toolslot is shutting down: the server is stopped and not started again.
    shut: bool,
    backoff: Duration,
    backoff_max: Duration,
    intake: Arc<ToolIntake>,
    /// The open connection, shared with the server's handles.
    client: Live,
    connecting: Option<Connecting>,
    /// Starts begun, and the last one whose outcome was recorded: every caller waiting on
    /// a start sees its outcome, but only the first records it.
    attempts: u64,
    settled: u64,
    state: ServerState,
    failures: u32,
    not_before: Option<Instant>,
    relisting: bool,
    relist_again: bool,
}

impl McpServerActor {
    pub(super) fn new(cfg: McpServerConfig, global: &Config, intake: Arc<ToolIntake>, live: Live, idle: bool, elicitation: bool) -> Self {
        let m = &global.mcp;
        Self {
            startup: cfg.startup_timeout(m),
            call_timeout: cfg.call_timeout(m),
            stderr_tail_bytes: m.stderr_tail_bytes,
            elicitation,
            stderr_tail: Tail::new(m.stderr_tail_bytes.max(1)),
            shut: false,
            mcp: m.clone(),
            backoff: Duration::from_millis(m.restart_backoff_ms),
            backoff_max: Duration::from_millis(m.restart_backoff_max_ms),
            cfg,
            intake,
            client: live,
            connecting: None,
            attempts: 0,
            settled: 0,
            state: if idle { ServerState::Idle } else { ServerState::Starting },
            failures: 0,
            not_before: None,
            relisting: false,
            relist_again: false,
        }
    }

    fn mark_dead(&mut self, reason: String) {
        let said = one_line(&self.stderr_tail.text(), self.stderr_tail_bytes);
        self.stderr_tail = Tail::new(self.stderr_tail_bytes.max(1));
        let reason = if said.is_empty() {
            reason
        } else {
            format!("{reason}; its stderr ends: {said}")
        };
        if let Some(c) = self.client.set(None) {
            tracing::warn!(server = %self.cfg.name, pid = ?c.pid(), %reason, "MCP server stopped");
        }
        self.state = ServerState::Failed(reason);
    }

    /// The tools of a fresh listing go to the intake, calling through this actor.
    fn accept(&self, listing: &[Value], ctx: &Context<Self>) {
        let handle = McpServerHandle::new(self.cfg.name.clone(), ctx.address(), self.client.clone(), self.call_timeout);
        let caller: Arc<dyn McpCaller> = Arc::new(handle);
        self.intake.offer(&self.cfg, listing, caller, true);
    }
}

impl Actor for McpServerActor {
    type Context = Context<Self>;
}

impl Supervised for McpServerActor {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        // The actor failed, not necessarily the server; a fresh connection is made on the
        // next call.
        self.client.set(None);
        self.connecting = None;
        self.relisting = false;
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

/// The server said its tools changed: list them again.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Relist;

/// Stop the server (toolslot is shutting down) and start it no more.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Shutdown;

impl Handler<GetClient> for McpServerActor {
    type Result = ResponseActFuture<Self, Result<Arc<McpClient>, McpCallError>>;

    fn handle(&mut self, _msg: GetClient, ctx: &mut Context<Self>) -> Self::Result {
        if let Some(c) = &self.client.get() {
            if !c.is_closed() {
                return Box::pin(fut::ready(Ok(Arc::clone(c))));
            }
            self.mark_dead("its connection closed".into());
        }
        let server = self.cfg.name.clone();
        if self.shut {
            return Box::pin(fut::ready(Err(McpCallError::Unavailable {
                server,
                reason: "toolslot is shutting down".into(),
            })));
        }
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
        // Calls that arrive while the server starts share the one start. The connection
        // holds only a weak address: it must not keep its own supervisor alive.
        let me = ctx.address().downgrade();
        let attempts = &mut self.attempts;
        let waiting = self
            .connecting
            .get_or_insert_with(|| {
                *attempts += 1;
                let on_change: ToolsChanged = Arc::new(move || {
                    if let Some(addr) = me.upgrade() {
                        addr.do_send(Relist);
                    }
                });
                start(
                    self.cfg.clone(),
                    ConnectOptions {
                        elicitation: self.elicitation,
                        ..ConnectOptions::of(&self.mcp, self.startup, Some(on_change))
                    },
                )
            })
            .clone();
        self.state = ServerState::Starting;
        let attempt = self.attempts;
        Box::pin(waiting.into_actor(self).map(move |result, act, ctx| {
            let first = act.settled < attempt;
            if first {
                act.settled = attempt;
                act.connecting = None;
            }
            match result {
                Ok((client, _, _)) if act.shut => {
                    // Started while toolslot was shutting down: stopped at once.
                    actix::spawn(async move { client.close().await });
                    Err(McpCallError::Unavailable {
                        server,
                        reason: "toolslot is shutting down".into(),
                    })
                }
                Ok((client, listing, changes)) => {
                    if first {
                        let changes = changes.lock().unwrap_or_else(|p| p.into_inner()).take();
                        if let Some(changes) = changes {
                            ctx.add_stream(tool_changes(changes));
                        }
                        tracing::info!(server = %act.cfg.name, pid = ?client.pid(), tools = listing.len(), "MCP server ready");
                        act.client.set(Some(Arc::clone(&client)));
                        act.stderr_tail = Tail::new(act.stderr_tail_bytes.max(1));
                        if let Some(stderr) = client.take_stderr() {
                            ctx.add_stream(stderr_chunks(stderr));
                        }
                        act.state = ServerState::Ready;
                        act.failures = 0;
                        act.not_before = None;
                        act.accept(&listing, ctx);
                        if std::mem::take(&mut act.relist_again) {
                            ctx.notify(Relist);
                        }
                    }
                    Ok(client)
                }
                Err(reason) => {
                    if first {
                        act.failures += 1;
                        let delay = act
                            .backoff
                            .saturating_mul(1 << act.failures.min(16).saturating_sub(1))
                            .min(act.backoff_max);
                        act.not_before = Some(Instant::now() + delay);
                        act.state = ServerState::Failed(reason.clone());
                    }
                    Err(McpCallError::Unavailable { server, reason })
                }
            }
        }))
    }
}

/// Connects and lists the tools: a server is ready once its tools are known.
fn start(cfg: McpServerConfig, options: ConnectOptions) -> Connecting {
    async move {
        let startup = options.startup;
        let client = connect(&cfg, options).await?;
        let listing = match tokio::time::timeout(startup, client.list_tools()).await {
            Ok(Ok(l)) => l,
            Ok(Err(e)) => return Err(format!("server `{}`: listing tools failed: {e:?}", cfg.name)),
            Err(_) => {
                return Err(format!(
                    "server `{}` did not list its tools within {} ms",
                    cfg.name,
                    startup.as_millis()
                ));
            }
        };
        // A server that does not acknowledge the subscription in time still starts; its
        // later tools then arrive at a restart's listing.
        let changes = tokio::time::timeout(startup, client.tool_changes()).await.ok().flatten();
        Ok((Arc::new(client), listing, Arc::new(std::sync::Mutex::new(changes))))
    }
    .boxed()
    .shared()
}

impl Handler<Relist> for McpServerActor {
    type Result = ();
    fn handle(&mut self, _msg: Relist, ctx: &mut Context<Self>) {
        let client = self.client.get().filter(|c| !c.is_closed());
        // Servers send several changes in a burst: one listing runs at a time, and one more
        // follows if a change arrived meanwhile (or while the server was starting).
        let Some(client) = client.filter(|_| !self.relisting) else {
            self.relist_again = true;
            return;
        };
        self.relisting = true;
        let timeout = self.startup;
        let listing = async move { tokio::time::timeout(timeout, client.list_tools()).await };
        ctx.spawn(listing.into_actor(self).map(|result, act, ctx| {
            act.relisting = false;
            match result {
                Ok(Ok(listing)) => act.accept(&listing, ctx),
                Ok(Err(e)) => tracing::warn!(server = %act.cfg.name, error = ?e, "listing changed tools failed"),
                Err(_) => tracing::warn!(server = %act.cfg.name, "listing changed tools timed out"),
            }
            if std::mem::take(&mut act.relist_again) {
                ctx.notify(Relist);
            }
        }));
    }
}

/// The server said its tools changed (on a `subscriptions/listen` stream).
pub struct ToolsChangedNote;

fn tool_changes(changes: ToolChanges) -> impl futures::Stream<Item = ToolsChangedNote> {
    futures::stream::unfold(changes, |mut changes| async move {
        changes.next().await.then_some((ToolsChangedNote, changes))
    })
}

impl StreamHandler<ToolsChangedNote> for McpServerActor {
    fn handle(&mut self, _note: ToolsChangedNote, ctx: &mut Context<Self>) {
        ctx.notify(Relist);
    }

    fn finished(&mut self, _ctx: &mut Context<Self>) {
        // The stream ends with its connection; a restart opens a new one.
    }
}

/// What a server wrote on stderr, as it came.
pub struct StderrChunk(Vec<u8>);

/// A server's stderr, read for as long as the process lives (a server whose stderr pipe fills
/// up stops), in chunks: a "line" without an end must not grow in memory.
fn stderr_chunks(stderr: tokio::process::ChildStderr) -> impl futures::Stream<Item = StderrChunk> {
    use tokio::io::AsyncReadExt;
    futures::stream::unfold(stderr, |mut stderr| async move {
        let mut buf = vec![0u8; 4096];
        match stderr.read(&mut buf).await {
            Ok(n) if n > 0 => {
                buf.truncate(n);
                Some((StderrChunk(buf), stderr))
            }
            _ => None,
        }
    })
}

impl StreamHandler<StderrChunk> for McpServerActor {
    fn handle(&mut self, chunk: StderrChunk, _ctx: &mut Context<Self>) {
        tracing::debug!(server = %self.cfg.name, text = %String::from_utf8_lossy(&chunk.0), "MCP server stderr");
        self.stderr_tail.push(&chunk.0, |_| {});
    }

    fn finished(&mut self, _ctx: &mut Context<Self>) {
        // The process closed its stderr (it exited): the actor lives on to restart it.
    }
}

impl Handler<Shutdown> for McpServerActor {
    type Result = ResponseFuture<()>;
    fn handle(&mut self, _msg: Shutdown, _ctx: &mut Context<Self>) -> Self::Result {
        self.shut = true;
        // A start under way is left to finish and is stopped then (see GetClient).
        let client = self.client.set(None);
        let threads = self.client.per_thread();
        self.state = ServerState::Failed("stopped: toolslot is shutting down".into());
        Box::pin(async move {
            let shared = async {
                if let Some(c) = client {
                    c.close().await;
                }
            };
            let own = async {
                if let Some(opener) = threads {
                    opener.end_all().await;
                }
            };
            futures::join!(shared, own);
        })
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
