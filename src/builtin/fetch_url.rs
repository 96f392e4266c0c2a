//! `fetch_url`: an HTTP(S) GET that cannot be turned against the host's own network.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use super::address_policy::{allowed_by_host, refusal_reason};
use super::html_text::html_to_text;
use super::parse_input;
use crate::tool::{Capability, ErrorCategory, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};

/// Resolves host names to addresses; injected in tests so no test ever looks up (or
/// connects to) anything but what it chose.
pub trait Resolve: Send + Sync {
    /// The addresses of `host`.
    fn resolve<'a>(&'a self, host: &'a str, port: u16) -> BoxFuture<'a, std::io::Result<Vec<IpAddr>>>;
}

/// The operating system's resolver.
#[derive(Debug, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve<'a>(&'a self, host: &'a str, port: u16) -> BoxFuture<'a, std::io::Result<Vec<IpAddr>>> {
        Box::pin(async move { Ok(tokio::net::lookup_host((host, port)).await?.map(|a| a.ip()).collect()) })
    }
}

/// Fetches a URL as text; its results are external content.
pub struct FetchUrl {
    resolver: Arc<dyn Resolve>,
}

impl std::fmt::Debug for FetchUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FetchUrl").finish_non_exhaustive()
    }
}

impl Default for FetchUrl {
    fn default() -> Self {
        Self {
            resolver: Arc::new(SystemResolver),
        }
    }
}

impl FetchUrl {
    /// A fetch_url that resolves names with `resolver`.
    pub fn with_resolver(resolver: Arc<dyn Resolve>) -> Self {
        Self { resolver }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    url: String,
}

fn refused(message: String) -> ToolError {
    ToolError {
        category: ErrorCategory::InvalidInput,
        message,
        field: Some("url".into()),
        started: false,
    }
}

impl Tool for FetchUrl {
    fn name(&self) -> &str {
        "fetch_url"
    }
    fn description(&self) -> &str {
        "Fetch a public web page or file over HTTP(S) and return it as text (HTML reduced to readable text). Private and local addresses are refused."
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"url": {"type": "string", "description": "An http:// or https:// URL"}},
            "required": ["url"],
            "additionalProperties": false
        })
    }
    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let input: Input = parse_input(input)?;
            let cfg = &ctx.config.fetch_url;
            let allow = &ctx.config.network.allow_hosts;
            let deadline = Instant::now() + Duration::from_millis(cfg.timeout_ms);
            let mut url = url::Url::parse(&input.url).map_err(|e| refused(format!("`{}` is not a valid URL: {e}", input.url)))?;
            for _hop in 0..=cfg.max_redirects {
                let (host, ip) = self.check(&url, allow).await?;
                let remaining = deadline.saturating_duration_since(Instant::now());
                if remaining.is_zero() {
                    return Err(timeout(&url));
                }
                let port = url.port_or_known_default().unwrap_or(80);
                let tls = crate::tls::public_roots().map_err(|e| ToolError::tool(format!("cannot set up TLS: {e}")))?;
                let mut builder = reqwest::Client::builder()
                    .tls_backend_preconfigured(tls)
                    .redirect(reqwest::redirect::Policy::none())
                    .no_proxy()
                    .timeout(remaining);
                if let url::Host::Domain(d) = url.host().ok_or_else(|| refused("the URL has no host".into()))? {
                    // Connect to exactly the address that was checked: no second lookup an
                    // attacker's DNS could answer differently.
                    builder = builder.resolve(d, SocketAddr::new(ip, port));
                }
                let client = builder
                    .build()
                    .map_err(|e| ToolError::tool(format!("cannot build an HTTP client: {e}")))?;
                let response = client.get(url.clone()).send().await.map_err(|e| {
                    if e.is_timeout() {
                        timeout(&url)
                    } else {
                        ToolError::tool(format!("fetching {url} failed: {e}"))
                    }
                })?;
                let status = response.status();
                if status.is_redirection()
                    && let Some(location) = response.headers().get(reqwest::header::LOCATION)
                {
                    let location = location
                        .to_str()
                        .map_err(|_| ToolError::tool(format!("{url} redirected to a non-text Location")))?;
                    url = url
                        .join(location)
                        .map_err(|e| ToolError::tool(format!("{url} redirected to an invalid URL `{location}`: {e}")))?;
                    tracing::debug!(%host, next = %url, "redirect");
                    continue;
                }
                let content_type = response
                    .headers()
                    .get(reqwest::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                let mut body = Vec::new();
                let mut cut = false;
                let mut stream = response.bytes_stream();
                while let Some(chunk) = stream.next().await {
                    let chunk = chunk.map_err(|e| {
                        if e.is_timeout() {
                            timeout(&url)
                        } else {
                            ToolError::tool(format!("reading {url} failed: {e}"))
                        }
                    })?;
                    let room = cfg.max_bytes.saturating_sub(body.len());
                    body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                    if chunk.len() > room {
                        cut = true;
                        break;
                    }
                }
                // A whole JSON body is a structured result (a large one is kept under a handle
                // and summarized, instead of being cut mid-value).
                if !cut
                    && content_type.contains("json")
                    && let Ok(value) = serde_json::from_slice::<serde_json::Value>(&body)
                {
                    return Ok(ToolOutput {
                        is_error: !status.is_success(),
                        ..ToolOutput::structured(format!("{url} ({status}, {content_type})\n\n"), value)
                    });
                }
                let raw = String::from_utf8_lossy(&body);
                let text = if content_type.contains("html") || raw.trim_start().starts_with('<') {
                    html_to_text(&raw)
                } else {
                    raw.into_owned()
                };
                let mut out = format!("{url} ({status}, {content_type})\n\n{text}");
                if cut {
                    out.push_str(&format!("\n[body cut at {} bytes]", cfg.max_bytes));
                }
                return Ok(ToolOutput {
                    is_error: !status.is_success(),
                    ..ToolOutput::text(out)
                });
            }
            Err(ToolError::tool(format!("too many redirects (more than {})", cfg.max_redirects)))
        })
    }
}

fn timeout(url: &url::Url) -> ToolError {
    ToolError {
        category: ErrorCategory::Timeout,
        message: format!("fetching {url} took too long and was stopped"),
        field: None,
        started: true,
    }
}

impl FetchUrl {
    /// Checks the scheme, resolves the host and classifies every address; returns the host
    /// and the address to connect to.
    async fn check(&self, url: &url::Url, allow: &[String]) -> Result<(String, IpAddr), ToolError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(refused(format!(
                "`{}` URLs are refused; only http and https may be fetched",
                url.scheme()
            )));
        }
        let host = url.host_str().ok_or_else(|| refused("the URL has no host".into()))?.to_string();
        let port = url.port_or_known_default().unwrap_or(80);
        let addrs: Vec<IpAddr> = match url.host() {
            Some(url::Host::Ipv4(v4)) => vec![IpAddr::V4(v4)],
            Some(url::Host::Ipv6(v6)) => vec![IpAddr::V6(v6)],
            Some(url::Host::Domain(d)) => self
                .resolver
                .resolve(d, port)
                .await
                .map_err(|e| ToolError::tool(format!("cannot resolve `{d}`: {e}")))?,
            None => return Err(refused("the URL has no host".into())),
        };
        let Some(first) = addrs.first().copied() else {
            return Err(ToolError::tool(format!("`{host}` has no address")));
        };
        // Every address is checked, not just the first: a name with one public and one
        // private record must not be a way in.
        for ip in &addrs {
            if let Some(reason) = refusal_reason(*ip)
                && !allowed_by_host(allow, &host, *ip, port)
            {
                return Err(refused(format!(
                    "`{host}` (port {port}) resolves to {ip}, which is not a public address ({reason}); fetch_url only reaches public addresses (the host can allow one with network.allow_hosts, as host or host:port)"
                )));
            }
        }
        Ok((host, first))
    }
}

impl ToolSpec for FetchUrl {
    fn capabilities(&self) -> &[Capability] {
        &[Capability::Network, Capability::ReadOnly]
    }
    fn supports_parallel(&self) -> bool {
        true
    }
    fn approval_key(&self, input: &Value) -> String {
        // Approval for the session covers later fetches from the same host.
        let host = input
            .get("url")
            .and_then(Value::as_str)
            .and_then(|u| url::Url::parse(u).ok())
            .and_then(|u| u.host_str().map(str::to_string));
        format!("fetch_url:{}", host.unwrap_or_default())
    }
}
