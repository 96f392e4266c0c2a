//! actix-web in front of rmcp's Streamable HTTP server.
//!
//! rmcp serves Streamable HTTP as a tower service over `http` 1 types; `toolslot serve` is
//! actix-web, whose admission rules (token, `Host`, `Origin`) must hold for `/mcp` as for every
//! other endpoint. So the server admits a request as usual, and this file hands it to rmcp
//! whole and sends rmcp's answer back: whole, with its length, when rmcp knows it (a JSON
//! answer), else streamed (an SSE stream stays open as long as rmcp writes to it). rmcp's own
//! `Host` check is off: the server's is the one rule set.
//!
//! A client that hangs up must cancel its call: on 2026-07-28 closing the request is the only
//! cancel there is. rmcp cancels the call when its request future is dropped, as hyper does on
//! a disconnect; actix-web neither drops a pending handler nor tells it the client left. So the
//! server keeps a duplicate of each connection's socket ([`on_connect`]), and while rmcp has not
//! answered, the handler peeks at it every `server.stream_keepalive_ms`: end of stream means
//! the client is gone, and the request is dropped. Once answering, the SSE keep-alive comments
//! are the writes through which actix itself notices.

use std::any::Any;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::Extensions;
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use http_body::Body as _;
use http_body_util::{BodyDataStream, BodyExt as _, Full};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use toolslot::config::Config;

use super::HttpSessions;
use crate::front::mcp_server::McpFront;

/// The MCP endpoint of a running server.
pub type McpEndpoint = StreamableHttpService<McpFront, LocalSessionManager>;

/// The endpoint serving `sessions`, with `config`'s body limit.
pub fn endpoint(sessions: Arc<HttpSessions>, config: &Config) -> McpEndpoint {
    let http = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_max_request_body_bytes(config.server.max_json_bytes)
        // A call whose only message is its answer is answered as one JSON body rather than an
        // SSE stream of one event; one that reports progress or asks first still streams.
        .with_json_response(true)
        // actix learns that a client left only when a write to it fails: the keep-alive
        // comment is that write, so a client that cancels by hanging up (2026-07-28 has no
        // cancel notification) has its call cancelled within `server.stream_keepalive_ms`.
        .with_sse_keep_alive(Some(Duration::from_millis(config.server.stream_keepalive_ms.max(1))));
    StreamableHttpService::new(
        move || Ok(McpFront::over_http(Arc::clone(&sessions))),
        Arc::new(LocalSessionManager::default()),
        http,
    )
}

/// A duplicate of a connection's socket, closed with the connection's data.
struct PeerSocket(OwnedFd);

/// Keeps a duplicate of each new connection's socket (`HttpServer::on_connect`).
pub fn on_connect(connection: &dyn Any, data: &mut Extensions) {
    if let Some(tcp) = connection.downcast_ref::<actix_web::rt::net::TcpStream>()
        && let Ok(fd) = tcp.as_fd().try_clone_to_owned()
    {
        data.insert(PeerSocket(fd));
    }
}

/// Whether the client closed its side of the connection (end of stream, or an error other than
/// "nothing to read yet"). Unread bytes (a pipelined request) are left where they are.
fn hung_up(socket: &PeerSocket) -> bool {
    let mut byte = 0u8;
    // SAFETY: one byte into a live local buffer, from a descriptor this value owns.
    let n = unsafe { libc::recv(socket.0.as_raw_fd(), (&raw mut byte).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
    if n == 0 {
        return true;
    }
    n < 0 && {
        let e = std::io::Error::last_os_error().raw_os_error();
        !matches!(e, Some(libc::EAGAIN | libc::EINTR)) && e != Some(libc::EWOULDBLOCK)
    }
}

/// Resolves once the client of `req` has hung up; never, when its socket is unknown.
async fn client_gone(req: &HttpRequest, every: Duration) {
    let Some(socket) = req.conn_data::<PeerSocket>() else {
        return std::future::pending().await;
    };
    // The first look one period from now: a request answered sooner (most) never looks.
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        tick.tick().await;
        if hung_up(socket) {
            return;
        }
    }
}

/// Hands an admitted request to the endpoint and streams its answer back; a client that hangs
/// up before the answer starts has its request dropped (and so its call cancelled).
pub async fn handle(endpoint: &McpEndpoint, req: &HttpRequest, body: web::Bytes, watch_every: Duration) -> HttpResponse {
    let mut builder = http::Request::builder().method(req.method().as_str()).uri(req.uri().to_string());
    for (name, value) in req.headers() {
        builder = builder.header(name.as_str(), value.as_bytes());
    }
    let sent = body.clone();
    let request = match builder.body(Full::new(body)) {
        Ok(request) => request,
        Err(e) => {
            return HttpResponse::BadRequest().json(serde_json::json!({ "error": format!("the request cannot be read as MCP: {e}") }));
        }
    };
    let answer = tokio::select! {
        answer = endpoint.handle(request) => answer,
        () = client_gone(req, watch_every) => {
            tracing::debug!("an MCP client hung up before its answer; its request is dropped");
            return HttpResponse::new(StatusCode::NO_CONTENT);
        }
    };
    let (head, body) = answer.into_parts();
    let mut status = StatusCode::from_u16(head.status.as_u16()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    // rmcp answers an ended session's DELETE with 202; the SDKs read only 200 and 204 as
    // "ended" (the Python SDK logs a failure otherwise), and nothing is left pending here.
    if req.method() == actix_web::http::Method::DELETE && status == StatusCode::ACCEPTED {
        status = StatusCode::NO_CONTENT;
    }
    let mut response = HttpResponse::build(status);
    for (name, value) in &head.headers {
        // actix frames the body itself.
        if name != http::header::CONTENT_LENGTH && name != http::header::TRANSFER_ENCODING {
            response.append_header((name.as_str(), value.as_bytes()));
        }
    }
    // A body of known length (a JSON answer, an error, an empty 202) is whole already: sent
    // with its length, it costs actix no stream to poll and the client no chunks to join. An
    // SSE stream has none and streams.
    if body.size_hint().exact().is_some() {
        let whole = match body.collect().await {
            Ok(whole) => whole.to_bytes(),
            Err(never) => match never {},
        };
        // rmcp answers a body it cannot read as a client message with 415 and serde's words;
        // the client sent the right media type and needs the JSON-RPC error.
        if status == StatusCode::UNSUPPORTED_MEDIA_TYPE && whole.starts_with(b"fail to deserialize request body") {
            return HttpResponse::BadRequest().json(super::super::malformed::unreadable_body(&sent));
        }
        return response.body(whole);
    }
    response.streaming(BodyDataStream::new(body))
}
