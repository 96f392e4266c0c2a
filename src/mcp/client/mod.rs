//! The rmcp connection to one MCP server, over stdio or streamable HTTP.
//!
//! This module, with the transports beside it, is the only code that speaks rmcp. Results
//! cross it as JSON (the wire shape), so the rest of the slot does not depend on rmcp's types.

mod call;
mod connect;
mod direct;
mod handler;
mod remembered;
mod trace;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{ClientRequest, CustomRequest, CustomResult, ReadResourceRequestParams, ServerResult};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};

use super::ProgressSink;
use super::stdio::UNREADABLE_ANSWER;
use handler::{Handler, InputRoute};

pub use call::{Canceller, PendingCall};
pub use connect::{ConnectOptions, connect, one_line};
pub use handler::{ToolChanges, ToolsChanged};
pub use remembered::Remembered;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each change under these locks is one insert or removal: a poisoned lock holds whole data.
    m.lock().unwrap_or_else(|p| p.into_inner())
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
    /// A streamable HTTP connection's session, which [`McpClient::close`] ends.
    session: Option<Remembered>,
    /// How long closing waits for the server (`mcp.shutdown_grace_ms`).
    grace: std::time::Duration,
    /// Calls posted straight to a streamable HTTP server, from the connection's own thread.
    direct: Option<Arc<direct::Direct>>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("server", &self.server)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

fn failure(e: rmcp::service::ServiceError) -> RequestFailure {
    use rmcp::service::ServiceError as E;
    match e {
        // Written by our transport, not by the server.
        E::McpError(err) if err.code.0 == UNREADABLE_ANSWER => RequestFailure::Unreadable(err.message.to_string()),
        E::McpError(err) => RequestFailure::Rpc(err.message.to_string()),
        E::Timeout { .. } => RequestFailure::Timeout,
        // The server answered, with something that is not the result asked for: the
        // connection is as good as before, and the request may have acted.
        E::UnexpectedResponse => RequestFailure::Unreadable("its answer is not the result its request asks for".into()),
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

    /// `network.transport` of the connection: `pipe` for a server on stdio, `tcp` for one
    /// over HTTP.
    fn transport(&self) -> &'static str {
        if self.pid.is_some() { "pipe" } else { "tcp" }
    }

    /// The server process's stderr, once: whoever takes it must keep reading it (a server
    /// whose stderr pipe fills up stops).
    pub fn take_stderr(&self) -> Option<tokio::process::ChildStderr> {
        self.stderr.lock().unwrap_or_else(|p| p.into_inner()).take()
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
    /// [`super::stdio`]), or a streamable HTTP server's session is ended (at most
    /// `mcp.shutdown_grace_ms`).
    pub async fn close(&self) {
        self.service.cancellation_token().cancel();
        if let Some(mut stopped) = self.stopped.clone() {
            let _ = stopped.wait_for(|s| *s).await;
        }
        // rmcp ends the session when its task finishes, which a runtime that stops first
        // never lets it do.
        if let Some(session) = &self.session {
            session.end(self.grace).await;
        }
    }

    /// What ends a streamable HTTP connection's session later, from any runtime (`None` on
    /// stdio).
    pub fn remembered(&self) -> Option<Remembered> {
        self.session.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_of_the_wrong_kind_is_unreadable_not_a_closed_connection() {
        // A closed connection is restarted and its read-only call sent again; a server that
        // answered with the wrong shape has neither coming.
        let e = failure(rmcp::service::ServiceError::UnexpectedResponse);
        assert!(matches!(e, RequestFailure::Unreadable(_)), "{e:?}");
        assert!(matches!(
            failure(rmcp::service::ServiceError::TransportClosed),
            RequestFailure::Closed(_)
        ));
    }
}
