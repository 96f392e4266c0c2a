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
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
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
    /// The same for a `GET` that resumes a call's stream (it accepts only events).
    resume_headers: HeaderMap,
    /// The session the connection speaks in (rmcp's, noted as its messages go).
    session: Remembered,
    /// Numbers this connection's calls; their ids are strings, so none is one of rmcp's.
    next: AtomicU64,
    /// `mcp.max_message_bytes` and `mcp.max_json_depth`, as on stdio.
    max_bytes: usize,
    max_depth: usize,
    /// How a call's stream that ends early is resumed (`mcp.http_resume_attempts`, and
    /// `mcp.http_resume_wait_ms` when the server gave no `retry`).
    resume_attempts: usize,
    resume_wait: Duration,
    /// How long telling the server to stop a call may take (`mcp.shutdown_grace_ms`).
    grace: Duration,
    on_tools_changed: Option<ToolsChanged>,
    /// The thread that made the connection: calls from it alone are posted here.
    thread: std::thread::ThreadId,
}

/// How a call posted here failed.
pub(super) enum Failure {
    /// As a request through rmcp fails.
    Request(RequestFailure),
    /// The server no longer knows the session (404): it never ran the call, which may go
    /// again in the session rmcp opens in its place.
    SessionGone,
}

/// A response's media type, lower-case, without parameters.
fn content_kind(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .unwrap_or_default()
}

impl From<RequestFailure> for Failure {
    fn from(f: RequestFailure) -> Self {
        Failure::Request(f)
    }
}

/// What one message of the server was, to a call.
enum Message {
    /// The call's answer.
    Answer(Result<Value, RequestFailure>),
    /// Something the server sends while the call runs, handled.
    Handled,
    /// Not for this call, or not readable: passed over on a stream (as rmcp does), the
    /// reason for a whole answer.
    Skipped(String),
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
    pub(super) resume_attempts: usize,
    pub(super) resume_wait: Duration,
    pub(super) grace: Duration,
    pub(super) on_tools_changed: Option<ToolsChanged>,
}

/// What a call's own stream may bring besides its answer, and where it goes.
pub(super) struct Hooks {
    pub(super) server: String,
    pub(super) progress: Option<ProgressSink>,
    pub(super) ask: Option<InputSink>,
}

/// A `tools/call` request as it is written.
#[derive(Serialize)]
struct CallRequest<'a> {
    jsonrpc: &'static str,
    id: &'a str,
    method: &'static str,
    params: CallParams<'a>,
}

#[derive(Serialize)]
struct CallParams<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a serde_json::Map<String, Value>>,
    #[serde(rename = "_meta")]
    meta: serde_json::Map<String, Value>,
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
        let mut resume_headers = headers.clone();
        resume_headers.remove(CONTENT_TYPE);
        resume_headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        Some(Self {
            http: opened.http,
            url,
            headers,
            resume_headers,
            session: opened.session,
            next: AtomicU64::new(1),
            max_bytes: opened.max_bytes,
            max_depth: opened.max_depth,
            resume_attempts: opened.resume_attempts,
            resume_wait: opened.resume_wait,
            grace: opened.grace,
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

    /// The body of `tools/call` of `tool` with `args` (left out when none, as rmcp does),
    /// under `id`, whose progress token is `id`, with `meta`'s trace context.
    pub(super) fn call_body(
        id: &str,
        tool: &str,
        args: Option<&serde_json::Map<String, Value>>,
        meta: Option<rmcp::model::RequestMetaObject>,
    ) -> Result<Vec<u8>, RequestFailure> {
        let mut meta = match meta.map(serde_json::to_value) {
            Some(Ok(Value::Object(m))) => m,
            _ => serde_json::Map::new(),
        };
        meta.insert("progressToken".into(), Value::String(id.to_string()));
        // Written from borrows: the arguments, the largest part, are not copied into a tree first.
        let request = CallRequest {
            jsonrpc: "2.0",
            id,
            method: "tools/call",
            params: CallParams {
                name: tool,
                arguments: args,
                meta,
            },
        };
        serde_json::to_vec(&request).map_err(|e| RequestFailure::Rpc(format!("the call cannot be written: {e}")))
    }

    /// Posts `body` in the session.
    async fn post(&self, body: Vec<u8>) -> Result<reqwest::Response, RequestFailure> {
        self.send(self.http.post(self.url.clone()).headers(self.headers.clone()).body(body))
            .await
    }

    /// Sends `request` in the session.
    async fn send(&self, mut request: reqwest::RequestBuilder) -> Result<reqwest::Response, RequestFailure> {
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

    /// Opens the call's stream again after event `after` (a `GET` with `Last-Event-ID`).
    async fn resume(&self, after: &str) -> Result<reqwest::Response, RequestFailure> {
        let request = self
            .http
            .get(self.url.clone())
            .headers(self.resume_headers.clone())
            .header("last-event-id", after);
        let response = self.send(request).await?;
        let status = response.status();
        if status.is_success() && content_kind(&response) == "text/event-stream" {
            Ok(response)
        } else {
            Err(RequestFailure::Closed(format!(
                "the call's stream ended early, and resuming it was answered with HTTP {status}"
            )))
        }
    }

    /// Posts the call `body` (request `id`) and reads its answer: one JSON body, or an event
    /// stream of the server's progress and questions ending with it (resumed where the server
    /// ends it early).
    pub(super) async fn call(&self, id: &str, body: Vec<u8>, hooks: &Hooks) -> Result<Value, Failure> {
        let response = self.post(body).await?;
        let status = response.status();
        let kind = content_kind(&response);
        if status == StatusCode::NOT_FOUND && self.session.current().is_some_and(|s| s.is_some()) {
            return Err(Failure::SessionGone);
        }
        if !status.is_success() {
            let said = if kind == "application/json" {
                let bytes = self.read_whole(response).await.unwrap_or_default();
                self.error_of(&bytes)
            } else {
                None
            };
            return Err(Failure::Request(match said {
                Some(message) => RequestFailure::Rpc(message),
                None => RequestFailure::Closed(format!("the server answered the call with HTTP {status}")),
            }));
        }
        let answer = match kind.as_str() {
            "application/json" => match self.read_whole(response).await {
                Ok(bytes) => match self.read(&bytes, id, hooks).await {
                    Message::Answer(answer) => answer,
                    Message::Handled => Err(RequestFailure::Unreadable(
                        "its answer to tools/call is not the call's answer".into(),
                    )),
                    Message::Skipped(why) => Err(RequestFailure::Unreadable(why)),
                },
                Err(e) => Err(e),
            },
            "text/event-stream" => self.read_stream(response, id, hooks).await,
            _ => Err(RequestFailure::Unreadable(format!(
                "its answer to tools/call (HTTP {status}) is neither JSON nor an event stream"
            ))),
        };
        // The server took the call: one whose answer toolslot cannot read is stopped there,
        // since a dropped connection is no cancellation.
        if let Err(RequestFailure::Unreadable(_) | RequestFailure::Closed(_)) = &answer {
            self.cancel(id, "toolslot could not read the call's answer").await;
        }
        answer.map_err(Failure::Request)
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

    /// Reads the events of the call's stream until its answer; a stream that ends first is
    /// resumed after the last event id it gave, at most `mcp.http_resume_attempts` times.
    async fn read_stream(&self, mut response: reqwest::Response, id: &str, hooks: &Hooks) -> Result<Value, RequestFailure> {
        let mut resumed = 0;
        let mut after: Option<std::sync::Arc<str>> = None;
        loop {
            let mut parser = crate::stream::sse::SseParser::new();
            let ended = match self.read_events(&mut response, &mut parser, id, hooks).await {
                Ok(answer) => return answer,
                Err(ended) => ended,
            };
            if let Some(last) = parser.last_id() {
                after = Some(std::sync::Arc::clone(last));
            }
            let Some(last) = after.as_deref().filter(|_| resumed < self.resume_attempts) else {
                let times = if resumed > 0 {
                    format!(" (resumed {resumed} times)")
                } else {
                    String::new()
                };
                return Err(RequestFailure::Closed(format!("{ended}{times}")));
            };
            resumed += 1;
            let wait = parser.retry().map_or(self.resume_wait, Duration::from_millis);
            tokio::time::sleep(wait).await;
            response = self.resume(last).await?;
        }
    }

    /// Reads `response`'s events: the call's answer (or what ends the call: an event too
    /// long), or why the stream ended before it.
    async fn read_events(
        &self,
        response: &mut reqwest::Response,
        parser: &mut crate::stream::sse::SseParser,
        id: &str,
        hooks: &Hooks,
    ) -> Result<Result<Value, RequestFailure>, String> {
        let mut events = Vec::new();
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => return Err("the server ended the call's stream without its answer".into()),
                Err(e) => return Err(format!("the call's stream broke off before its answer: {e}")),
            };
            parser.feed_into(&chunk, &mut events);
            if parser.held() > self.max_bytes {
                return Ok(Err(self.too_long()));
            }
            for event in events.drain(..) {
                // A priming event (an id, no data) and events of other kinds carry no message.
                if event.data.trim().is_empty() || !(event.event.is_empty() || event.event == "message") {
                    continue;
                }
                match self.read(event.data.as_bytes(), id, hooks).await {
                    Message::Answer(answer) => return Ok(answer),
                    Message::Handled => {}
                    Message::Skipped(why) => tracing::debug!(server = %hooks.server, %why, "an event of a call's stream passed over"),
                }
            }
        }
    }

    /// Reads one message of the server's.
    async fn read(&self, bytes: &[u8], id: &str, hooks: &Hooks) -> Message {
        let flat = crate::mcp::frame::flatten_deep(bytes, self.max_depth);
        let message: Incoming<'_> = match serde_json::from_slice(&flat) {
            Ok(message) => message,
            Err(e) => return Message::Skipped(format!("its answer to tools/call is not JSON-RPC: {e}")),
        };
        match (message.id, message.method) {
            (Some(their), Some(method)) => {
                self.answer_question(their, &method, message.params, hooks).await;
                Message::Handled
            }
            (None, Some(method)) => {
                self.notified(&method, message.params, id, hooks);
                Message::Handled
            }
            (Some(their), None) if serde_json::from_str::<String>(their.get()).is_ok_and(|their| their == id) => {
                if let Some(error) = message.error {
                    return Message::Answer(Err(RequestFailure::Rpc(error.said())));
                }
                let Some(result) = message.result else {
                    return Message::Answer(Err(RequestFailure::Unreadable(
                        "its answer to tools/call holds neither a result nor an error".into(),
                    )));
                };
                // Read through rmcp's type, as every other answer is: the same results
                // pass, in the same shape.
                let typed: Result<rmcp::model::CallToolResult, _> = serde_json::from_str(result.get());
                Message::Answer(match typed {
                    Ok(typed) => serde_json::to_value(typed).map_err(|e| RequestFailure::Rpc(format!("unreadable result: {e}"))),
                    Err(_) => Err(RequestFailure::Unreadable("its answer to tools/call is not a tool result".into())),
                })
            }
            _ => Message::Skipped("its answer to tools/call is not the call's answer".into()),
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
        let result = match params.and_then(|p| serde_json::from_value::<ElicitRequestParams>(p).ok()) {
            Some(request) => super::handler::put_form(&hooks.server, hooks.ask.as_ref(), request).await,
            None => ElicitResult::new(ElicitationAction::Decline),
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
        // A server that takes the connection and never answers holds nothing of ours for long.
        let _ = tokio::time::timeout(self.grace, self.post(body)).await;
    }
}

#[cfg(test)]
#[path = "direct_tests.rs"]
mod tests;
