//! One language server's supervised actor: its connection, its lifecycle, its stderr.
//!
//! Started on the first edit of a file it handles; a dead server is restarted at the next
//! edit after a backoff that doubles with each failed start (`lsp.restart_backoff_ms`), and
//! edits meanwhile are told diagnostics are unavailable. The edit itself never fails.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use toolslot::config::{Config, LspServerConfig, ShellConfig};

use super::client::{LspClient, connect};

type Connecting = Shared<BoxFuture<'static, Result<Arc<LspClient>, String>>>;

/// One server's supervisor-held state, for one session's workspace.
pub struct LspServerActor {
    cfg: LspServerConfig,
    workspace: PathBuf,
    /// The sandbox the server runs in, its environment and limits.
    shell: ShellConfig,
    startup: Duration,
    backoff: Duration,
    backoff_max: Duration,
    grace: Duration,
    stderr_tail_bytes: usize,
    stderr_tail: VecDeque<String>,
    client: Option<Arc<LspClient>>,
    connecting: Option<Connecting>,
    /// Starts begun, and the last one whose outcome was recorded (waiters share a start).
    attempts: u64,
    settled: u64,
    failures: u32,
    not_before: Option<Instant>,
    failed: Option<String>,
}

impl LspServerActor {
    /// The actor of `cfg`'s server for `workspace`, under `config`'s `[lsp]` and `[shell]`
    /// (its sandbox); nothing starts until the first edit.
    pub fn new(cfg: LspServerConfig, workspace: PathBuf, config: &Config) -> Self {
        let global = &config.lsp;
        Self {
            cfg,
            workspace,
            shell: config.shell.clone(),
            startup: Duration::from_millis(global.startup_timeout_ms),
            backoff: Duration::from_millis(global.restart_backoff_ms),
            backoff_max: Duration::from_millis(global.restart_backoff_max_ms),
            grace: Duration::from_millis(global.shutdown_grace_ms),
            stderr_tail_bytes: global.stderr_tail_bytes,
            stderr_tail: VecDeque::new(),
            client: None,
            connecting: None,
            attempts: 0,
            settled: 0,
            failures: 0,
            not_before: None,
            failed: None,
        }
    }

    fn mark_dead(&mut self, reason: String) {
        let said: Vec<String> = self.stderr_tail.drain(..).collect();
        let reason = if said.is_empty() {
            reason
        } else {
            format!("{reason}; its stderr ends: {}", said.join(" | "))
        };
        if let Some(c) = self.client.take() {
            tracing::warn!(server = %self.cfg.name, pid = ?c.pid(), %reason, "language server stopped");
        }
        self.record_failure(reason);
    }

    fn record_failure(&mut self, reason: String) {
        self.failures += 1;
        let delay = self
            .backoff
            .saturating_mul(1 << self.failures.min(16).saturating_sub(1))
            .min(self.backoff_max);
        self.not_before = Some(Instant::now() + delay);
        self.failed = Some(reason);
    }
}

impl Actor for LspServerActor {
    type Context = Context<Self>;

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        // Dropping the client kills the server's process group.
        self.client = None;
        self.connecting = None;
    }
}

impl Supervised for LspServerActor {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        self.client = None;
        self.connecting = None;
        tracing::warn!(server = %self.cfg.name, "language server actor restarted");
    }
}

/// A live connection, starting the server if it is not running.
#[derive(Message)]
#[rtype(result = "Result<Arc<LspClient>, String>")]
pub struct GetClient;

/// Shut the server down (the session closed); the actor stops.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Shutdown;

impl Handler<GetClient> for LspServerActor {
    type Result = ResponseActFuture<Self, Result<Arc<LspClient>, String>>;

    fn handle(&mut self, _msg: GetClient, _ctx: &mut Context<Self>) -> Self::Result {
        if let Some(c) = &self.client {
            if !c.is_closed() {
                return Box::pin(fut::ready(Ok(Arc::clone(c))));
            }
            self.mark_dead("it exited".into());
        }
        if let Some(t) = self.not_before
            && Instant::now() < t
        {
            let reason = format!(
                "{}; next restart in {} ms",
                self.failed.as_deref().unwrap_or("it failed"),
                t.saturating_duration_since(Instant::now()).as_millis()
            );
            return Box::pin(fut::ready(Err(reason)));
        }
        let attempts = &mut self.attempts;
        let (cfg, workspace, shell, startup) = (self.cfg.clone(), self.workspace.clone(), self.shell.clone(), self.startup);
        let waiting = self
            .connecting
            .get_or_insert_with(|| {
                *attempts += 1;
                async move { connect(&cfg, &workspace, &shell, startup).await.map(Arc::new) }
                    .boxed()
                    .shared()
            })
            .clone();
        let attempt = self.attempts;
        Box::pin(waiting.into_actor(self).map(move |result, act, ctx| {
            let first = act.settled < attempt;
            if first {
                act.settled = attempt;
                act.connecting = None;
                match &result {
                    Ok(client) => {
                        tracing::info!(server = %act.cfg.name, pid = ?client.pid(), "language server ready");
                        act.client = Some(Arc::clone(client));
                        act.stderr_tail.clear();
                        if let Some(stderr) = client.take_stderr() {
                            ctx.add_stream(stderr_lines(stderr));
                        }
                        act.failures = 0;
                        act.not_before = None;
                        act.failed = None;
                    }
                    Err(reason) => {
                        tracing::warn!(server = %act.cfg.name, %reason, "language server did not start");
                        act.record_failure(reason.clone());
                    }
                }
            }
            result
        }))
    }
}

impl Handler<Shutdown> for LspServerActor {
    type Result = ResponseActFuture<Self, ()>;
    fn handle(&mut self, _msg: Shutdown, _ctx: &mut Context<Self>) -> Self::Result {
        let client = self.client.take();
        self.connecting = None;
        let grace = self.grace;
        Box::pin(
            async move {
                if let Some(c) = client {
                    c.shutdown(grace).await;
                }
            }
            .into_actor(self)
            .map(|(), _act, ctx| ctx.stop()),
        )
    }
}

/// One line a server wrote on stderr.
pub struct StderrLine(String);

fn stderr_lines(stderr: tokio::process::ChildStderr) -> impl futures::Stream<Item = StderrLine> {
    use tokio::io::AsyncBufReadExt;
    let lines = tokio::io::BufReader::new(stderr).lines();
    futures::stream::unfold(lines, |mut lines| async move {
        match lines.next_line().await {
            Ok(Some(line)) => Some((StderrLine(line), lines)),
            _ => None,
        }
    })
}

impl StreamHandler<StderrLine> for LspServerActor {
    fn handle(&mut self, line: StderrLine, _ctx: &mut Context<Self>) {
        tracing::debug!(server = %self.cfg.name, line = %line.0, "language server stderr");
        self.stderr_tail.push_back(line.0);
        let mut bytes: usize = self.stderr_tail.iter().map(String::len).sum();
        while bytes > self.stderr_tail_bytes && self.stderr_tail.len() > 1 {
            bytes -= self.stderr_tail.pop_front().map_or(0, |l| l.len());
        }
    }

    fn finished(&mut self, _ctx: &mut Context<Self>) {
        // The process closed its stderr (it exited): the actor lives on to restart it.
    }
}
