//! The servers toolslot speaks to as a client: `[mcp]` with its `[[mcp.servers]]`, and `[lsp]`
//! with its `[[lsp.servers]]`.

use std::path::PathBuf;

use serde::Deserialize;

use super::expand_home;

/// `[mcp]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// Description cap for untrusted servers (characters).
    pub description_max_chars: usize,
    /// Default start-up timeout (ms).
    pub startup_timeout_ms: u64,
    /// Default per-call timeout (ms).
    pub call_timeout_ms: u64,
    /// First restart delay after a server dies (ms); doubles up to the maximum.
    pub restart_backoff_ms: u64,
    /// Longest restart delay (ms).
    pub restart_backoff_max_ms: u64,
    /// Redirects followed at most for a streamable HTTP server (same origin, 307/308 only).
    pub http_max_redirects: usize,
    /// How long an idle connection to a streamable HTTP server is kept (ms; 0 = none).
    pub http_keep_alive_ms: u64,
    /// Whether each thread that calls a streamable HTTP server opens a session of its own
    /// with it, rather than handing every call to the thread of the shared one.
    pub http_connection_per_thread: bool,
    /// Whether a `tools/call` to a streamable HTTP server on a revision with sessions is
    /// posted by toolslot itself on the calling task, rather than through rmcp's worker.
    pub http_direct_calls: bool,
    /// How often a call's event stream that a server ends before the answer is resumed
    /// (`GET` with `Last-Event-ID`), for calls posted straight.
    pub http_resume_attempts: usize,
    /// How long to wait before resuming when the server gave no `retry` (ms).
    pub http_resume_wait_ms: u64,
    /// How much of a stdio server's stderr (the end) a failure report quotes, in bytes.
    pub stderr_tail_bytes: usize,
    /// How long a server's question waits for the host's answer before it is declined (ms).
    pub elicitation_timeout_ms: u64,
    /// Where each server's last tool listing is kept ("" keeps none: every server starts at
    /// start-up to list its tools).
    pub tool_cache_dir: String,
    /// Longest JSON-RPC message read over stdio (bytes): from a stdio server, and from the
    /// client of `toolslot mcp`.
    pub max_message_bytes: usize,
    /// Deepest JSON nesting kept from a server's message.
    pub max_json_depth: usize,
    /// Largest input schema of one server tool (bytes, serialized).
    pub max_schema_bytes: usize,
    /// Tools one server may list at most.
    pub max_tools_per_server: usize,
    /// How long stopping a stdio server waits at each step (ms).
    pub shutdown_grace_ms: u64,
    /// Declared servers.
    pub servers: Vec<McpServerConfig>,
}

impl McpConfig {
    /// The listing folder, `~` expanded; `None` when listings are not kept.
    pub fn tool_cache_path(&self) -> Option<PathBuf> {
        (!self.tool_cache_dir.is_empty()).then(|| expand_home(&self.tool_cache_dir))
    }
}

/// One `[[mcp.servers]]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// Server name, the prefix of its tools' names.
    pub name: String,
    /// Program and arguments of a stdio server.
    #[serde(default)]
    pub command: Vec<String>,
    /// Environment variables set for the server process.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// The folder a stdio server starts in (`~/` expanded; the server reads relative arguments
    /// from it, while a program named by a relative path is found from the folder toolslot was
    /// started in); default the home folder (else `/`).
    #[serde(default)]
    pub cwd: Option<String>,
    /// URL of a streamable HTTP server (`http://` or `https://`).
    #[serde(default)]
    pub url: Option<String>,
    /// A PEM file of certificates trusted for this server besides the bundled roots (an
    /// internal CA, a self-signed development server).
    #[serde(default)]
    pub ca_cert: Option<String>,
    /// The environment variable holding the bearer token a streamable HTTP server wants
    /// (`Authorization: Bearer …`); the token itself never sits in a config file.
    #[serde(default)]
    pub bearer_token_env: Option<String>,
    /// Further headers sent with every request to a streamable HTTP server.
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    /// Start-up (spawn + initialize + list tools) timeout in ms (default `mcp.startup_timeout_ms`).
    #[serde(default)]
    pub startup_timeout_ms: Option<u64>,
    /// Per-call timeout in ms (default `mcp.call_timeout_ms`).
    #[serde(default)]
    pub call_timeout_ms: Option<u64>,
    /// A required server is started at start-up, and if it cannot start, toolslot does not
    /// start. An optional one starts on the first call of one of its tools when its last
    /// listing is kept (`mcp.tool_cache_dir`), at start-up otherwise.
    #[serde(default)]
    pub required: bool,
    /// Believe the server's tool annotations (readOnlyHint, destructiveHint).
    #[serde(default)]
    pub trust_annotations: bool,
    /// Keep its tools out of the catalog until tool_search loads them (default true).
    #[serde(default = "default_true")]
    pub defer: bool,
}

impl McpServerConfig {
    /// The folder a stdio server starts in: its `cwd`, else the home folder, else `/`. Never
    /// the folder toolslot itself was started in: that may be a checkout, where a launcher
    /// that reads its current folder (`python -m`, `npx`, `uv run`) would run the
    /// repository's code in the server's place, outside any sandbox.
    pub fn start_dir(&self) -> PathBuf {
        match &self.cwd {
            Some(dir) if !dir.is_empty() => expand_home(dir),
            _ => std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|h| h.is_absolute() && h.is_dir())
                .unwrap_or_else(|| PathBuf::from("/")),
        }
    }

    /// Its start-up timeout: its own, else `mcp.startup_timeout_ms`.
    pub fn startup_timeout(&self, mcp: &McpConfig) -> std::time::Duration {
        std::time::Duration::from_millis(self.startup_timeout_ms.unwrap_or(mcp.startup_timeout_ms))
    }

    /// Its per-call timeout: its own, else `mcp.call_timeout_ms`.
    pub fn call_timeout(&self, mcp: &McpConfig) -> std::time::Duration {
        std::time::Duration::from_millis(self.call_timeout_ms.unwrap_or(mcp.call_timeout_ms))
    }
}

fn default_true() -> bool {
    true
}

/// `[lsp]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LspConfig {
    /// How long an edit's result waits for diagnostics (ms), server start included.
    pub wait_ms: u64,
    /// Quiet time after which an unversioned publication is taken as final (ms).
    pub settle_ms: u64,
    /// Diagnostics appended to one result at most.
    pub max_diagnostics: usize,
    /// Start-up (spawn + `initialize`) timeout (ms).
    pub startup_timeout_ms: u64,
    /// First restart delay after a server died (ms); doubles up to the maximum.
    pub restart_backoff_ms: u64,
    /// Longest restart delay (ms).
    pub restart_backoff_max_ms: u64,
    /// Time a server has to shut down when its session closes (ms).
    pub shutdown_grace_ms: u64,
    /// How much of a server's stderr (the end) a failure report quotes, in bytes.
    pub stderr_tail_bytes: usize,
    /// The largest file read back after an edit and sent to its server, in bytes.
    pub max_file_bytes: u64,
    /// Declared servers.
    pub servers: Vec<LspServerConfig>,
}

/// One `[[lsp.servers]]` table: a language server speaking LSP over stdio.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LspServerConfig {
    /// Server name, used in results and logs.
    pub name: String,
    /// Program and arguments (`["basedpyright-langserver", "--stdio"]`).
    pub command: Vec<String>,
    /// File extensions it handles, without the dot (`["py", "pyi"]`).
    pub extensions: Vec<String>,
    /// The LSP language id of its documents (default: from the extension: `py` → `python`,
    /// `ts` → `typescript`, …).
    #[serde(default)]
    pub language_id: Option<String>,
    /// Environment variables set for the server process, besides the core set every sandboxed
    /// program gets (`shell.env_core` less `shell.env_exclude`).
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
}
