//! `toolslot serve`: the pipeline as a standalone HTTP service, with an approval console.
//!
//! actix-web runs on the same actor system as the sessions. Streams are Server-Sent Events
//! whose `data` is exactly a pipeline event of docs/CONTRACT.md. Every limit is a `[server]`
//! key; every refusal is a 4xx with a one-line JSON reason.

mod api;
mod approvals;
mod disconnect;
mod guard;
mod metrics;
mod rounds;
mod trace_context;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::http::StatusCode;
use actix_web::middleware::from_fn;
use actix_web::{App, HttpServer, web};
use toolslot::config::Config;
use utoipa::OpenApi;

use crate::front::mcp_server::http::bridge::McpEndpoint;
use crate::host::dispatcher::Dispatcher;
use crate::sources::mcp::McpServerHandle;
pub use api::ApiError;
pub use guard::Admission;
pub use metrics::Metrics;

/// The console page, embedded in the binary (no CDN, no build step).
pub const CONSOLE_HTML: &str = include_str!("console.html");

/// The console's login form, shown instead while the browser has no token cookie.
pub const LOGIN_HTML: &str = include_str!("login.html");

#[derive(OpenApi)]
#[openapi(
    info(title = "toolslot", description = "Governs an LLM agent's tool calls: stream a model's response in, get one result per call back."),
    paths(api::create_session, api::list_sessions, api::delete_session, api::post_round, api::answer_approval, api::answer_input, api::session_events, api::tools, api::search, api::healthz, api::metrics, api::openapi, api::console, api::mcp_servers, api::session_tools, rounds::last_round, approvals::session_pending, approvals::all_pending, approvals::remembered, approvals::revoke_all, approvals::revoke_one),
    components(schemas(api::ErrorBody, api::NewSession, api::SessionCreated, api::SessionList, api::SessionInfo, api::ApprovalBody, api::InputBody, api::SearchBody, api::SearchAnswer, api::SearchMatch, api::McpServers, api::McpServerInfo, approvals::PendingApproval, approvals::PendingList, approvals::RememberedList, approvals::Revoked)),
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
    /// Last request and rounds run, per open session. Only sessions that exist get an entry:
    /// a request naming an unknown id must leave nothing behind.
    activity: Mutex<HashMap<String, (Instant, u64)>>,
    /// Host, Origin, token and wrong-token rules.
    admission: Admission,
    /// Who reads each session's live events (they keep a round whose client left running).
    watchers: Arc<disconnect::Watchers>,
    /// MCP's Streamable HTTP at `/mcp`, over the same dispatcher.
    mcp_endpoint: McpEndpoint,
    /// The sessions of `/mcp`'s clients, reaped with the others.
    mcp_sessions: Arc<crate::front::mcp_server::http::HttpSessions>,
}

impl State {
    fn activity(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, u64)>> {
        self.activity.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a session the server opened.
    fn opened(&self, id: &str) {
        self.activity().insert(id.to_string(), (Instant::now(), 0));
    }

    /// Records a session taken over from the session store (its idle time counts from now),
    /// unless it is tracked already.
    fn adopted(&self, id: &str) {
        self.activity().entry(id.to_string()).or_insert((Instant::now(), 0)).0 = Instant::now();
    }

    /// Marks a request to a session; an id without an entry is left without one.
    fn touch(&self, id: &str) {
        if let Some(entry) = self.activity().get_mut(id) {
            entry.0 = Instant::now();
        }
    }

    fn forget(&self, id: &str) {
        self.activity().remove(id);
    }

    /// How many sessions the server keeps activity for (a gauge in /metrics).
    fn tracked(&self) -> usize {
        self.activity().len()
    }

    fn count_round(&self, id: &str) -> Result<(), ApiError> {
        let max = self.config.server.max_rounds_per_session;
        // A session the dispatcher has but the server did not open (a sub-agent's) is tracked
        // from its first round; an id nobody opened is refused before anything is recorded.
        let known = self.dispatcher.is_running(id).map(|_| ()).map_err(ApiError::from);
        let mut a = self.activity();
        if !a.contains_key(id) {
            known?;
        }
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

    /// Closes sessions idle past `server.idle_session_secs` (not while a round runs), and
    /// forgets what belongs to sessions closed otherwise and to wrong tokens of past minutes.
    fn reap(&self) {
        self.admission.forget_old_failures();
        self.mcp_sessions.reap();
        self.activity().retain(|id, _| self.dispatcher.is_running(id).is_ok());
        let secs = self.config.server.idle_session_secs;
        if secs == 0 {
            return;
        }
        let idle: Vec<String> = {
            let a = self.activity();
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

/// Why the server refuses to start with this configuration: a bind address another machine
/// can reach, with no token. Anyone on the network could then open a session and run
/// commands.
///
/// # Errors
/// A one-line reason.
pub fn check_bind(cfg: &toolslot::config::ServerConfig) -> Result<(), String> {
    use std::net::ToSocketAddrs;
    let addrs: Vec<std::net::SocketAddr> = cfg
        .bind
        .to_socket_addrs()
        .map_err(|e| format!("server.bind `{}` is not an address: {e}", cfg.bind))?
        .collect();
    if cfg.token.is_empty() && addrs.iter().any(|a| !a.ip().is_loopback()) {
        return Err(format!(
            "server.bind `{}` is reachable from other machines and server.token is empty; set a token (or bind to 127.0.0.1)",
            cfg.bind
        ));
    }
    Ok(())
}

/// Runs the server until SIGTERM or SIGINT; in-flight rounds get `server.shutdown_grace_secs`
/// to finish.
///
/// # Errors
/// The bind address is unusable.
pub async fn serve(config: Arc<Config>, dispatcher: Arc<Dispatcher>, mcp: Vec<McpServerHandle>) -> std::io::Result<()> {
    check_bind(&config.server).map_err(std::io::Error::other)?;
    // Bound here rather than by actix, so the admission rules know the real addresses (port 0
    // becomes the port the system chose).
    let listeners = bind_all(&config.server.bind)?;
    let bound = listeners.iter().filter_map(|l| l.local_addr().ok()).collect();
    let mcp_sessions = crate::front::mcp_server::http::HttpSessions::new(Arc::clone(&dispatcher), Arc::clone(&config));
    let mcp_endpoint = crate::front::mcp_server::http::bridge::endpoint(Arc::clone(&mcp_sessions), &config);
    let state = web::Data::new(State {
        mcp_endpoint,
        mcp_sessions,
        dispatcher,
        mcp,
        config: Arc::clone(&config),
        metrics: Arc::new(Metrics::default()),
        activity: Mutex::new(HashMap::new()),
        admission: Admission::new(&config.server, bound),
        watchers: Arc::default(),
    });
    let reaper = {
        let state = state.clone();
        actix_web::rt::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(state.config.server.reap_interval_secs.max(1)));
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
            .wrap(from_fn(guard::admit))
            .wrap(from_fn(trace_context::span))
            // Routes are tried in order, each dynamic one a regular expression: the endpoints
            // a call goes through (an MCP request, a round) come first, so a call does not pay
            // for matching the rest (3% of an MCP call's CPU when `/mcp` came last). No other
            // pattern matches their paths, so the order changes nothing else.
            .route("/mcp", web::route().to(mcp_http))
            .route("/v1/sessions/{id}/rounds", web::post().to(api::post_round))
            .route("/", web::get().to(api::console))
            .route("/login", web::post().to(api::login))
            .route("/healthz", web::get().to(api::healthz))
            .route("/metrics", web::get().to(api::metrics))
            .route("/v1/openapi.json", web::get().to(api::openapi))
            .route("/v1/sessions", web::post().to(api::create_session))
            .route("/v1/sessions", web::get().to(api::list_sessions))
            .route("/v1/sessions/{id}", web::delete().to(api::delete_session))
            .route("/v1/sessions/{id}/approvals/{index}", web::post().to(api::answer_approval))
            .route("/v1/sessions/{id}/approvals/pending", web::get().to(approvals::session_pending))
            .route("/v1/approvals/pending", web::get().to(approvals::all_pending))
            .route("/v1/sessions/{id}/approvals/remembered", web::get().to(approvals::remembered))
            .route("/v1/sessions/{id}/approvals/remembered", web::delete().to(approvals::revoke_all))
            .route(
                "/v1/sessions/{id}/approvals/remembered/{key:.*}",
                web::delete().to(approvals::revoke_one),
            )
            .route("/v1/sessions/{id}/inputs/{n}", web::post().to(api::answer_input))
            .route("/v1/sessions/{id}/events", web::get().to(api::session_events))
            .route("/v1/sessions/{id}/rounds/last", web::get().to(rounds::last_round))
            .route("/v1/tools", web::get().to(api::tools))
            .route("/v1/mcp/servers", web::get().to(api::mcp_servers))
            .route("/v1/sessions/{id}/tools", web::get().to(api::session_tools))
            .route("/v1/tools/search", web::post().to(api::search))
            .default_service(web::to(|| async {
                Err::<actix_web::HttpResponse, _>(ApiError(StatusCode::NOT_FOUND, "no such endpoint (see /v1/openapi.json)".into()))
            }))
    })
    .on_connect(crate::front::mcp_server::http::bridge::on_connect)
    .client_request_timeout(Duration::from_millis(s.client_request_timeout_ms))
    .shutdown_timeout(s.shutdown_grace_secs);
    if s.http_workers > 0 {
        server = server.workers(s.http_workers);
    }
    for listener in listeners {
        server = server.listen(listener)?;
    }
    for addr in server.addrs() {
        // The one line scripts wait for.
        eprintln!("toolslot: listening on http://{addr}");
    }
    let result = server.run().await;
    reaper.abort();
    result
}

/// MCP's Streamable HTTP (GET, POST, DELETE), admitted like every other request.
async fn mcp_http(state: web::Data<State>, req: actix_web::HttpRequest, body: web::Bytes) -> actix_web::HttpResponse {
    let every = Duration::from_millis(state.config.server.stream_keepalive_ms.max(1));
    crate::front::mcp_server::http::bridge::handle(&state.mcp_endpoint, &req, body, every).await
}

/// Listens on every address `bind` resolves to (as actix's own `bind` would).
fn bind_all(bind: &str) -> std::io::Result<Vec<std::net::TcpListener>> {
    use std::net::ToSocketAddrs;
    let mut listeners = Vec::new();
    let mut last_error = None;
    for addr in bind.to_socket_addrs()? {
        match std::net::TcpListener::bind(addr) {
            Ok(l) => listeners.push(l),
            // Which address, and which key sets it: "Address already in use" alone does not
            // say what to change.
            Err(e) => last_error = Some(std::io::Error::new(e.kind(), format!("cannot listen on {addr} (server.bind): {e}"))),
        }
    }
    match (listeners.is_empty(), last_error) {
        (true, Some(e)) => Err(e),
        (true, None) => Err(std::io::Error::other(format!("`{bind}` resolves to no address"))),
        _ => Ok(listeners),
    }
}
