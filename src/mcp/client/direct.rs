//! `tools/call` posted straight to a streamable HTTP server, not through rmcp's worker.
//!
//! Why by hand: through rmcp's streamable HTTP client a call passes three tasks and their
//! channels, its URL is parsed again, and its answer is parsed through serde's untagged enums
//! (every variant of `ServerResult` tried in turn, over buffered content); in the profile of
//! a gateway call over HTTP that was about a fifth of toolslot's CPU per call (BENCHMARKS.md,
//! "A call posted straight to its server"). Here the call is one POST made on the calling
//! task, and its answer is read where it arrives.
//!
//! Only what a call needs. rmcp still opens the session (`initialize`, the revision, the
//! session id), lists, reads resources, holds the server's own stream for what it sends
//! unasked, and ends the session; it also carries every call on the newest revisions (whose
//! input-required rounds are its to run) and any call made on another thread than the
//! connection's own (whose pooled connections live on the runtime that made them).

use std::sync::atomic::{AtomicU64, Ordering};

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::remembered::Remembered;
use super::{RequestFailure, ToolsChanged};
use crate::mcp::{InputSink, ProgressSink};

/// The way to post one connection's calls.
pub(super) struct Direct {
    http: reqwest::Client,
    url: reqwest::Url,
    /// What every message carries: what it accepts, its type, credentials, the server's extra
    /// headers and the negotiated revision.
    headers: HeaderMap,
    /// The session the connection speaks in (rmcp's, noted as its messages go).
    session: Remembered,
    /// Numbers this connection's calls; their ids are strings, so none is one of rmcp's.
    next: AtomicU64,
    /// `mcp.max_message_bytes` and `mcp.max_json_depth`, as on stdio.
    max_bytes: usize,
    max_depth: usize,
    on_tools_changed: Option<ToolsChanged>,
    /// The thread that made the connection: calls from it alone are posted here.
    thread: std::thread::ThreadId,
}

/// What [`Direct::new`] needs from the connection rmcp opened.
pub(super) struct Opened {
    pub(super) http: reqwest::Client,
    pub(super) url: String,
    pub(super) custom: std::collections::HashMap<HeaderName, HeaderValue>,
    pub(super) bearer: Option<String>,
    pub(super) revision: String,
    pub(super) session: Remembered,
    pub(super) max_bytes: usize,
    pub(super) max_depth: usize,
    pub(super) on_tools_changed: Option<ToolsChanged>,
}

/// What a call's own stream may bring besides its answer, and where it goes.
pub(super) struct Hooks {
    pub(super) server: String,
    pub(super) progress: Option<ProgressSink>,
    pub(super) ask: Option<InputSink>,
}

/// One JSON-RPC message from the server, as far as a call reads it.
#[derive(Deserialize)]
struct Incoming<'a> {
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default, borrow)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<RpcError>,
}

#[derive(Deserialize)]
struct RpcError {
    #[serde(default)]
    code: i64,
    #[serde(default)]
    message: String,
}

impl RpcError {
    /// What the server said, or that it said nothing but its code.
    fn said(self) -> String {
        if self.message.trim().is_empty() {
            format!("the server refused the call (JSON-RPC error {})", self.code)
        } else {
            self.message
        }
    }
}

impl Direct {
    /// The way to post calls on the session rmcp opened, made on the connection's thread;
    /// `None` for a revision without the `initialize` handshake, or a URL or header that
    /// does not parse (rmcp carries those calls).
    pub(super) fn new(opened: Opened) -> Option<Self> {
        if opened.revision.as_str() >= rmcp::model::ProtocolVersion::NO_INITIALIZE.as_str() {
            return None;
        }
        let url = reqwest::Url::parse(&opened.url).ok()?;
        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in opened.custom {
            headers.insert(name, value);
        }
        if let Some(token) = opened.bearer {
            headers.insert(
                reqwest::header::AUTHORIZATION,
                HeaderValue::from_str(&format!("Bearer {token}")).ok()?,
            );
        }
        headers.insert(
            HeaderName::from_static("mcp-protocol-version"),
            HeaderValue::from_str(&opened.revision).ok()?,
        );
        Some(Self {
            http: opened.http,
            url,
            headers,
            session: opened.session,
            next: AtomicU64::new(1),
            max_bytes: opened.max_bytes,
            max_depth: opened.max_depth,
            on_tools_changed: opened.on_tools_changed,
            thread: std::thread::current().id(),
        })
    }

    /// Whether a call made now, on this thread, is posted here.
    pub(super) fn here(&self) -> bool {
        std::thread::current().id() == self.thread
    }

    /// A new request id.
    pub(super) fn next_id(&self) -> String {
        format!("toolslot-{}", self.next.fetch_add(1, Ordering::Relaxed))
    }

    /// The body of `tools/call` of `tool` with `args` (left out unless an object, as rmcp
    /// does), under `id`, whose progress token is `id`, with `meta`'s trace context.
    pub(super) fn call_body(
        id: &str,
        tool: &str,
        args: &Value,
        meta: Option<rmcp::model::RequestMetaObject>,
    ) -> Result<Vec<u8>, RequestFailure> {
        let mut meta = match meta.map(serde_json::to_value) {
            Some(Ok(Value::Object(m))) => m,
            _ => serde_json::Map::new(),
        };
        meta.insert("progressToken".into(), Value::String(id.to_string()));
        let mut params = serde_json::Map::new();
        params.insert("name".into(), Value::String(tool.to_string()));
        if args.is_object() {
            params.insert("arguments".into(), args.clone());
        }
        params.insert("_meta".into(), Value::Object(meta));
        let request = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        serde_json::to_vec(&request).map_err(|e| RequestFailure::Rpc(format!("the call cannot be written: {e}")))
    }

    /// Posts `body` in the session.
    async fn post(&self, body: Vec<u8>) -> Result<reqwest::Response, RequestFailure> {
        let mut request = self.http.post(self.url.clone()).headers(self.headers.clone()).body(body);
        match self.session.current() {
            Some(Some(id)) => request = request.header("mcp-session-id", id.as_ref()),
            Some(None) => {}
            None => return Err(RequestFailure::Closed("its session was ended".into())),
        }
        request
            .send()
            .await
            .map_err(|e| RequestFailure::Closed(format!("the request failed: {}", super::connect::with_causes(&e))))
    }

    /// Posts the call `body` (request `id`) and reads its answer: one JSON body, or an event
    /// stream of the server's progress and questions ending with it.
    pub(super) async fn call(&self, id: &str, body: Vec<u8>, hooks: &Hooks) -> Result<Value, RequestFailure> {
        let response = self.post(body).await?;
        let status = response.status();
        let kind = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
            .unwrap_or_default();
        if status == StatusCode::NOT_FOUND && self.session.current().is_some_and(|s| s.is_some()) {
            return Err(RequestFailure::Closed("the server no longer knows its session (404)".into()));
        }
        if !status.is_success() {
            let said = if kind == "application/json" {
                let bytes = self.read_whole(response).await.unwrap_or_default();
                self.error_of(&bytes)
            } else {
                None
            };
            return Err(match said {
                Some(message) => RequestFailure::Rpc(message),
                None => RequestFailure::Closed(format!("the server answered the call with HTTP {status}")),
            });
        }
        match kind.as_str() {
            "application/json" => {
                let bytes = self.read_whole(response).await?;
                match self.read(&bytes, id, hooks).await? {
                    Some(answer) => answer,
                    None => Err(RequestFailure::Unreadable(
                        "its answer to tools/call is not the call's answer".into(),
                    )),
                }
            }
            "text/event-stream" => self.read_stream(response, id, hooks).await,
            _ => Err(RequestFailure::Unreadable(format!(
                "its answer to tools/call (HTTP {status}) is neither JSON nor an event stream"
            ))),
        }
    }

    /// The whole body, at most `mcp.max_message_bytes`.
    async fn read_whole(&self, mut response: reqwest::Response) -> Result<Vec<u8>, RequestFailure> {
        if response.content_length().is_some_and(|n| n > self.max_bytes as u64) {
            return Err(self.too_long());
        }
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| RequestFailure::Closed(format!("its answer broke off: {e}")))?
        {
            if bytes.len() + chunk.len() > self.max_bytes {
                return Err(self.too_long());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }

    fn too_long(&self) -> RequestFailure {
        RequestFailure::Unreadable(format!(
            "its answer is longer than mcp.max_message_bytes ({} bytes)",
            self.max_bytes
        ))
    }

    /// Reads the events of the call's stream until its answer.
    async fn read_stream(&self, mut response: reqwest::Response, id: &str, hooks: &Hooks) -> Result<Value, RequestFailure> {
        let mut parser = crate::stream::sse::SseParser::new();
        let mut events = Vec::new();
        // Bytes since the last whole event: what one message may grow to.
        let mut pending = 0usize;
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(e) => return Err(RequestFailure::Closed(format!("its stream broke off before the answer: {e}"))),
            };
            pending += chunk.len();
            parser.feed_into(&chunk, &mut events);
            if !events.is_empty() {
                pending = 0;
            } else if pending > self.max_bytes {
                return Err(self.too_long());
            }
            for event in events.drain(..) {
                if event.data.is_empty() || !(event.event.is_empty() || event.event == "message") {
                    continue;
                }
                if let Some(answer) = self.read(event.data.as_bytes(), id, hooks).await? {
                    return answer;
                }
            }
        }
        Err(RequestFailure::Closed(
            "the server ended the call's stream without its answer".into(),
        ))
    }

    /// Reads one message: the call's answer (`Some`), or something the server sends while
    /// the call runs, handled (`None`).
    async fn read(&self, bytes: &[u8], id: &str, hooks: &Hooks) -> Result<Option<Result<Value, RequestFailure>>, RequestFailure> {
        let flat = crate::mcp::frame::flatten_deep(bytes, self.max_depth);
        let message: Incoming<'_> = serde_json::from_slice(&flat)
            .map_err(|e| RequestFailure::Unreadable(format!("its answer to tools/call is not JSON-RPC: {e}")))?;
        match (message.id, message.method) {
            (Some(their), Some(method)) => {
                self.answer_question(their, &method, message.params, hooks).await;
                Ok(None)
            }
            (None, Some(method)) => {
                self.notified(&method, message.params, id, hooks);
                Ok(None)
            }
            (Some(their), None) if serde_json::from_str::<String>(their.get()).is_ok_and(|their| their == id) => {
                if let Some(error) = message.error {
                    return Ok(Some(Err(RequestFailure::Rpc(error.said()))));
                }
                let Some(result) = message.result else {
                    return Err(RequestFailure::Unreadable(
                        "its answer to tools/call holds neither a result nor an error".into(),
                    ));
                };
                // Read through rmcp's type, as every other answer is: the same results
                // pass, in the same shape.
                let typed: rmcp::model::CallToolResult = serde_json::from_str(result.get())
                    .map_err(|_| RequestFailure::Unreadable("its answer to tools/call is not a tool result".into()))?;
                Ok(Some(
                    serde_json::to_value(typed).map_err(|e| RequestFailure::Rpc(format!("unreadable result: {e}"))),
                ))
            }
            _ => Err(RequestFailure::Unreadable(
                "its answer to tools/call is not the call's answer".into(),
            )),
        }
    }

    /// The text of a JSON-RPC error answer.
    fn error_of(&self, bytes: &[u8]) -> Option<String> {
        let message: Incoming<'_> = serde_json::from_slice(bytes).ok()?;
        message.error.map(RpcError::said)
    }

    /// A notification on the call's stream: its progress, or the tool list changed.
    fn notified(&self, method: &str, params: Option<Value>, id: &str, hooks: &Hooks) {
        match method {
            "notifications/progress" => {
                let Some(p) = params else { return };
                if p.get("progressToken").and_then(Value::as_str) != Some(id) {
                    return;
                }
                if let (Some(sink), Some(progress)) = (&hooks.progress, p.get("progress").and_then(Value::as_f64)) {
                    let total = p.get("total").and_then(Value::as_f64);
                    let message = p.get("message").and_then(Value::as_str).map(str::to_string);
                    sink(progress, total, message);
                }
            }
            "notifications/tools/list_changed" => {
                if let Some(hook) = &self.on_tools_changed {
                    hook();
                }
            }
            _ => {}
        }
    }

    /// A question the server asks on the call's stream, answered (a POST of its own): an
    /// elicitation by the call's own session (declined where it has none), roots empty, a
    /// ping; anything else (sampling) is not offered.
    async fn answer_question(&self, their: &RawValue, method: &str, params: Option<Value>, hooks: &Hooks) {
        let outcome: Result<Value, String> = match method {
            "elicitation/create" => Ok(self.elicit(params, hooks).await),
            "roots/list" => Ok(serde_json::json!({"roots": []})),
            "ping" => Ok(serde_json::json!({})),
            other => Err(format!("toolslot does not offer `{other}`")),
        };
        let id: Value = serde_json::from_str(their.get()).unwrap_or(Value::Null);
        let answer = match outcome {
            Ok(result) => serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(message) => serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": message}}),
        };
        let Ok(body) = serde_json::to_vec(&answer) else { return };
        if let Err(e) = self.post(body).await.and_then(|r| {
            r.status()
                .is_success()
                .then_some(())
                .ok_or_else(|| RequestFailure::Closed(format!("HTTP {}", r.status())))
        }) {
            tracing::debug!(server = %hooks.server, error = ?e, "an answer to the server's question was not taken");
        }
    }

    async fn elicit(&self, params: Option<Value>, hooks: &Hooks) -> Value {
        use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
        let request = params.and_then(|p| serde_json::from_value::<ElicitRequestParams>(p).ok());
        let result = match (request, &hooks.ask) {
            (
                Some(ElicitRequestParams::FormElicitationParams {
                    message, requested_schema, ..
                }),
                Some(ask),
            ) => {
                let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
                let answer = ask(crate::tool::InputRequest {
                    server: hooks.server.clone(),
                    message,
                    schema,
                })
                .await;
                super::handler::elicit_result(answer)
            }
            _ => ElicitResult::new(ElicitationAction::Decline),
        };
        serde_json::to_value(result).unwrap_or(Value::Null)
    }

    /// Tells the server to stop request `id`.
    pub(super) async fn cancel(&self, id: &str, reason: &str) {
        let note = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": reason},
        });
        let Ok(body) = serde_json::to_vec(&note) else { return };
        let _ = self.post(body).await;
    }
}

#[cfg(test)]
#[path = "direct_tests.rs"]
mod tests;
