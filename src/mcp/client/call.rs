//! `tools/call`: a request in flight, the "input required" rounds of the newest revisions, and
//! its cancellation when the caller gives up.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, RequestId, ServerResult};
use rmcp::service::{Peer, PeerRequestOptions, RequestHandle, RoleClient};
use serde_json::Value;

use super::direct::{self, Direct};
use super::handler::{InputRoute, put_form};
use super::{McpClient, RequestFailure, failure, lock};
use crate::mcp::{CallHooks, InputSink, ProgressSink};

/// Numbers the calls registered for questions, per process.
static INPUT_KEYS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A `tools/call` request sent (or, posted straight to its server, about to be) and not yet
/// answered.
pub struct PendingCall {
    way: Way,
    _hooks: Registered,
    /// The request's span (by the MCP conventions) and its start.
    span: tracing::Span,
    started: std::time::Instant,
}

/// How a call goes to its server.
enum Way {
    /// Through rmcp's service.
    Rmcp {
        // Boxed: rmcp's handle is several times the size of everything else either way holds.
        handle: Box<RequestHandle<RoleClient>>,
        /// What a retry needs when the server answers "input required" (the newest
        /// revisions' multi round-trip requests): the request, this call's own question sink,
        /// and the request id now in flight (which a canceller reads).
        params: CallToolRequestParams,
        ask: Option<InputSink>,
        server: String,
        current: Arc<Mutex<RequestId>>,
        /// The `_meta` carrying the trace context, sent again with each retry.
        meta: Option<rmcp::model::RequestMetaObject>,
    },
    /// Posted on the calling task ([`super::direct`]), when [`PendingCall::finish`] runs.
    Direct {
        direct: Arc<Direct>,
        id: String,
        body: Vec<u8>,
        hooks: direct::Hooks,
        /// Where the call goes instead when the server no longer knows the session: rmcp
        /// opens a new one first.
        peer: Peer<RoleClient>,
        params: CallToolRequestParams,
        meta: Option<rmcp::model::RequestMetaObject>,
        /// The id rmcp gave the call when it went that way instead, which a canceller reads.
        resent: Arc<Mutex<Option<RequestId>>>,
    },
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
pub struct Canceller(Target);

enum Target {
    Rmcp {
        peer: Peer<RoleClient>,
        id: Arc<Mutex<RequestId>>,
    },
    Direct {
        direct: Arc<Direct>,
        id: String,
        peer: Peer<RoleClient>,
        resent: Arc<Mutex<Option<RequestId>>>,
    },
}

impl Canceller {
    /// Sends `notifications/cancelled` for the request.
    ///
    /// # Cancel safety
    /// Dropping it may not send the notification.
    pub async fn cancel(self, reason: &str) {
        match self.0 {
            Target::Rmcp { peer, id } => {
                let id = lock(&id).clone();
                notify_cancelled(&peer, id, reason).await;
            }
            Target::Direct { direct, id, peer, resent } => {
                // Read before any wait: the lock is not held across one.
                let resent = lock(&resent).clone();
                match resent {
                    // Sent again through rmcp, in a new session: that request is the one to stop.
                    Some(id) => notify_cancelled(&peer, id, reason).await,
                    None => direct.cancel(&id, reason).await,
                }
            }
        }
    }
}

/// Tells the server, through rmcp, to stop request `id`.
async fn notify_cancelled(peer: &Peer<RoleClient>, id: RequestId, reason: &str) {
    let params = CancelledNotificationParam::new(Some(id), Some(reason.to_string()));
    let _ = peer.notify_cancelled(params).await;
}

impl PendingCall {
    /// What cancels this request at the server.
    pub fn canceller(&self) -> Canceller {
        Canceller(match &self.way {
            Way::Rmcp { handle, current, .. } => Target::Rmcp {
                peer: handle.peer.clone(),
                id: Arc::clone(current),
            },
            Way::Direct {
                direct, id, peer, resent, ..
            } => Target::Direct {
                direct: Arc::clone(direct),
                id: id.clone(),
                peer: peer.clone(),
                resent: Arc::clone(resent),
            },
        })
    }

    /// Waits for the answer, at most `timeout`; the result as JSON.
    ///
    /// # Errors
    /// [`RequestFailure`]; on a timeout the caller should cancel the request.
    ///
    /// # Cancel safety
    /// Dropping it leaves the request running at the server: cancel it with [`PendingCall::canceller`].
    pub async fn finish(self, timeout: Duration) -> Result<Value, RequestFailure> {
        use tracing::Instrument;
        let span = self.span.clone();
        let started = self.started;
        let result = self.finish_inner(timeout).instrument(span.clone()).await;
        super::trace::finish(&span, "tools/call", started, result.as_ref().err());
        result
    }

    async fn finish_inner(self, timeout: Duration) -> Result<Value, RequestFailure> {
        let PendingCall { way, mut _hooks, .. } = self;
        let deadline = tokio::time::Instant::now() + timeout;
        let (mut handle, mut params, ask, server, current, meta) = match way {
            Way::Rmcp {
                handle,
                params,
                ask,
                server,
                current,
                meta,
            } => (*handle, params, ask, server, current, meta),
            Way::Direct {
                direct,
                id,
                body,
                hooks,
                peer,
                params,
                meta,
                resent,
            } => match tokio::time::timeout_at(deadline, direct.call(&id, body, &hooks)).await {
                Err(_) => return Err(RequestFailure::Timeout),
                Ok(Ok(result)) => return Ok(result),
                Ok(Err(direct::Failure::Request(failure))) => return Err(failure),
                // The server never ran it: it goes through rmcp, whose post meets the same
                // 404 and opens a new session first; a cancellation from now on names rmcp's id.
                Ok(Err(direct::Failure::SessionGone)) => {
                    tracing::debug!(server = %hooks.server, "the server no longer knows the session; the call goes through rmcp");
                    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
                    let mut options = PeerRequestOptions::no_options();
                    options.meta = meta.clone();
                    let handle = peer.send_request_with_option(request, options).await.map_err(failure)?;
                    if let Some(sink) = &hooks.progress {
                        _hooks.progress_key = serde_json::to_string(&handle.progress_token).unwrap_or_default();
                        lock(&_hooks.progress).insert(_hooks.progress_key.clone(), Arc::clone(sink));
                    }
                    *lock(&resent) = Some(handle.id.clone());
                    let current = Arc::new(Mutex::new(handle.id.clone()));
                    (handle, params, hooks.ask, hooks.server, current, meta)
                }
            },
        };
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
                    let mut options = PeerRequestOptions::no_options();
                    options.meta = meta.clone();
                    handle = peer.send_request_with_option(request, options).await.map_err(failure)?;
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
    use rmcp::model::InputRequest;
    let mut answers = rmcp::model::InputResponses::new();
    for (key, request) in requests {
        let answer = match request {
            InputRequest::Elicitation(request) => serde_json::to_value(put_form(server, ask, request.params).await).unwrap_or(Value::Null),
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

impl McpClient {
    /// Calls `tool`; the `tools/call` result as JSON. Dropping the future (a timeout, a
    /// cancelled round) sends the server a cancellation for the request.
    ///
    /// # Errors
    /// [`RequestFailure`].
    pub async fn call(&self, tool: &str, args: Value, timeout: Duration) -> Result<Value, RequestFailure> {
        use tracing::Instrument;
        let span = super::trace::span("tools/call", tool, self.transport(), &self.server);
        let started = std::time::Instant::now();
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = args.as_object().cloned();
        params.meta = super::trace::meta(&span);
        let call = self.service.call_tool(params);
        let result = async {
            let result = tokio::time::timeout(timeout, call)
                .await
                .map_err(|_| RequestFailure::Timeout)?
                .map_err(failure)?;
            serde_json::to_value(result).map_err(|e| RequestFailure::Rpc(format!("unreadable result: {e}")))
        }
        .instrument(span.clone())
        .await;
        super::trace::finish(&span, "tools/call", started, result.as_ref().err());
        result
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
        let span = super::trace::span("tools/call", tool, self.transport(), &self.server);
        let started = std::time::Instant::now();
        let meta = super::trace::meta(&span);
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = match args {
            Value::Object(args) => Some(args),
            _ => None,
        };
        if let Some(direct) = self.direct.as_ref().filter(|d| d.here()) {
            let id = direct.next_id();
            let body = Direct::call_body(&id, tool, params.arguments.as_ref(), meta.clone())?;
            // The same key as the handler's for progress that comes on the server's own stream.
            registered.progress_key = serde_json::to_string(&id).unwrap_or_default();
            if let Some(sink) = &progress {
                lock(&self.progress).insert(registered.progress_key.clone(), Arc::clone(sink));
            }
            let hooks = direct::Hooks {
                server: self.server.clone(),
                progress,
                ask,
            };
            return Ok(PendingCall {
                way: Way::Direct {
                    direct: Arc::clone(direct),
                    id,
                    body,
                    hooks,
                    peer: self.service.peer().clone(),
                    params,
                    meta,
                    resent: Arc::default(),
                },
                _hooks: registered,
                span,
                started,
            });
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
        let mut options = PeerRequestOptions::no_options();
        options.meta = meta.clone();
        let sent = self.service.send_request_with_option(request, options).await.map_err(failure);
        if let Err(e) = &sent {
            super::trace::finish(&span, "tools/call", started, Some(e));
        }
        let handle = sent?;
        registered.progress_key = serde_json::to_string(&handle.progress_token).unwrap_or_default();
        if let Some(sink) = progress {
            lock(&self.progress).insert(registered.progress_key.clone(), sink);
        }
        let current = Arc::new(Mutex::new(handle.id.clone()));
        Ok(PendingCall {
            way: Way::Rmcp {
                handle: Box::new(handle),
                params,
                ask,
                server: self.server.clone(),
                current,
                meta,
            },
            _hooks: registered,
            span,
            started,
        })
    }
}
