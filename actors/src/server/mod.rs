//! `toolslot serve`: the pipeline as a standalone HTTP service, with an approval console.
//!
//! actix-web runs on the same actor system as the sessions. Streams are Server-Sent Events
//! whose `data` is exactly a pipeline event of docs/CONTRACT.md. Every limit is a `[server]`
//! key; every refusal is a 4xx with a one-line JSON reason.

mod api;
mod metrics;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::middleware::{Next, from_fn};
use actix_web::{App, HttpServer, web};
use toolslot::config::Config;
use utoipa::OpenApi;

use crate::dispatcher::Dispatcher;
use crate::mcp::McpServerHandle;
pub use api::ApiError;
pub use metrics::Metrics;

/// The console page, embedded in the binary (no CDN, no build step).
pub const CONSOLE_HTML: &str = include_str!("console.html");

/// The console's login form, shown instead while the browser has no token cookie.
pub const LOGIN_HTML: &str = include_str!("login.html");

#[derive(OpenApi)]
#[openapi(
    info(title = "toolslot", description = "Governs an LLM agent's tool calls: stream a model's response in, get one result per call back."),
    paths(api::create_session, api::list_sessions, api::delete_session, api::post_round, api::answer_approval, api::answer_input, api::session_events, api::tools, api::search, api::healthz, api::metrics, api::openapi, api::console, api::mcp_servers, api::session_tools),
    components(schemas(api::ErrorBody, api::NewSession, api::SessionCreated, api::SessionList, api::SessionInfo, api::ApprovalBody, api::InputBody, api::SearchBody, api::SearchAnswer, api::SearchMatch, api::McpServers, api::McpServerInfo)),
    modifiers(&BearerAuth)
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The OpenAPI document, generated from the handlers' annotations.
pub fn openapi_json() -> String {
    ApiDoc::openapi()
        .to_pretty_json()
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// What every handler shares.
pub struct State {
    dispatcher: Arc<Dispatcher>,
    /// The MCP servers, for their states.
    mcp: Vec<McpServerHandle>,
    config: Arc<Config>,
    metrics: Arc<Metrics>,
    /// Last request and rounds run, per session.
    activity: Mutex<HashMap<String, (Instant, u64)>>,
}

impl State {
    fn touch(&self, id: &str) {
        let mut a = self.activity.lock().unwrap_or_else(|p| p.into_inner());
        a.entry(id.to_string()).or_insert((Instant::now(), 0)).0 = Instant::now();
    }

    fn forget(&self, id: &str) {
        self.activity.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    }

    fn count_round(&self, id: &str) -> Result<(), ApiError> {
        let max = self.config.server.max_rounds_per_session;
        let mut a = self.activity.lock().unwrap_or_else(|p| p.into_inner());
        let entry = a.entry(id.to_string()).or_insert((Instant::now(), 0));
        if max > 0 && entry.1 >= max {
            return Err(ApiError(
                StatusCode::TOO_MANY_REQUESTS,
                format!("session `{id}` has run its {max} rounds; open a new one"),
            ));
        }
        entry.1 += 1;
        Ok(())
    }

    /// Closes sessions idle past `server.idle_session_secs` (not while a round runs).
    fn reap(&self) {
        let secs = self.config.server.idle_session_secs;
        if secs == 0 {
            return;
        }
        let idle: Vec<String> = {
            let a = self.activity.lock().unwrap_or_else(|p| p.into_inner());
            a.iter()
                .filter(|(_, (t, _))| t.elapsed() > Duration::from_secs(secs))
                .map(|(id, _)| id.clone())
                .collect()
        };
        for id in idle {
            if !self.dispatcher.is_running(&id).unwrap_or(false) {
                tracing::info!(session = %id, "idle session closed");
                let _ = self.dispatcher.close_session(&id);
                self.forget(&id);
            }
        }
    }
}

/// The cookie the console's login sets: a browser cannot add a header to the page it loads,
/// and a token in the address would end up in its history and in logs.
pub(crate) const TOKEN_COOKIE: &str = "toolslot_token";

/// Whether the request carries the token, as a bearer header or as the console's cookie.
pub(crate) fn authenticated(req: &actix_web::HttpRequest, token: &str) -> bool {
    let header_ok = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| constant_eq(v, &format!("Bearer {token}")));
    header_ok || req.cookie(TOKEN_COOKIE).is_some_and(|c| constant_eq(c.value(), token))
}

/// Refuses requests without the token, when one is set. The console page itself and its
/// login answer anyone: the page shows a login form until the cookie is set.
async fn require_token(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let token = req
        .app_data::<web::Data<State>>()
        .map(|s| s.config.server.token.clone())
        .unwrap_or_default();
    let open = matches!((req.method().as_str(), req.path()), ("GET", "/") | ("POST", "/login"));
    if !token.is_empty() && !open && !authenticated(req.request(), &token) {
        return Err(ApiError(
            StatusCode::UNAUTHORIZED,
            "missing or wrong bearer token (Authorization: Bearer <token>)".into(),
        )
        .into());
    }
    next.call(req).await
}

/// Compares without an early exit, so the time taken says nothing about the token.
fn constant_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Runs the server until SIGTERM or SIGINT; in-flight rounds get `server.shutdown_grace_secs`
/// to finish.
///
/// # Errors
/// The bind address is unusable.
pub async fn serve(config: Arc<Config>, dispatcher: Arc<Dispatcher>, mcp: Vec<McpServerHandle>) -> std::io::Result<()> {
    let state = web::Data::new(State {
        dispatcher,
        mcp,
        config: Arc::clone(&config),
        metrics: Arc::new(Metrics::default()),
        activity: Mutex::new(HashMap::new()),
    });
    let reaper = {
        let state = state.clone();
        actix_web::rt::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(30));
            loop {
                tick.tick().await;
                state.reap();
            }
        })
    };
    let s = &config.server;
    let json_limit = s.max_json_bytes;
    let mut server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .app_data(web::JsonConfig::default().limit(json_limit).error_handler(|err, _req| {
                let status = match &err {
                    actix_web::error::JsonPayloadError::Overflow { .. }
                    | actix_web::error::JsonPayloadError::OverflowKnownLength { .. } => StatusCode::PAYLOAD_TOO_LARGE,
                    actix_web::error::JsonPayloadError::ContentType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    _ => StatusCode::BAD_REQUEST,
                };
                ApiError(status, format!("invalid JSON body: {err}")).into()
            }))
            .app_data(
                web::PathConfig::default()
                    .error_handler(|err, _req| ApiError(StatusCode::NOT_FOUND, format!("invalid path: {err}")).into()),
            )
            .app_data(
                web::QueryConfig::default()
                    .error_handler(|err, _req| ApiError(StatusCode::BAD_REQUEST, format!("invalid query: {err}")).into()),
            )
            .app_data(web::PayloadConfig::default().limit(json_limit))
            .wrap(from_fn(require_token))
            .route("/", web::get().to(api::console))
            .route("/login", web::post().to(api::login))
            .route("/healthz", web::get().to(api::healthz))
            .route("/metrics", web::get().to(api::metrics))
            .route("/v1/openapi.json", web::get().to(api::openapi))
            .route("/v1/sessions", web::post().to(api::create_session))
            .route("/v1/sessions", web::get().to(api::list_sessions))
            .route("/v1/sessions/{id}", web::delete().to(api::delete_session))
            .route("/v1/sessions/{id}/rounds", web::post().to(api::post_round))
            .route("/v1/sessions/{id}/approvals/{index}", web::post().to(api::answer_approval))
            .route("/v1/sessions/{id}/inputs/{n}", web::post().to(api::answer_input))
            .route("/v1/sessions/{id}/events", web::get().to(api::session_events))
            .route("/v1/tools", web::get().to(api::tools))
            .route("/v1/mcp/servers", web::get().to(api::mcp_servers))
            .route("/v1/sessions/{id}/tools", web::get().to(api::session_tools))
            .route("/v1/tools/search", web::post().to(api::search))
            .default_service(web::to(|| async {
                Err::<actix_web::HttpResponse, _>(ApiError(StatusCode::NOT_FOUND, "no such endpoint (see /v1/openapi.json)".into()))
            }))
    })
    .client_request_timeout(Duration::from_millis(s.client_request_timeout_ms))
    .shutdown_timeout(s.shutdown_grace_secs);
    if s.http_workers > 0 {
        server = server.workers(s.http_workers);
    }
    let server = server.bind(&s.bind)?;
    for addr in server.addrs() {
        // The one line scripts wait for.
        eprintln!("toolslot: listening on http://{addr}");
    }
    let result = server.run().await;
    reaper.abort();
    result
}
