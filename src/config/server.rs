//! `[server]`: the limits and origin checks of `toolslot serve`.

use serde::Deserialize;

/// `[server]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Listen address.
    pub bind: String,
    /// Bearer token ("" = none).
    pub token: String,
    /// Largest round body (bytes).
    pub max_body_bytes: usize,
    /// Largest JSON body (bytes).
    pub max_json_bytes: usize,
    /// Open sessions at most (0 = no limit).
    pub max_sessions: usize,
    /// Rounds per session (0 = no limit).
    pub max_rounds_per_session: u64,
    /// Idle session expiry (s, 0 = never).
    pub idle_session_secs: u64,
    /// How often idle sessions are looked for and closed (s, at least 1).
    pub reap_interval_secs: u64,
    /// Request-head timeout (ms).
    pub client_request_timeout_ms: u64,
    /// Shutdown grace (s).
    pub shutdown_grace_secs: u64,
    /// HTTP workers (0 = one per core).
    pub http_workers: usize,
    /// The folder every session's workspace must be inside ("" = any folder).
    pub workspace_root: String,
    /// `Host` names accepted besides the bound address (`host` or `host:port`).
    pub allowed_hosts: Vec<String>,
    /// Origins (`scheme://host[:port]`) whose pages may send state-changing requests, besides
    /// the server's own.
    pub allowed_origins: Vec<String>,
    /// Wrong tokens one client address may present per minute before it is refused (0 = no
    /// limit).
    pub auth_failures_per_minute: u32,
    /// Cancel a round whose HTTP answer stream the client dropped.
    pub cancel_on_disconnect: bool,
    /// How long a dropped round waits for its client before it is cancelled (ms).
    pub disconnect_grace_ms: u64,
    /// Silence on a round's answer stream after which an SSE comment is written (ms, 0 =
    /// never): only a write finds out that the client has gone.
    pub stream_keepalive_ms: u64,
}
