//! The session a streamable HTTP connection speaks in, remembered, so that it can be ended
//! (`DELETE`) from anywhere.
//!
//! rmcp ends its session when its connection's task finishes. That task runs where the
//! connection was opened: a session thread's own connection (`per_thread.rs` in the actors
//! crate) lives on an HTTP worker's runtime, which is gone by the time toolslot stops its
//! servers, so the task never finishes and the server keeps the session until its own idle
//! timeout (a server that limits its sessions runs out of them after a few restarts). The
//! client rmcp is given here is reqwest's, wrapped to note the session of each message it
//! sends; [`Remembered::end`] ends it later with the same client, on whatever runtime is
//! running then, and the wrapped client's own `DELETE` for a session already ended is skipped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::Sse;

use super::lock;

/// What ending a session needs: where it is, its id, and the credentials messages carry.
#[derive(Debug, Clone)]
struct Spoken {
    uri: Arc<str>,
    session: Arc<str>,
    auth_header: Option<String>,
    custom_headers: HashMap<HeaderName, HeaderValue>,
    /// Ended already (by [`Remembered::end`] or by rmcp).
    ended: bool,
}

/// What both sides of a connection share: the session noted, and whether its `DELETE` has
/// come back.
struct Noted {
    last: Mutex<Option<Spoken>>,
    /// Whether the noted session's `DELETE` has come back, whichever side sent it.
    done: tokio::sync::watch::Sender<bool>,
}

/// reqwest's client as rmcp uses it, noting the session each message is sent in.
#[derive(Clone)]
pub(super) struct Remembering {
    inner: reqwest::Client,
    noted: Arc<Noted>,
}

/// A connection's session, as [`Remembering`] noted it.
#[derive(Clone)]
pub struct Remembered {
    inner: reqwest::Client,
    noted: Arc<Noted>,
}

impl Remembering {
    /// `inner`, remembering; and the handle that ends its session.
    pub(super) fn new(inner: reqwest::Client) -> (Self, Remembered) {
        let noted = Arc::new(Noted {
            last: Mutex::new(None),
            done: tokio::sync::watch::channel(false).0,
        });
        let remembered = Remembered {
            inner: inner.clone(),
            noted: Arc::clone(&noted),
        };
        (Self { inner, noted }, remembered)
    }

    /// What noting a message's session needs kept while it is sent: its credentials, unless
    /// its session is the one noted already (every message after the first, which then costs
    /// no copy of its headers).
    fn keep(&self, session: &Option<Arc<str>>, auth_header: &Option<String>, headers: &HashMap<HeaderName, HeaderValue>) -> Option<Kept> {
        let known = session
            .as_ref()
            .is_some_and(|id| lock(&self.noted.last).as_ref().is_some_and(|s| &s.session == id));
        (!known).then(|| Kept {
            session: session.clone(),
            auth_header: auth_header.clone(),
            custom_headers: headers.clone(),
        })
    }

    /// Notes the session a message went in (its id as sent, or as the answer to `initialize`
    /// gave it).
    fn noted<E>(
        &self,
        uri: &Arc<str>,
        kept: Option<Kept>,
        answer: Result<StreamableHttpPostResponse, E>,
    ) -> Result<StreamableHttpPostResponse, E> {
        let Some(kept) = kept else { return answer };
        let given = match &answer {
            Ok(StreamableHttpPostResponse::Json(_, Some(id)) | StreamableHttpPostResponse::Sse(_, Some(id))) => {
                Some(Arc::from(id.as_str()))
            }
            _ => None,
        };
        if let Some(session) = kept.session.or(given) {
            self.noted.done.send_replace(false);
            *lock(&self.noted.last) = Some(Spoken {
                uri: Arc::clone(uri),
                session,
                auth_header: kept.auth_header,
                custom_headers: kept.custom_headers,
                ended: false,
            });
        }
        answer
    }
}

/// A message's session and credentials, kept while it is sent.
struct Kept {
    session: Option<Arc<str>>,
    auth_header: Option<String>,
    custom_headers: HashMap<HeaderName, HeaderValue>,
}

impl Remembered {
    /// The session messages go in now: `Some(None)` for a server that gave none (it keeps
    /// no sessions), `None` once it is ended.
    pub(super) fn current(&self) -> Option<Option<Arc<str>>> {
        match lock(&self.noted.last).as_ref() {
            None => Some(None),
            Some(s) if s.ended => None,
            Some(s) => Some(Some(Arc::clone(&s.session))),
        }
    }

    /// Notes `session` as the one messages go in, as a message answered with it would.
    #[cfg(test)]
    pub(super) fn noting(&self, session: &str) {
        *lock(&self.noted.last) = Some(Spoken {
            uri: Arc::from(""),
            session: Arc::from(session),
            auth_header: None,
            custom_headers: HashMap::new(),
            ended: false,
        });
    }

    /// Whether there is a session to end.
    pub fn is_open(&self) -> bool {
        lock(&self.noted.last).as_ref().is_some_and(|s| !s.ended)
    }

    /// Ends the session last spoken in (a `DELETE`), unless it is ended already, or waits for
    /// the `DELETE` rmcp sent for it to come back; at most `within` either way. A server that
    /// does not end sessions, or fails to, is left as it is.
    pub async fn end(&self, within: Duration) {
        let mine = {
            let mut last = lock(&self.noted.last);
            match last.as_mut() {
                Some(s) if !s.ended => {
                    s.ended = true;
                    Some(s.clone())
                }
                Some(_) => None,
                None => return,
            }
        };
        let ending = async {
            match mine {
                Some(spoken) => {
                    let ended = self
                        .inner
                        .delete_session(spoken.uri, spoken.session, spoken.auth_header, spoken.custom_headers)
                        .await;
                    self.noted.done.send_replace(true);
                    if let Err(e) = ended {
                        tracing::debug!(error = %e, "an MCP session was not ended");
                    }
                }
                None => {
                    let _ = self.noted.done.subscribe().wait_for(|done| *done).await;
                }
            }
        };
        if tokio::time::timeout(within, ending).await.is_err() {
            tracing::debug!("an MCP session was not ended in time");
        }
    }
}

impl StreamableHttpClient for Remembering {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        // As reqwest's client does: every form of a post is the one with limits.
        let limits = StreamableHttpResponseLimits::default();
        self.post_message_with_response_limits(uri, message, session_id, auth_header, custom_headers, limits)
            .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(uri, message, session_id, auth_header, custom_headers, limits)
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let kept = self.keep(&session_id, &auth_header, &custom_headers);
        let answer = self
            .inner
            .post_message_with_response_limits(Arc::clone(&uri), message, session_id, auth_header, custom_headers, limits)
            .await;
        self.noted(&uri, kept, answer)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        let noted = {
            let mut last = lock(&self.noted.last);
            match last.as_mut().filter(|s| s.session == session_id) {
                // [`Remembered::end`] is ending it.
                Some(s) if s.ended => return Ok(()),
                Some(s) => {
                    s.ended = true;
                    true
                }
                None => false,
            }
        };
        let ended = self.inner.delete_session(uri, session_id, auth_header, custom_headers).await;
        if noted {
            self.noted.done.send_replace(true);
        }
        ended
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.inner
            .get_stream_with_max_sse_event_size(uri, session_id, last_event_id, auth_header, custom_headers, max_sse_event_size)
            .await
    }
}
