//! Who may talk to the server: the `Host` a request names, the `Origin` a browser says its page
//! came from, the token, and how many wrong tokens one address may try.
//!
//! A browser is the hostile client here. A page on another site can POST to the API (a
//! `text/plain` form needs no preflight), and with DNS rebinding it can make its own name
//! resolve to this machine so that its requests are same-origin to it. So every request must
//! name this server in `Host` (the bound address, localhost on a loopback bind, or
//! `server.allowed_hosts`), and a state-changing request that says it comes from a page of
//! another origin is refused whatever it carries.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use actix_web::HttpRequest;
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::web;
use toolslot::config::{HostPattern, ServerConfig};

use super::State;
use super::api::ApiError;

/// The cookie the console's login sets: a browser cannot add a header to the page it loads,
/// and a token in the address would end up in its history and in logs.
pub(crate) const TOKEN_COOKIE: &str = "toolslot_token";

/// The window `server.auth_failures_per_minute` counts in.
const FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// The admission rules of one running server.
#[derive(Debug)]
pub struct Admission {
    token: String,
    /// The addresses the server listens on.
    bound: Vec<SocketAddr>,
    allowed_hosts: Vec<HostPattern>,
    /// Lowercase, without a trailing slash.
    allowed_origins: Vec<String>,
    failures_per_minute: u32,
    /// Wrong tokens per client address: when its minute began, and how many.
    failures: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl Admission {
    /// The rules of `cfg` for a server listening on `bound`. Entries were checked when the
    /// configuration loaded; one that does not parse here is left out.
    pub fn new(cfg: &ServerConfig, bound: Vec<SocketAddr>) -> Self {
        Self {
            token: cfg.token.clone(),
            bound,
            allowed_hosts: cfg.allowed_hosts.iter().filter_map(|h| HostPattern::parse(h).ok()).collect(),
            allowed_origins: cfg
                .allowed_origins
                .iter()
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
            failures_per_minute: cfg.auth_failures_per_minute,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// The token every request needs ("" = none).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Whether a `Host` header names this server.
    pub fn host_allowed(&self, header: &str) -> bool {
        let Ok(named) = HostPattern::parse(header) else {
            return false;
        };
        // An absent port is the scheme's default; the server speaks plain HTTP.
        let port = named.port.unwrap_or(80);
        if self.allowed_hosts.iter().any(|a| a.matches(&named.host, port)) {
            return true;
        }
        self.bound.iter().any(|addr| {
            if addr.port() != port {
                return false;
            }
            match named.host.parse::<IpAddr>() {
                // An address cannot be rebound to another machine, so on a wildcard bind
                // every address of this machine is its own.
                Ok(ip) => ip == addr.ip() || addr.ip().is_unspecified(),
                Err(_) => named.host == "localhost" && (addr.ip().is_loopback() || addr.ip().is_unspecified()),
            }
        })
    }

    /// Whether a state-changing request from a page of `origin` may go on: the server's own
    /// pages (the origin names the `Host` the request was sent to, already checked) and
    /// `server.allowed_origins`.
    pub fn origin_allowed(&self, origin: &str, host: &str) -> bool {
        let origin = origin.trim_end_matches('/').to_ascii_lowercase();
        let host = host.to_ascii_lowercase();
        if origin == format!("http://{host}") || origin == format!("https://{host}") {
            return true;
        }
        self.allowed_origins.contains(&origin)
    }

    /// Seconds until `ip` may try a token again, when it is over its limit.
    pub fn throttled(&self, ip: Option<IpAddr>) -> Option<u64> {
        let (ip, limit) = (ip?, self.failures_per_minute);
        if limit == 0 {
            return None;
        }
        let failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let (start, n) = failures.get(&ip)?;
        let left = FAILURE_WINDOW.checked_sub(start.elapsed())?;
        (*n >= limit).then(|| left.as_secs().max(1))
    }

    /// Counts a wrong token presented by `ip`.
    pub fn failed(&self, ip: Option<IpAddr>) {
        let Some(ip) = ip else { return };
        if self.failures_per_minute == 0 {
            return;
        }
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let entry = failures.entry(ip).or_insert((Instant::now(), 0));
        if entry.0.elapsed() >= FAILURE_WINDOW {
            *entry = (Instant::now(), 0);
        }
        entry.1 = entry.1.saturating_add(1);
    }

    /// Forgets the addresses whose minute is over, so the table holds only the last minute's.
    pub fn forget_old_failures(&self) {
        self.failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|_, (start, _)| start.elapsed() < FAILURE_WINDOW);
    }

    /// The refusal of an address over its limit.
    pub fn too_many(&self, retry_secs: u64) -> ApiError {
        ApiError(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "too many wrong tokens from this address (server.auth_failures_per_minute = {}); try again in {retry_secs} s",
                self.failures_per_minute
            ),
        )
    }
}

/// What a request presents as the token: nothing, the right one, or a wrong one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Presented {
    Nothing,
    Right,
    Wrong,
}

/// What the request carries as a bearer header or as the console's cookie, against `token`.
pub(crate) fn presented(req: &HttpRequest, token: &str) -> Presented {
    let header = req.headers().get("authorization").and_then(|v| v.to_str().ok());
    let cookie = req.cookie(TOKEN_COOKIE);
    let header_ok = header.is_some_and(|v| constant_eq(v, &format!("Bearer {token}")));
    let cookie_ok = cookie.as_ref().is_some_and(|c| constant_eq(c.value(), token));
    match (header_ok || cookie_ok, header.is_some() || cookie.is_some()) {
        (true, _) => Presented::Right,
        (false, true) => Presented::Wrong,
        (false, false) => Presented::Nothing,
    }
}

/// Compares without an early exit, so the time taken says nothing about the token.
pub(crate) fn constant_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn refused(reason: String) -> actix_web::Error {
    ApiError(StatusCode::FORBIDDEN, reason).into()
}

/// Admits a request: `Host`, then `Origin` for a state-changing request, then the token (a
/// client over its wrong-token limit is refused before its token is even looked at). The
/// console page and its login form answer without a token: the page shows the form until the
/// cookie is set.
pub(crate) async fn admit(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let Some(state) = req.app_data::<web::Data<State>>().cloned() else {
        return Err(ApiError(StatusCode::SERVICE_UNAVAILABLE, "the server is not set up".into()).into());
    };
    let rules = &state.admission;
    let host = req.headers().get("host").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    if !rules.host_allowed(&host) {
        return Err(refused(format!(
            "Host `{host}` is not this server's address; name it in server.allowed_hosts to reach the server by that name"
        )));
    }
    let changes_state = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if changes_state && let Some(origin) = req.headers().get("origin") {
        let origin = origin.to_str().unwrap_or("(not text)");
        if !rules.origin_allowed(origin, &host) {
            return Err(refused(format!(
                "requests from pages of `{origin}` may not change anything here (server.allowed_origins)"
            )));
        }
    }
    let token = rules.token();
    let open = matches!((req.method().as_str(), req.path()), ("GET", "/") | ("POST", "/login"));
    if !token.is_empty() && !open {
        let ip = req.peer_addr().map(|a| a.ip());
        if let Some(secs) = rules.throttled(ip) {
            return Err(rules.too_many(secs).into());
        }
        match presented(req.request(), token) {
            Presented::Right => {}
            found => {
                if found == Presented::Wrong {
                    rules.failed(ip);
                }
                return Err(ApiError(
                    StatusCode::UNAUTHORIZED,
                    "missing or wrong bearer token (Authorization: Bearer <token>)".into(),
                )
                .into());
            }
        }
    }
    next.call(req).await
}
