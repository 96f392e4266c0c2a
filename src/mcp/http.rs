//! The HTTP client a streamable-HTTP MCP server is reached with, TLS included.
//!
//! rmcp's own default client would pick reqwest 0.13's TLS crypto (aws-lc-rs, a C library
//! built from source); we hand it rustls over ring (`crate::tls`), trusting the bundled
//! Mozilla roots plus a server's own `ca_cert` (an internal CA, a self-signed development
//! server).

use std::collections::HashMap;
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use reqwest::redirect::{Attempt, Policy};
use reqwest::{Client, StatusCode};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::config::McpServerConfig;

/// The client for `cfg`'s server, keeping an idle connection for `keep_alive` (zero: none).
///
/// # Errors
/// A one-line reason naming the server: a `ca_cert` that cannot be read or holds no
/// certificate, or a TLS setup the client refuses.
pub fn client_for(cfg: &McpServerConfig, max_redirects: usize, keep_alive: Duration) -> Result<Client, String> {
    let mut extra: Vec<CertificateDer<'static>> = Vec::new();
    if let Some(path) = &cfg.ca_cert {
        let path = crate::config::expand_home(path);
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&path)
            .and_then(|it| it.collect::<Result<_, _>>())
            .map_err(|e| format!("server `{}`: cannot read ca_cert `{}`: {e}", cfg.name, path.display()))?;
        if certs.is_empty() {
            return Err(format!(
                "server `{}`: ca_cert `{}` holds no PEM certificate",
                cfg.name,
                path.display()
            ));
        }
        extra = certs;
    }
    let tls = crate::tls::client_config(extra).map_err(|e| {
        let at = cfg.ca_cert.as_deref().map(|c| format!(" (ca_cert `{c}`)")).unwrap_or_default();
        format!("server `{}`: TLS setup{at}: {e}", cfg.name)
    })?;
    let builder = Client::builder().tls_backend_preconfigured(tls);
    // A connection kept between messages saves a connect and an accept per call (a gateway in front
    // of a server spent about 40% of its CPU per call on them); kept shorter than the usual servers' keep-alive
    // (5 s) so a reused connection is not one the server is closing. Nagle is off (reqwest's
    // default), so a reused connection has no delayed-ACK stall. Zero: a fresh connection per
    // message, as rmcp's own client.
    let builder = if keep_alive.is_zero() {
        builder.pool_max_idle_per_host(0)
    } else {
        builder.pool_idle_timeout(keep_alive).tcp_nodelay(true)
    };
    builder
        .redirect(same_origin_redirects(max_redirects))
        .build()
        .map_err(|e| format!("server `{}`: HTTP client setup: {e}", cfg.name))
}

/// The bearer token of `cfg`'s server, read from the variable it names.
///
/// # Errors
/// A one-line reason naming the variable when it is unset or empty.
pub fn bearer_token(cfg: &McpServerConfig) -> Result<Option<String>, String> {
    let Some(var) = &cfg.bearer_token_env else {
        return Ok(None);
    };
    match std::env::var(var) {
        Ok(token) if !token.is_empty() => Ok(Some(token)),
        _ => Err(format!("server `{}`: bearer_token_env names `{var}`, which is not set", cfg.name)),
    }
}

/// `cfg`'s extra headers, checked.
///
/// # Errors
/// A one-line reason naming a header whose name or value is not valid HTTP.
pub fn headers_for(cfg: &McpServerConfig) -> Result<HashMap<HeaderName, HeaderValue>, String> {
    cfg.headers
        .iter()
        .map(|(name, value)| {
            let n = HeaderName::from_bytes(name.as_bytes()).map_err(|e| format!("server `{}`: header `{name}`: {e}", cfg.name))?;
            let v = HeaderValue::from_str(value).map_err(|e| format!("server `{}`: header `{name}`: {e}", cfg.name))?;
            Ok((n, v))
        })
        .collect()
}

/// Follows only 307 and 308 to the same origin: they keep the method and body, so the
/// JSON-RPC message arrives intact; a 301–303 would turn the POST into a bodyless GET, and
/// another origin would receive the session id.
fn same_origin_redirects(max: usize) -> Policy {
    Policy::custom(move |attempt: Attempt| {
        let keeps_body = matches!(attempt.status(), StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT);
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if keeps_body && same_origin && attempt.previous().len() <= max {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

// The endpoint the benches answer with, shared rather than written again.
#[cfg(test)]
#[path = "../../benches/support/http_stub.rs"]
mod http_stub;

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// An HTTP server answering every request `ok`, keeping connections open; returns its URL
    /// and the count of connections it accepted.
    fn counting_server() -> (String, Arc<AtomicUsize>) {
        let (base, accepted) = super::http_stub::serve(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
        (format!("{base}/mcp"), accepted)
    }

    async fn connections_for(keep_alive: Duration) -> usize {
        let (url, accepted) = counting_server();
        let cfg: McpServerConfig = serde_json::from_value(serde_json::json!({"name": "s", "url": url})).unwrap();
        let client = client_for(&cfg, 10, keep_alive).unwrap();
        for _ in 0..3 {
            let answer = client.get(&url).send().await.unwrap();
            assert_eq!(answer.text().await.unwrap(), "ok");
        }
        accepted.load(Ordering::SeqCst)
    }

    #[tokio::test]
    async fn a_kept_connection_carries_the_next_messages_and_zero_keeps_none() {
        assert_eq!(
            connections_for(Duration::from_secs(2)).await,
            1,
            "one connection for three messages"
        );
        assert_eq!(connections_for(Duration::ZERO).await, 3, "a fresh connection per message");
    }
}
