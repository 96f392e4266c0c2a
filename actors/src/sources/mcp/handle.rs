//! What a server's tools call through: its actor's address.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use futures::future::BoxFuture;
use serde_json::Value;
use toolslot::mcp::CallHooks;
use toolslot::mcp::client::{McpClient, RequestFailure};
use toolslot::mcp::{McpCallError, McpCaller, ResourceSource};

use super::per_thread::Opener;
use super::server::{GetClient, McpServerActor, ReportDead, ServerState, Shutdown, Status};

/// A server's open connection, set by its actor alone and read by its handles: a call while
/// it is open goes straight to it, without a message to the actor and back (two thread
/// wake-ups per call in front of a busy server, when the actor lives on another thread).
#[derive(Clone)]
pub(super) struct Live {
    shared: Arc<Mutex<Option<Arc<McpClient>>>>,
    /// How a calling thread opens a connection of its own beside the shared one (streamable
    /// HTTP servers).
    per_thread: Option<Arc<Opener>>,
}

impl Live {
    /// A server's, whose calling threads open their own connections through `per_thread`.
    pub(super) fn new(per_thread: Option<Arc<Opener>>) -> Self {
        Self {
            shared: Arc::default(),
            per_thread,
        }
    }

    /// The connection, when there is one.
    pub(super) fn get(&self) -> Option<Arc<McpClient>> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// How the calling threads open connections of their own, if they do.
    pub(super) fn per_thread(&self) -> Option<Arc<Opener>> {
        self.per_thread.clone()
    }

    /// Replaces the connection, returning the one it had.
    pub(super) fn set(&self, client: Option<Arc<McpClient>>) -> Option<Arc<McpClient>> {
        std::mem::replace(&mut *self.shared.lock().unwrap_or_else(|p| p.into_inner()), client)
    }
}

/// A server's handle, as its tools see it.
#[derive(Clone)]
pub struct McpServerHandle {
    server: String,
    addr: Addr<McpServerActor>,
    live: Live,
    call_timeout: Duration,
}

impl McpServerHandle {
    pub(super) fn new(server: String, addr: Addr<McpServerActor>, live: Live, call_timeout: Duration) -> Self {
        Self {
            server,
            addr,
            live,
            call_timeout,
        }
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.server
    }

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

    /// The current connection's process id, starting the server if it is not running
    /// (tests kill it to test restarts).
    ///
    /// # Cancel safety
    /// Safe: it only asks.
    pub async fn pid(&self) -> Option<u32> {
        self.client().await.ok().and_then(|c| c.pid())
    }

    /// Stops the server (stdin closed, then its process group signalled) and starts it no
    /// more: what a host does when it exits.
    ///
    /// # Cancel safety
    /// Dropping it may leave the server stopping; it is killed when the actor system ends.
    pub async fn shutdown(&self) {
        let _ = self.addr.send(Shutdown).await;
    }

    /// Starts the server if it is not running, and lists its tools.
    ///
    /// # Errors
    /// Why it could not start.
    ///
    /// # Cancel safety
    /// Safe: the start goes on without the caller, shared with the next one.
    pub async fn start(&self) -> Result<(), String> {
        self.client().await.map(|_| ()).map_err(|e| e.to_string())
    }

    async fn client(&self) -> Result<Arc<McpClient>, McpCallError> {
        // A closed connection is the actor's to notice, restart and report.
        if let Some(open) = self.live.get().filter(|c| !c.is_closed()) {
            return Ok(open);
        }
        self.fresh_client().await
    }

    /// The connection a call goes over: this thread's own when it has one open beside the
    /// shared one (and whether it is), else the shared one.
    async fn calling_client(&self) -> Result<(Arc<McpClient>, bool), McpCallError> {
        let shared = self.client().await?;
        match self.live.per_thread.as_ref().and_then(|opener| opener.here(&shared)) {
            Some(own) => Ok((own, true)),
            None => Ok((shared, false)),
        }
    }

    /// The connection as the actor has it, after every message sent to it before.
    async fn fresh_client(&self) -> Result<Arc<McpClient>, McpCallError> {
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

    fn call<'a>(&'a self, tool: &'a str, args: Value, read_only: bool, hooks: CallHooks) -> BoxFuture<'a, Result<Value, McpCallError>> {
        Box::pin(async move {
            // A read-only call may be retried once on a fresh connection; anything else could
            // have acted already, so it is not sent twice.
            let attempts = if read_only { 2 } else { 1 };
            let mut last = String::new();
            for attempt in 0..attempts {
                // A retry asks the actor, behind the death just reported to it, so the
                // connection that failed is never handed out again.
                let (client, own) = if attempt == 0 {
                    self.calling_client().await?
                } else {
                    (self.fresh_client().await?, false)
                };
                let answer = match client.start_call(tool, args.clone(), hooks.clone()).await {
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
                    Err(RequestFailure::Unreadable(reason)) => {
                        return Err(McpCallError::Unreadable {
                            server: self.server.clone(),
                            reason,
                        });
                    }
                    Err(RequestFailure::Timeout) => {
                        return Err(McpCallError::Timeout {
                            server: self.server.clone(),
                            ms: self.call_timeout.as_millis() as u64,
                        });
                    }
                    Err(RequestFailure::Closed(reason)) => {
                        match self.live.per_thread.as_ref().filter(|_| own) {
                            Some(opener) => opener.forget_here(&client),
                            None => self.addr.do_send(ReportDead(reason.clone())),
                        }
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
