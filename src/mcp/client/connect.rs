//! Reaching a server (a stdio process or a streamable HTTP endpoint) and negotiating its
//! protocol revision, with a failure report that says what to fix.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::service::{ClientLifecycleMode, ClientServiceExt};

use super::handler::{Handler, ToolsChanged};
use super::{McpClient, direct};
use crate::config::McpServerConfig;
use crate::mcp::stdio::FrameLimits;

/// How a connection negotiates its protocol revision: the newest revisions rmcp knows (those
/// without an `initialize` handshake) are offered first through `server/discover`; a server
/// that answers it with an error is an older one, and is then initialized with the newest
/// revision that has the handshake, falling back to whatever older revision it answers.
fn lifecycle() -> ClientLifecycleMode {
    use rmcp::model::ProtocolVersion;
    let mut newest: Vec<ProtocolVersion> = ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .filter(|v| !v.has_initialize())
        .cloned()
        .collect();
    newest.reverse();
    ClientLifecycleMode::Auto {
        preferred_versions: newest,
        legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
    }
}

/// How to connect to a server.
pub struct ConnectOptions {
    /// Start-up (spawn and `initialize`) timeout.
    pub startup: Duration,
    /// Redirects followed at most (streamable HTTP).
    pub max_redirects: usize,
    /// How long an idle connection to a streamable HTTP server is kept for the next message.
    pub keep_alive: Duration,
    /// How much of a stdio server's stderr a failed start quotes (bytes, from the end).
    pub stderr_tail_bytes: usize,
    /// Told when the server's tool list changes.
    pub on_tools_changed: Option<ToolsChanged>,
    /// The bounds of a stdio server's messages, and how long stopping it waits.
    pub limits: FrameLimits,
    /// The most tools one listing may hold (pages stop there).
    pub max_tools: usize,
    /// Announce elicitation (the host can put a server's questions to a user and answer
    /// them); without it, servers are told nothing and their questions declined.
    pub elicitation: bool,
    /// Post calls to a streamable HTTP server straight, on a revision with sessions
    /// (`mcp.http_direct_calls`).
    pub direct_calls: bool,
    /// How often a call's stream that the server ended early is resumed
    /// (`mcp.http_resume_attempts`).
    pub resume_attempts: usize,
    /// How long to wait before resuming when the server gave no `retry`
    /// (`mcp.http_resume_wait_ms`).
    pub resume_wait: Duration,
}

impl ConnectOptions {
    /// The options `[mcp]` gives a server started within `startup`.
    pub fn of(mcp: &crate::config::McpConfig, startup: Duration, on_tools_changed: Option<ToolsChanged>) -> Self {
        Self {
            startup,
            max_redirects: mcp.http_max_redirects,
            keep_alive: Duration::from_millis(mcp.http_keep_alive_ms),
            stderr_tail_bytes: mcp.stderr_tail_bytes,
            on_tools_changed,
            limits: FrameLimits {
                max_message_bytes: mcp.max_message_bytes,
                max_json_depth: mcp.max_json_depth,
                shutdown_grace: Duration::from_millis(mcp.shutdown_grace_ms),
            },
            max_tools: mcp.max_tools_per_server,
            elicitation: false,
            direct_calls: mcp.http_direct_calls,
            resume_attempts: mcp.http_resume_attempts,
            resume_wait: Duration::from_millis(mcp.http_resume_wait_ms),
        }
    }
}

/// Starts the server's process (or reaches its streamable HTTP endpoint) and completes the
/// `initialize` handshake; `on_tools_changed` hears of later changes to its tool list. A
/// stdio server's stderr is quoted in the error when it fails to start, and handed to the
/// caller otherwise ([`McpClient::take_stderr`]), who must keep reading it.
///
/// # Errors
/// A one-line reason: no command or URL, a URL that is not http(s), a bad `ca_cert`, the
/// process failing to start, or the handshake failing (a certificate the server's name does
/// not match, an untrusted issuer) or timing out.
pub async fn connect(cfg: &McpServerConfig, options: ConnectOptions) -> Result<McpClient, String> {
    let started = tokio::time::Instant::now();
    let startup = options.startup;
    let retry = ConnectOptions {
        on_tools_changed: options.on_tools_changed.clone(),
        ..options
    };
    match open_with(cfg, options, lifecycle()).await {
        Ok(client) => Ok(client),
        // A server that fails the newest revisions' discovery in a way rmcp cannot read as
        // "older server" (answering it with an empty result, closing the stream) is reached
        // again, on a fresh connection, with the `initialize` handshake alone.
        Err(first) => {
            let left = startup.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(first);
            }
            tracing::debug!(server = %cfg.name, reason = %first, "discovery failed; connecting again with initialize");
            let retry = ConnectOptions { startup: left, ..retry };
            open_with(cfg, retry, ClientLifecycleMode::Initialize).await
        }
    }
}

/// One connection attempt with `lifecycle`.
async fn open_with(cfg: &McpServerConfig, options: ConnectOptions, lifecycle: ClientLifecycleMode) -> Result<McpClient, String> {
    let ConnectOptions {
        startup,
        max_redirects,
        keep_alive,
        stderr_tail_bytes,
        on_tools_changed,
        limits,
        max_tools,
        elicitation,
        direct_calls,
        resume_attempts,
        resume_wait,
    } = options;
    let handler = Handler {
        on_tools_changed: on_tools_changed.clone(),
        elicitation,
        server: cfg.name.clone(),
        ..Handler::default()
    };
    let progress = Arc::clone(&handler.progress);
    let inputs = Arc::clone(&handler.inputs);
    if let Some(url) = &cfg.url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "server `{}`: a streamable HTTP server's url must start with http:// or https://, not `{url}`",
                cfg.name
            ));
        }
        let client = crate::mcp::http::client_for(cfg, max_redirects, keep_alive)?;
        let custom = crate::mcp::http::headers_for(cfg)?;
        let bearer = crate::mcp::http::bearer_token(cfg)?;
        let mut config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url.as_str())
            .custom_headers(custom.clone());
        if let Some(token) = bearer.clone() {
            config = config.auth_header(token);
        }
        let (remembering, session) = super::remembered::Remembering::new(client.clone());
        let transport = rmcp::transport::StreamableHttpClientTransport::with_client(remembering, config);
        let service = match tokio::time::timeout(startup, handler.serve_with_lifecycle(transport, lifecycle.clone())).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                // rmcp's error keeps only the outer text of the HTTP failure; one plain
                // request with the same client recovers the cause (an untrusted certificate,
                // a refused connection).
                let cause = match tokio::time::timeout(startup, client.get(url.as_str()).send()).await {
                    Ok(Err(http)) => format!(" ({})", with_causes(&http)),
                    Ok(Ok(answer)) if matches!(answer.status().as_u16(), 401 | 403) => format!(
                        " (the server answers {} without the right credentials: see bearer_token_env and headers)",
                        answer.status()
                    ),
                    _ => String::new(),
                };
                return Err(format!(
                    "server `{}` at {url}: initialize failed: {}{cause}",
                    cfg.name,
                    with_causes(&e)
                ));
            }
            Err(_) => {
                return Err(format!(
                    "server `{}` at {url} did not initialize within {} ms",
                    cfg.name,
                    startup.as_millis()
                ));
            }
        };
        let direct = service.peer_info().filter(|_| direct_calls).and_then(|info| {
            direct::Direct::new(direct::Opened {
                http: client,
                url: url.clone(),
                custom,
                bearer,
                revision: info.protocol_version.to_string(),
                session: session.clone(),
                max_bytes: limits.max_message_bytes,
                max_depth: limits.max_json_depth,
                resume_attempts,
                resume_wait,
                grace: limits.shutdown_grace,
                on_tools_changed,
            })
        });
        return Ok(McpClient {
            server: cfg.name.clone(),
            service,
            progress,
            inputs,
            pid: None,
            stderr: Mutex::new(None),
            max_tools,
            stopped: None,
            session: Some(session),
            grace: limits.shutdown_grace,
            direct: direct.map(Arc::new),
        });
    }
    let Some((program, args)) = cfg.command.split_first() else {
        return Err(format!("server `{}` has no command and no url", cfg.name));
    };
    // Servers log on stderr; it is not part of the protocol, but it is what says why a server
    // would not start.
    // An argument that names the current folder meant the one toolslot was started in before
    // servers had a folder of their own; in the home folder it would widen what the server
    // reaches (`server-filesystem .` would serve the whole home), so it must be said.
    let relative = |a: &&String| *a == "." || *a == ".." || a.starts_with("./") || a.starts_with("../");
    if let (None, Some(arg)) = (&cfg.cwd, args.iter().find(relative)) {
        return Err(format!(
            "server `{}`: its argument `{arg}` is a relative path, and a server starts in the home folder unless its `cwd` names another: set `cwd`",
            cfg.name
        ));
    }
    let cwd = cfg.start_dir();
    if !cwd.is_dir() {
        return Err(format!("server `{}`: its cwd `{}` is not a folder", cfg.name, cwd.display()));
    }
    // A program named by a relative path (`.venv/bin/server`) is where the config's writer
    // left it, from the folder toolslot was started in, as before the server had a cwd of its
    // own; only a bare name is looked up on the PATH.
    let program = match std::path::Path::new(program) {
        p if p.is_relative() && program.contains('/') => std::env::current_dir()
            .map(|here| here.join(p).display().to_string())
            .unwrap_or_else(|_| program.clone()),
        _ => program.clone(),
    };
    let program = program.as_str();
    let (transport, stderr) = crate::mcp::stdio::spawn(&cfg.name, program, args, &cfg.env, &cwd, limits)
        .map_err(|e| format!("server `{}`: cannot start `{program}`: {e}", cfg.name))?;
    let pid = transport.id();
    let stopped = transport.stopped();
    let failed = match tokio::time::timeout(startup, handler.serve_with_lifecycle(transport, lifecycle.clone())).await {
        Ok(Ok(service)) => {
            return Ok(McpClient {
                server: cfg.name.clone(),
                service,
                progress,
                inputs,
                pid,
                stderr: Mutex::new(stderr),
                max_tools,
                stopped: Some(stopped),
                session: None,
                grace: limits.shutdown_grace,
                direct: None,
            });
        }
        Ok(Err(e)) => format!("server `{}`: initialize failed: {e}", cfg.name),
        Err(_) => format!("server `{}` did not initialize within {} ms", cfg.name, startup.as_millis()),
    };
    let said = match stderr {
        Some(s) => stderr_tail(s, stderr_tail_bytes).await,
        None => String::new(),
    };
    Err(if said.is_empty() {
        failed
    } else {
        format!("{failed}; its stderr ends: {said}")
    })
}

/// The end of what a failed server wrote on stderr, on one line: read until it closes (a
/// server that died), or briefly (one that hangs: what it said so far is in the pipe). Only
/// the end is kept while reading, however much it writes.
async fn stderr_tail(mut stderr: tokio::process::ChildStderr, max: usize) -> String {
    use tokio::io::AsyncReadExt;
    let mut tail = crate::output::Tail::new(max.max(1));
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_millis(300);
    while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, stderr.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        tail.push(&buf[..n], |_| {});
    }
    one_line(&tail.text(), max)
}

/// `text`'s non-empty lines joined with ` | `, its last `max` bytes.
pub fn one_line(text: &str, max: usize) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let joined = lines.join(" | ");
    let cut = joined.len().saturating_sub(max);
    let start = (cut..=joined.len()).find(|i| joined.is_char_boundary(*i)).unwrap_or(joined.len());
    let tail = &joined[start..];
    if start > 0 { format!("…{tail}") } else { tail.to_string() }
}

/// An error and its causes on one line: the TLS or connection reason of an HTTP failure sits
/// several sources deep, and "error sending request" alone does not say what to fix.
pub(super) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}
