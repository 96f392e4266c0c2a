//! The HTTP handlers, documented for the OpenAPI document.

use std::sync::Arc;
use std::time::Instant;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, ResponseError, web};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use toolslot::config::ApprovalMode;
use toolslot::event::PipelineEvent;
use toolslot::registry::CatalogFormat;
use toolslot::results::{ResultFormat, SentNames};
use toolslot::stream::Dialect;
use utoipa::ToSchema;

use super::State;
use crate::host::dispatcher::DispatchError;
use crate::pipeline::chain::RoundInput;
use crate::pipeline::session::SessionOptions;
use crate::pipeline::stages::approval::HostDecision;

/// A refused request: a status and a one-line reason.
#[derive(Debug)]
pub struct ApiError(pub StatusCode, pub String);

/// The body of every error answer.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    /// What is wrong, in one line.
    pub error: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.1)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.0
    }
    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.0).json(ErrorBody { error: self.1.clone() })
    }
}

impl From<DispatchError> for ApiError {
    fn from(e: DispatchError) -> Self {
        let status = match e {
            DispatchError::UnknownSession(_) | DispatchError::NotWaiting { .. } | DispatchError::InputNotWaiting { .. } => {
                StatusCode::NOT_FOUND
            }
            DispatchError::BadInput(_) | DispatchError::NeedsRequest { .. } => StatusCode::BAD_REQUEST,
            DispatchError::RoundRunning(_) | DispatchError::LeasedElsewhere(_) => StatusCode::CONFLICT,
            DispatchError::WorkspaceRefused(_) => StatusCode::FORBIDDEN,
            DispatchError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
            DispatchError::TooManySessions(_) => StatusCode::TOO_MANY_REQUESTS,
            DispatchError::Gone(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        ApiError(status, e.to_string())
    }
}

fn bad(reason: impl Into<String>) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, reason.into())
}

/// `POST /v1/sessions` body (every field optional).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewSession {
    /// Workspace root for the session's file tools (must exist).
    pub workspace: Option<String>,
    /// `read-only`, `ask`, `auto-edit` or `full-auto`.
    pub approval_mode: Option<String>,
    /// `anthropic`, `openai-chat`, `openai-responses` or `gemini` (default: detected).
    pub dialect: Option<String>,
}

/// A new session.
#[derive(Serialize, ToSchema)]
pub struct SessionCreated {
    /// The session's id (128 random bits, hex).
    pub session_id: String,
}

/// The open sessions.
#[derive(Serialize, ToSchema)]
pub struct SessionList {
    /// Their ids.
    pub sessions: Vec<SessionInfo>,
}

/// One open session.
#[derive(Serialize, ToSchema)]
pub struct SessionInfo {
    /// Id.
    pub session_id: String,
    /// Whether a round is running.
    pub running: bool,
}

/// `POST /v1/sessions/{id}/approvals/{index}` body.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalBody {
    /// `approve`, `approve_for_session`, `approve_for_project`, `reject` or
    /// `reject_for_session`.
    pub decision: String,
    /// The `request` of the `approval_required` event answered: when given, the answer
    /// reaches that question only (404 once it has ended), never a later one about a call
    /// with the same index.
    pub request: Option<u64>,
}

/// `POST /v1/sessions/{id}/inputs/{n}` body.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InputBody {
    /// `accept` (with `content`), `decline` or `cancel`.
    pub action: String,
    /// The answer, an object matching the requested schema (with `accept` only).
    #[schema(value_type = Option<Object>)]
    pub content: Option<serde_json::Value>,
}

/// `POST /v1/tools/search` body.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchBody {
    /// What the agent wants to do.
    pub query: String,
    /// How many matches (default `search.top_n`).
    pub top: Option<usize>,
}

/// One search match.
#[derive(Serialize, ToSchema)]
pub struct SearchMatch {
    /// Tool name.
    pub name: String,
    /// Score (higher is better).
    pub score: f64,
    /// First sentence of the description.
    pub summary: String,
}

/// Search matches.
#[derive(Serialize, ToSchema)]
pub struct SearchAnswer {
    /// The query.
    pub query: String,
    /// Best first.
    pub results: Vec<SearchMatch>,
}

/// `?dialect=` of a round.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RoundQuery {
    /// The round's dialect, overriding the session's.
    pub dialect: Option<String>,
    /// Also give each `round_complete` the round's results as the provider's messages, in
    /// `messages`: anthropic, openai-chat, openai-responses or gemini.
    pub format: Option<String>,
}

/// `?format=`'s result format, when one is asked for.
pub(super) fn parse_result_format(f: Option<&str>) -> Result<Option<ResultFormat>, ApiError> {
    f.map(|f| f.parse::<ResultFormat>().map_err(|e| bad(e.to_string()))).transpose()
}

/// `?format=` of the catalog.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ToolsQuery {
    /// `anthropic` (default) or `openai`.
    pub format: Option<String>,
}

fn parse_dialect(d: Option<&str>) -> Result<Option<Dialect>, ApiError> {
    d.map(|d| d.parse::<Dialect>().map_err(bad)).transpose()
}

/// Opens a session.
#[utoipa::path(post, path = "/v1/sessions", request_body(content = Option<NewSession>, content_type = "application/json"),
    responses((status = 200, body = SessionCreated), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn create_session(state: web::Data<State>, http: HttpRequest, body: web::Bytes) -> Result<HttpResponse, ApiError> {
    let empty = body.iter().all(u8::is_ascii_whitespace);
    require_json(&http, empty)?;
    let req: NewSession = if empty {
        NewSession::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| bad(format!("invalid JSON body: {e}")))?
    };
    let mode = req
        .approval_mode
        .as_deref()
        .map(str::parse::<ApprovalMode>)
        .transpose()
        .map_err(bad)?;
    let dialect = parse_dialect(req.dialect.as_deref())?;
    let asked = req.workspace.as_deref().map(std::path::Path::new);
    let workspace = crate::host::workspace::admit(asked, &state.config.server.workspace_root).map_err(bad)?;
    let id = state.dispatcher.open_session_limited(
        SessionOptions {
            workspace,
            approval_mode: mode,
            dialect,
            policy: None,
        },
        state.config.server.max_sessions,
    )?;
    state.opened(&id);
    Ok(HttpResponse::Ok().json(SessionCreated { session_id: id }))
}

/// Refuses a body that does not say it is JSON (415), as `web::Json` does for the other JSON
/// endpoints. A form or `text/plain` body is what a page on another site can send without
/// asking; a JSON content type it cannot. A request with no body and no content type is
/// accepted (`curl -X POST …/v1/sessions`).
fn require_json(req: &HttpRequest, empty: bool) -> Result<(), ApiError> {
    let content_type = req.headers().get("content-type").map(|v| v.to_str().unwrap_or(""));
    let json = content_type.is_some_and(|ct| {
        let essence = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
    });
    if json || (content_type.is_none() && empty) {
        return Ok(());
    }
    Err(ApiError(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        format!(
            "the body must be JSON with Content-Type: application/json (got {})",
            content_type.map_or("none".to_string(), |c| format!("`{c}`"))
        ),
    ))
}

/// The MCP servers and where each is in its life.
#[derive(Serialize, ToSchema)]
pub struct McpServers {
    /// In configuration order.
    pub servers: Vec<McpServerInfo>,
}

/// One MCP server.
#[derive(Serialize, ToSchema)]
pub struct McpServerInfo {
    /// Its name (the prefix of its tools' names).
    pub name: String,
    /// `idle` (not started; starts on first use), `starting`, `ready` or `failed`.
    pub state: String,
    /// Why it failed, for `failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Lists the MCP servers with their states.
#[utoipa::path(get, path = "/v1/mcp/servers", responses((status = 200, body = McpServers)))]
pub async fn mcp_servers(state: web::Data<State>) -> HttpResponse {
    use crate::sources::mcp::ServerState;
    let mut servers = Vec::with_capacity(state.mcp.len());
    for handle in &state.mcp {
        let (st, reason) = match handle.status().await {
            ServerState::Idle => ("idle", None),
            ServerState::Starting => ("starting", None),
            ServerState::Ready => ("ready", None),
            ServerState::Failed(r) => ("failed", Some(r)),
        };
        servers.push(McpServerInfo {
            name: handle.name().to_string(),
            state: st.to_string(),
            reason,
        });
    }
    HttpResponse::Ok().json(McpServers { servers })
}

/// Lists the open sessions.
#[utoipa::path(get, path = "/v1/sessions", responses((status = 200, body = SessionList)))]
pub async fn list_sessions(state: web::Data<State>) -> HttpResponse {
    let sessions = state
        .dispatcher
        .session_ids()
        .into_iter()
        .map(|id| SessionInfo {
            running: state.dispatcher.is_running(&id).unwrap_or(false),
            session_id: id,
        })
        .collect();
    HttpResponse::Ok().json(SessionList { sessions })
}

/// Closes a session.
#[utoipa::path(delete, path = "/v1/sessions/{id}", params(("id" = String, Path, description = "Session id")),
    responses((status = 204), (status = 404, body = ErrorBody)))]
pub async fn delete_session(state: web::Data<State>, id: web::Path<String>) -> Result<HttpResponse, ApiError> {
    // A durable session known only to the session store is taken over, then closed with it.
    state.dispatcher.adopt(&id).await?;
    let sealing = state.dispatcher.close_session(&id)?;
    state.forget(&id);
    // Answered once the ledger's closing record is on disk (a failure is logged: the session
    // is closed all the same).
    let _ = sealing.wait().await;
    Ok(HttpResponse::NoContent().finish())
}

/// Runs a round: the body is the provider's raw SSE response, read as it arrives; the answer
/// is an SSE stream of pipeline events ending with `round_complete`.
#[utoipa::path(post, path = "/v1/sessions/{id}/rounds", params(("id" = String, Path, description = "Session id"), RoundQuery),
    request_body(content = String, content_type = "text/event-stream"),
    responses((status = 200, content_type = "text/event-stream", body = String), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn post_round(
    state: web::Data<State>,
    req: HttpRequest,
    id: web::Path<String>,
    query: web::Query<RoundQuery>,
    mut payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let dialect = parse_dialect(query.dialect.as_deref())?;
    let mut results_format = parse_result_format(query.format.as_deref())?.map(|f| (f, SentNames::default()));
    // A durable session known only to the session store is taken over here.
    state.dispatcher.adopt(&id).await?;
    let limit = state.config.server.max_body_bytes;
    let declared = req
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(ApiError(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("round body over the {limit}-byte limit"),
        ));
    }
    state.count_round(&id)?;
    // The request body cannot leave this HTTP worker's thread; a local task forwards it to
    // the session's worker as it arrives, so calls start while the model still streams.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(16);
    let mut rx = rx;
    let stream = Box::pin(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)));
    let (number, events) = state.dispatcher.submit_numbered(&id, RoundInput::Bytes(stream), dialect)?;
    state.touch(&id);
    actix_web::rt::spawn(async move {
        let mut seen = 0usize;
        while let Some(chunk) = payload.next().await {
            let item = match chunk {
                Ok(b) => {
                    seen += b.len();
                    if seen > limit {
                        Err(std::io::Error::other(format!(
                            "round body over the {limit}-byte limit; the rest was not read"
                        )))
                    } else {
                        Ok(b.to_vec())
                    }
                }
                Err(e) => Err(std::io::Error::other(e.to_string())),
            };
            let stop = item.is_err();
            if tx.send(item).await.is_err() || stop {
                break;
            }
        }
    });
    let started = Instant::now();
    let metrics = Arc::clone(&state.metrics);
    let mut events = events;
    // When each approval request went out, to measure how long the host took to answer.
    let mut asked: std::collections::HashMap<usize, Instant> = std::collections::HashMap::new();
    let body = futures::stream::poll_fn(move |cx| events.poll_recv(cx)).map(move |event: PipelineEvent| {
        metrics.observe(&event);
        match &event {
            PipelineEvent::ApprovalRequired { index, .. } => {
                asked.insert(*index, Instant::now());
            }
            PipelineEvent::ApprovalDecided { index, .. } => {
                if let Some(t) = asked.remove(index) {
                    metrics.approval_waited(t.elapsed());
                }
            }
            _ => {}
        }
        if matches!(event, PipelineEvent::RoundComplete { .. }) {
            metrics.round_took(started.elapsed());
        }
        let json = match &mut results_format {
            Some((format, names)) => toolslot::results::event_with_messages(&event, *format, names).map(|v| v.to_string()),
            None => serde_json::to_string(&event),
        }
        .unwrap_or_else(|e| format!("{{\"type\":\"notice\",\"kind\":\"stream_error\",\"message\":\"{e}\"}}"));
        Ok::<_, actix_web::Error>(web::Bytes::from(format!("data: {json}\n\n")))
    });
    // A client that goes away before the end cancels the round (server.cancel_on_disconnect).
    let server = &state.config.server;
    let abandon = server.cancel_on_disconnect.then(|| super::disconnect::Abandon {
        dispatcher: Arc::clone(&state.dispatcher),
        watchers: Arc::clone(&state.watchers),
        session: id.to_string(),
        number,
        grace: std::time::Duration::from_millis(server.disconnect_grace_ms),
        recheck: std::time::Duration::from_millis(server.stream_keepalive_ms),
    });
    let keepalive = std::time::Duration::from_millis(server.stream_keepalive_ms);
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("cache-control", "no-cache"))
        .streaming(super::disconnect::RoundStream::new(body, keepalive, abandon)))
}

/// Answers a waiting approval request.
#[utoipa::path(post, path = "/v1/sessions/{id}/approvals/{index}", params(("id" = String, Path, description = "Session id"), ("index" = usize, Path, description = "The call's index")),
    request_body = ApprovalBody, responses((status = 204), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)))]
pub async fn answer_approval(
    state: web::Data<State>,
    path: web::Path<(String, usize)>,
    body: web::Json<ApprovalBody>,
) -> Result<HttpResponse, ApiError> {
    let (id, index) = path.into_inner();
    let Some(decision) = HostDecision::parse(&body.decision) else {
        return Err(bad(format!(
            "unknown decision `{}` (expected {})",
            body.decision,
            crate::pipeline::stages::approval::HOST_DECISIONS
        )));
    };
    state.dispatcher.answer_request(&id, index, body.request, decision).await?;
    state.touch(&id);
    Ok(HttpResponse::NoContent().finish())
}

/// Answers a server's question (an `input_required` event).
#[utoipa::path(post, path = "/v1/sessions/{id}/inputs/{n}", params(("id" = String, Path, description = "Session id"), ("n" = u64, Path, description = "The input request's number")),
    request_body = InputBody, responses((status = 204), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)))]
pub async fn answer_input(
    state: web::Data<State>,
    path: web::Path<(String, u64)>,
    body: web::Json<InputBody>,
) -> Result<HttpResponse, ApiError> {
    use toolslot::tool::InputAnswer;
    let (id, n) = path.into_inner();
    let body = body.into_inner();
    let answer = match (body.action.as_str(), body.content) {
        ("accept", Some(content)) => InputAnswer::Accept(content),
        ("accept", None) => return Err(bad("`accept` needs `content`, an object matching the requested schema")),
        ("decline", None) => InputAnswer::Decline,
        ("cancel", None) => InputAnswer::Cancel,
        ("decline" | "cancel", Some(_)) => return Err(bad("`content` goes with `accept` only")),
        (other, _) => return Err(bad(format!("unknown action `{other}` (expected accept, decline or cancel)"))),
    };
    state.dispatcher.answer_input(&id, n, answer)?;
    state.touch(&id);
    Ok(HttpResponse::NoContent().finish())
}

/// The session's live events (for UIs), as SSE.
#[utoipa::path(get, path = "/v1/sessions/{id}/events", params(("id" = String, Path, description = "Session id")),
    responses((status = 200, content_type = "text/event-stream", body = String), (status = 404, body = ErrorBody)))]
pub async fn session_events(state: web::Data<State>, id: web::Path<String>) -> Result<HttpResponse, ApiError> {
    state.dispatcher.adopt(&id).await?;
    let rx = state.dispatcher.subscribe(&id)?;
    // Counted while the stream lives: a reader keeps a round whose own client left running.
    let watching = state.watchers.watch(&id);
    let stream = futures::stream::unfold((rx, watching), |(mut rx, watching)| async move {
        loop {
            match rx.recv().await {
                Ok(e) => {
                    let json = serde_json::to_string(&e).unwrap_or_default();
                    return Some((
                        Ok::<_, actix_web::Error>(web::Bytes::from(format!("data: {json}\n\n"))),
                        (rx, watching),
                    ));
                }
                // A slow watcher lost some events; it keeps watching.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    // A comment first, so clients see the stream open at once; keep-alive comments after, so
    // a reader that left is noticed (and stops keeping abandoned rounds running).
    let opening = futures::stream::iter([Ok::<_, actix_web::Error>(web::Bytes::from_static(b": watching\n\n"))]);
    let keepalive = std::time::Duration::from_millis(state.config.server.stream_keepalive_ms);
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("cache-control", "no-cache"))
        .streaming(super::disconnect::RoundStream::new(
            Box::pin(opening.chain(stream)),
            keepalive,
            None,
        )))
}

/// The model-facing catalog.
#[utoipa::path(get, path = "/v1/tools", params(ToolsQuery), responses((status = 200, content_type = "application/json", body = Vec<Object>), (status = 400, body = ErrorBody)))]
pub async fn tools(state: web::Data<State>, query: web::Query<ToolsQuery>) -> Result<HttpResponse, ApiError> {
    let format: CatalogFormat = query.format.as_deref().unwrap_or("anthropic").parse().map_err(bad)?;
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .body(state.dispatcher.registry().catalog().render(format).to_string()))
}

/// One session's catalog: the resident tools, then what it activated with tool_search and
/// what servers added since, in the order they became visible. This is what the host sends
/// with the session's next request; `X-Catalog-Generation` counts the entries after the
/// resident block, so a host can tell when it grew.
#[utoipa::path(get, path = "/v1/sessions/{id}/tools", params(("id" = String, Path, description = "Session id"), ToolsQuery),
    responses((status = 200, content_type = "application/json", body = Vec<Object>), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn session_tools(
    state: web::Data<State>,
    id: web::Path<String>,
    query: web::Query<ToolsQuery>,
) -> Result<HttpResponse, ApiError> {
    let format: CatalogFormat = query.format.as_deref().unwrap_or("anthropic").parse().map_err(bad)?;
    state.dispatcher.adopt(&id).await?;
    let catalog = state.dispatcher.catalog(&id)?;
    state.touch(&id);
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .insert_header(("X-Catalog-Generation", catalog.generation().to_string()))
        .body(catalog.render(format).to_string()))
}

/// Ranks deferred tools for a query, as tool_search does.
#[utoipa::path(post, path = "/v1/tools/search", request_body = SearchBody, responses((status = 200, body = SearchAnswer), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)))]
pub async fn search(state: web::Data<State>, body: web::Json<SearchBody>) -> Result<HttpResponse, ApiError> {
    if let Some(why) = toolslot::registry::query_too_long(&body.query, state.config.search.max_query_chars) {
        return Err(bad(why));
    }
    let top = body
        .top
        .unwrap_or(state.config.search.top_n)
        .clamp(1, state.config.search.max_results.max(1));
    let results = state
        .dispatcher
        .registry()
        .search_index()
        .map(|i| i.search(&body.query, top))
        .unwrap_or_default()
        .into_iter()
        .map(|h| SearchMatch {
            name: h.name,
            score: h.score,
            summary: h.summary,
        })
        .collect();
    Ok(HttpResponse::Ok().json(SearchAnswer {
        query: body.query.clone(),
        results,
    }))
}

/// Liveness.
#[utoipa::path(get, path = "/healthz", responses((status = 200, content_type = "text/plain", body = String)))]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain").body("ok")
}

/// Prometheus metrics.
#[utoipa::path(get, path = "/metrics", responses((status = 200, content_type = "text/plain", body = String)))]
pub async fn metrics(state: web::Data<State>) -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain; version=0.0.4").body(format!(
        "{}# TYPE toolslot_server_tracked_sessions gauge\ntoolslot_server_tracked_sessions {}\n",
        state.metrics.render(state.dispatcher.session_count()),
        state.tracked()
    ))
}

/// This API's OpenAPI document.
#[utoipa::path(get, path = "/v1/openapi.json", responses((status = 200, content_type = "application/json", body = Object)))]
pub async fn openapi() -> HttpResponse {
    HttpResponse::Ok().content_type("application/json").body(super::openapi_json())
}

/// The approval console, or its login form while the browser has no token cookie.
#[utoipa::path(get, path = "/", responses((status = 200, content_type = "text/html", body = String)))]
pub async fn console(req: HttpRequest, state: web::Data<State>) -> HttpResponse {
    let token = &state.config.server.token;
    let page = if token.is_empty() || super::guard::presented(&req, token) == super::guard::Presented::Right {
        super::CONSOLE_HTML
    } else {
        super::LOGIN_HTML
    };
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .insert_header(("Cache-Control", "no-store"))
        .body(page)
}

/// The console's login form's target.
#[derive(Debug, Deserialize)]
pub struct Login {
    token: String,
}

/// Sets the token cookie when the form's token is right (HttpOnly: no script reads it;
/// SameSite=Strict: no other site's page sends it), then back to the console.
pub async fn login(req: HttpRequest, form: web::Form<Login>, state: web::Data<State>) -> Result<HttpResponse, ApiError> {
    let token = &state.config.server.token;
    let ip = req.peer_addr().map(|a| a.ip());
    if let Some(secs) = state.admission.throttled(ip) {
        return Err(state.admission.too_many(secs));
    }
    if token.is_empty() || !super::guard::constant_eq(&form.token, token) {
        state.admission.failed(ip);
        let page = super::LOGIN_HTML.replace("<!--message-->", "<p class=\"error\">wrong token</p>");
        return Ok(HttpResponse::Unauthorized().content_type("text/html; charset=utf-8").body(page));
    }
    let cookie = actix_web::cookie::Cookie::build(super::guard::TOKEN_COOKIE, token.clone())
        .path("/")
        .http_only(true)
        .same_site(actix_web::cookie::SameSite::Strict)
        .finish();
    Ok(HttpResponse::SeeOther().insert_header(("Location", "/")).cookie(cookie).finish())
}
