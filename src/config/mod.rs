//! Configuration: every limit and policy of the runtime, loaded in layers.
//!
//! The built-in `config/default.toml` (compiled into the binary) is overlaid by an optional
//! file and then by `TOOLSLOT_<SECTION>__<KEY>` environment variables, through the `config`
//! crate. Every struct here denies unknown fields, so a misspelt key is an error that names
//! the file and key rather than a limit that silently keeps its default.
//!
//! # Example
//! ```
//! let cfg = toolslot::config::Config::load(None).unwrap();
//! assert_eq!(cfg.output.shell_max_bytes, 30_000);
//! ```

mod error;
mod host_pattern;

use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use error::ConfigError;
pub use host_pattern::HostPattern;

/// The built-in defaults, the same bytes as `config/default.toml`.
pub const DEFAULT_TOML: &str = include_str!("../../config/default.toml");

/// The whole configuration. See `config/default.toml` for each key's reason and default.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Out-of-process tools declared by the user.
    pub extensions: Vec<ExtensionConfig>,
    /// Programs run before and after tool calls.
    pub hooks: Vec<HookConfig>,
    /// Approval policy.
    pub approval: ApprovalConfig,
    /// Policy rules and where the other layers' files are.
    pub policy: PolicyConfig,
    /// The ledger of decisions.
    pub audit: AuditConfig,
    /// Network policy.
    pub network: NetworkConfig,
    /// Which built-in tools exist.
    pub tools: ToolsConfig,
    /// Model-facing catalog limits.
    pub catalog: CatalogConfig,
    /// tool_search limits.
    pub search: SearchConfig,
    /// Argument repair limits.
    pub repair: RepairConfig,
    /// Tool-name repair and suggestions.
    pub names: NamesConfig,
    /// Loop guard thresholds.
    pub loop_guard: LoopGuardConfig,
    /// Execution of calls.
    pub execution: ExecutionConfig,
    /// exec_shell limits.
    pub shell: ShellConfig,
    /// Confinement of file tools to the workspace.
    pub workspace: WorkspaceConfig,
    /// read_file limits.
    pub read_file: ReadFileConfig,
    /// list_dir limits.
    pub list_dir: ListDirConfig,
    /// grep_files limits.
    pub grep_files: GrepConfig,
    /// fetch_url limits.
    pub fetch_url: FetchConfig,
    /// Truncation of results.
    pub output: OutputConfig,
    /// The overflow store.
    pub overflow: OverflowConfig,
    /// Sub-agents.
    pub subagents: SubagentConfig,
    /// `toolslot serve`.
    pub server: ServerConfig,
    /// MCP servers.
    pub mcp: McpConfig,
    /// Language servers whose diagnostics follow an edit.
    pub lsp: LspConfig,
    /// Remote tool workers over NATS JetStream.
    pub remote: RemoteConfig,
    /// The `--config` file this configuration was loaded from, if any (named in explanations
    /// of its rules).
    #[serde(skip)]
    pub source_file: Option<PathBuf>,
}

/// How calls that need approval are treated (docs/CONTRACT.md, "Approval modes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalMode {
    /// Only Auto calls run; everything else is refused.
    ReadOnly,
    /// Suggest and Required calls ask the host.
    Ask,
    /// Suggest calls run; Required calls ask.
    AutoEdit,
    /// Everything runs.
    FullAuto,
}

impl std::str::FromStr for ApprovalMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "read-only" => Ok(Self::ReadOnly),
            "ask" => Ok(Self::Ask),
            "auto-edit" => Ok(Self::AutoEdit),
            "full-auto" => Ok(Self::FullAuto),
            other => Err(format!(
                "unknown approval mode `{other}` (expected read-only, ask, auto-edit or full-auto)"
            )),
        }
    }
}

/// `[approval]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalConfig {
    /// The session's default approval mode.
    pub mode: ApprovalMode,
    /// How long a call waits for the host's decision before it expires (ms, 0 = for ever).
    pub timeout_ms: u64,
}

/// `[policy]` of the configuration: the config layer's rules, the managed file, hook limits.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// The organisation's policy file (`~/` is the home folder); a missing file is no rules.
    pub managed_file: String,
    /// How long one hook may run (ms) when its table does not say.
    pub hook_timeout_ms: u64,
    /// Largest stdout or stderr read from a hook (bytes); more counts as a failure.
    pub hook_max_output_bytes: usize,
    /// The config layer's rules.
    pub rules: Vec<RuleConfig>,
}

/// What a rule decides for the calls it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleDecision {
    /// Run without asking (never a command that is not plain; never a wider sandbox).
    Allow,
    /// Ask the host, whatever the mode.
    Ask,
    /// Refuse.
    Deny,
}

impl RuleDecision {
    /// `allow`, `ask` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Ask => "ask",
            Self::Deny => "deny",
        }
    }
}

/// One `[[policy.rules]]` table, as written (docs/CONTRACT.md, "Policy rules").
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// Glob over tool names (`exec_shell`, `git__*`).
    pub tool: String,
    /// What the rule decides.
    pub decision: RuleDecision,
    /// A prefix of words matched against every simple command of a shell command (`*` as the
    /// last word matches any rest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Glob over path-like arguments, relative to the workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A JSON pointer into the input and a glob its value must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<InputMatcher>,
    /// The approval key a call must have (written by `approve_for_project`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Shown to the model when the rule denies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Inputs the rule must and must not match, checked when the policy loads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub examples: Option<RuleExamples>,
}

/// `input = { pointer = "/url", glob = "https://*" }` (or `["/url", "https://*"]`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct InputMatcher {
    /// A JSON pointer (RFC 6901) into the call's input.
    pub pointer: String,
    /// The glob the value there must match.
    pub glob: String,
}

impl<'de> Deserialize<'de> for InputMatcher {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Table {
            pointer: String,
            glob: String,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Table(Table),
            Pair(String, String),
        }
        match Repr::deserialize(d).map_err(|_| serde::de::Error::custom("input must be { pointer = \"/field\", glob = \"…\" }"))? {
            Repr::Table(t) => Ok(Self {
                pointer: t.pointer,
                glob: t.glob,
            }),
            Repr::Pair(pointer, glob) => Ok(Self { pointer, glob }),
        }
    }
}

/// `examples = { match = [...], not_match = [...] }`: a string is the command (for a rule with
/// `command`), the path (with `path`) or the value at the pointer (with `input`); a table is a
/// whole input.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RuleExamples {
    /// Inputs the rule must match.
    #[serde(default, rename = "match")]
    pub matches: Vec<serde_json::Value>,
    /// Inputs it must not match.
    #[serde(default)]
    pub not_match: Vec<serde_json::Value>,
}

/// When a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    /// Before the call is approved and run: may block, ask, allow or rewrite its input.
    PreToolUse,
    /// After it ran: may add context to the result, or withhold it.
    PostToolUse,
}

/// What a hook that crashed, timed out or answered garbage counts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HookOnError {
    /// As a block (the default: a broken check must not let the call through).
    #[default]
    Block,
    /// As if the hook said nothing.
    Allow,
}

/// One `[[hooks]]` table.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    /// `pre_tool_use` or `post_tool_use`.
    pub event: HookEvent,
    /// Glob over tool names (default every tool).
    #[serde(default = "any_tool")]
    pub tool: String,
    /// Program and arguments; the call arrives as JSON on stdin.
    pub command: Vec<String>,
    /// How long it may run (ms; default `policy.hook_timeout_ms`).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// What a failure counts as.
    #[serde(default)]
    pub on_error: HookOnError,
}

fn any_tool() -> String {
    "*".into()
}

/// `[audit]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// Folder of the per-session ledgers (`~/` expands; "" = no ledger).
    pub ledger_dir: String,
}

impl AuditConfig {
    /// The ledger folder, `~` expanded; `None` when no ledger is kept.
    pub fn ledger_path(&self) -> Option<PathBuf> {
        (!self.ledger_dir.is_empty()).then(|| expand_home(&self.ledger_dir))
    }
}

/// How network tools are approved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkPolicy {
    /// Ask, like any Required tool.
    Prompt,
    /// Run without asking.
    Allow,
    /// Refuse.
    Deny,
}

/// `[network]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkConfig {
    /// Approval of network tools.
    pub policy: NetworkPolicy,
    /// Hosts fetch_url may reach although they are not public.
    pub allow_hosts: Vec<String>,
}

/// `[tools]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {
    /// Built-in tools left out.
    pub disable: Vec<String>,
    /// Files the write tools refuse to write: globs relative to the workspace root (`*` within
    /// one path component, `**` across any number).
    pub protected: Vec<String>,
}

/// `[catalog]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogConfig {
    /// Longest description shown to the model (0 = no cap).
    pub description_max_chars: usize,
}

/// `[search]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    /// Default number of matches.
    pub top_n: usize,
    /// Largest number of matches one search may return.
    pub max_results: usize,
    /// Longest query a search reads, in characters; a longer one is refused with its length.
    pub max_query_chars: usize,
}

/// `[repair]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepairConfig {
    /// Argument text over this many bytes is refused unrepaired.
    pub max_input_bytes: usize,
    /// How often a string that should be an object/array is decoded.
    pub string_decode_depth: usize,
}

/// `[names]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamesConfig {
    /// Edit distance of "Did you mean" suggestions.
    pub suggest_max_distance: usize,
    /// Number of suggestions.
    pub suggest_max: usize,
    /// Shortest prefix resolved by prefix match.
    pub prefix_min_chars: usize,
}

/// `[loop_guard]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopGuardConfig {
    /// Occurrence of an identical call that is blocked.
    pub repeat_block: u32,
    /// Consecutive failures that warn.
    pub failure_warn: u32,
    /// Consecutive failures that pause the session.
    pub failure_pause: u32,
    /// Tools exempt from the repeat rule.
    pub exempt: Vec<String>,
}

/// `[execution]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionConfig {
    /// Per-call timeout (ms, 0 = none).
    pub call_timeout_ms: u64,
    /// Start eligible calls before the stream ends.
    pub speculative_start: bool,
    /// Worker threads (0 = the creating thread's arbiter).
    pub workers: usize,
    /// Events a live subscriber may fall behind.
    pub live_buffer: usize,
    /// The old name of `approval.timeout_ms`, still read when that one is 0.
    #[serde(default)]
    pub approval_timeout_ms: Option<u64>,
}

/// `[shell]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShellConfig {
    /// Command timeout (ms).
    pub timeout_ms: u64,
    /// Variables not passed to commands the model drives (exec_shell, extensions):
    /// case-insensitive globs on the variable's name.
    pub env_exclude: Vec<String>,
    /// Background tasks running at once per session.
    pub background_max_tasks: usize,
    /// Finished background tasks not polled for this long are forgotten (s).
    pub background_stale_secs: u64,
    /// Bytes one shell_output call reads.
    pub background_poll_max_bytes: u64,
    /// Variables passed to commands the model drives when they match none of `env_exclude`:
    /// case-insensitive globs (the core set: PATH, HOME, LANG, LC_*, …).
    pub env_core: Vec<String>,
    /// Variables passed to commands the model drives although no core glob names them, and
    /// even if `env_exclude` matches them: case-insensitive globs.
    pub env_passthrough: Vec<String>,
    /// Which OS sandbox commands and extension programs run in.
    pub sandbox: SandboxMode,
    /// Folders, besides the workspace and a private temporary folder, that commands approved to
    /// write may write (`~/` is the home folder).
    pub writable_paths: Vec<String>,
    /// CPU seconds each process of a command may use (0 = no limit).
    pub limit_cpu_secs: u64,
    /// Bytes of data (heap and private writable memory) each process may hold (0 = no limit).
    pub limit_memory_bytes: u64,
    /// Processes and threads the host's user may have while a command starts more (0 = no
    /// limit; the kernel does not apply it to root).
    pub limit_processes: u64,
    /// Largest file a command may write, in bytes (0 = no limit).
    pub limit_file_bytes: u64,
    /// Bytes of one command's output saved for retrieve_tool_result at most.
    pub max_saved_bytes: u64,
    /// Bytes a background task's log may reach before the task is killed.
    pub background_max_log_bytes: u64,
    /// Seconds a background task may run before it is killed (0 = no limit).
    pub background_max_secs: u64,
}

/// `shell.sandbox`: the OS sandbox of commands and extension programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// The strongest one available: bubblewrap, else Landlock, else none.
    Auto,
    /// bubblewrap: mount, process and network namespaces.
    Bwrap,
    /// Landlock: the kernel's access control of files, TCP and signals, in the process itself.
    Landlock,
    /// No sandbox: exec_shell then asks before every command.
    None,
}

/// `[workspace]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceConfig {
    /// Longest path a file tool accepts (bytes).
    pub max_path_bytes: usize,
    /// Most components a path a file tool accepts may have.
    pub max_path_components: usize,
}

/// `[read_file]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadFileConfig {
    /// Lines returned without an explicit limit.
    pub default_line_limit: usize,
    /// Largest file read (bytes).
    pub max_file_bytes: u64,
}

/// `[list_dir]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListDirConfig {
    /// Depth without an explicit one.
    pub default_depth: usize,
    /// Largest depth.
    pub max_depth: usize,
    /// Entries listed at most.
    pub max_entries: usize,
}

/// `[grep_files]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrepConfig {
    /// Matches returned at most.
    pub max_matches: usize,
    /// Longest matched line kept (characters).
    pub max_line_chars: usize,
    /// Files larger than this are skipped (bytes).
    pub max_file_bytes: u64,
}

/// `[fetch_url]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FetchConfig {
    /// Largest body read (bytes).
    pub max_bytes: usize,
    /// Whole-request timeout (ms).
    pub timeout_ms: u64,
    /// Redirects followed.
    pub max_redirects: usize,
}

/// `[output]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputConfig {
    /// Shell output cut above this (bytes).
    pub shell_max_bytes: usize,
    /// Shell head kept (bytes).
    pub shell_head_bytes: usize,
    /// Shell tail kept (bytes).
    pub shell_tail_bytes: usize,
    /// Other results cut above this (bytes).
    pub other_max_bytes: usize,
    /// Other head kept (bytes).
    pub other_head_bytes: usize,
    /// Other tail kept (bytes).
    pub other_tail_bytes: usize,
    /// Share of the head budget for rescued lines (percent).
    pub rescue_percent: usize,
    /// Structured results whose JSON is longer are kept under a handle (bytes).
    pub handle_min_bytes: usize,
    /// Longest structural summary of a handled result (bytes).
    pub handle_summary_bytes: usize,
    /// Array items (and nested keys) a summary shows.
    pub handle_preview_items: usize,
    /// Largest media block passed to the host (base64 bytes).
    pub block_max_bytes: usize,
    /// A program's answer (an extension's stdout) kept whole up to this size (bytes).
    pub program_whole_bytes: usize,
}

/// `[overflow]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverflowConfig {
    /// Folder of saved outputs (`~` expands to the home folder).
    pub dir: String,
    /// Days saved outputs are kept (0 = forever).
    pub retention_days: u64,
    /// Largest slice one retrieval returns (bytes).
    pub retrieve_max_bytes: usize,
}

impl OverflowConfig {
    /// The overflow folder with `~` expanded.
    pub fn dir_path(&self) -> PathBuf {
        expand_home(&self.dir)
    }
}

/// `[subagents]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubagentConfig {
    /// Deepest nesting of spawn_agent.
    pub max_depth: usize,
    /// Model turns one child may take.
    pub max_turns: usize,
}

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

/// `[remote]`: tools that run on worker processes, reached through NATS JetStream.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteConfig {
    /// The NATS server ("" = every tool runs in-process).
    pub nats_url: String,
    /// Tool-name globs → the pool of workers that runs them.
    pub routes: std::collections::BTreeMap<String, String>,
    /// How long a worker may stay silent on a call before its delivery counts as lost (ms).
    pub ack_wait_ms: u64,
    /// Deliveries of a read-only call at most (a lost worker's read-only call goes to another).
    pub read_only_max_deliveries: i64,
    /// A worker not heard from for this long is gone (ms).
    pub announce_ttl_ms: u64,
    /// How often the dispatcher's watchdog looks at each remote call in flight (ms).
    pub watchdog_interval_ms: u64,
    /// Results larger than this travel through the object store (bytes).
    pub inline_result_max_bytes: usize,
    /// How long call records and stored results are kept (s).
    pub record_ttl_secs: u64,
    /// Window in which a repeated publish of the same call is dropped as a duplicate (s).
    pub dedup_window_secs: u64,
    /// A queued call nobody took within this long is dropped (s).
    pub job_max_age_secs: u64,
    /// Calls one worker runs at once, unless `--slots` says otherwise.
    pub worker_slots: usize,
    /// How often an idle worker looks at its queues when no publish woke it (ms).
    pub worker_poll_ms: u64,
    /// How long a stopping worker lets its running calls finish (s).
    pub worker_shutdown_grace_secs: u64,
    /// How long a dispatcher's lease on a session lasts unless renewed (ms).
    pub session_lease_ttl_ms: u64,
    /// How long a session's record is kept after its last write (s).
    pub session_ttl_secs: u64,
    /// How many saved outputs a durable session keeps in the object store for a dispatcher
    /// that takes it over (the newest; 0: none).
    pub session_saved_max: usize,
}

impl RemoteConfig {
    /// Whether remote execution is on.
    pub fn enabled(&self) -> bool {
        !self.nats_url.trim().is_empty()
    }
}

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
    /// How much of a stdio server's stderr (the end) a failure report quotes, in bytes.
    pub stderr_tail_bytes: usize,
    /// How long a server's question waits for the host's answer before it is declined (ms).
    pub elicitation_timeout_ms: u64,
    /// Where each server's last tool listing is kept ("" keeps none: every server starts at
    /// start-up to list its tools).
    pub tool_cache_dir: String,
    /// Longest JSON-RPC message read from a stdio server (bytes).
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
    /// Environment variables set for the server process.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
}

/// One `[[extensions]]` table: an out-of-process tool.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtensionConfig {
    /// Tool name.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// Declared capabilities (`read_only`, `writes_files`, …).
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Program and arguments; JSON arguments arrive on stdin.
    pub command: Vec<String>,
    /// The input schema as JSON text.
    pub input_schema: String,
    /// Whether calls may run in parallel.
    #[serde(default)]
    pub parallel: bool,
    /// Whether the tool is deferred until tool_search activates it.
    #[serde(default)]
    pub defer: bool,
    /// Variables passed to the program even though `shell.env_exclude` matches them (the
    /// token an extension needs for its own work).
    #[serde(default)]
    pub env_passthrough: Vec<String>,
}

impl Config {
    /// How long a call waits for the host's decision (ms, 0 = for ever): `approval.timeout_ms`,
    /// or the old `execution.approval_timeout_ms` when only that one is set.
    pub fn approval_timeout_ms(&self) -> u64 {
        match self.approval.timeout_ms {
            0 => self.execution.approval_timeout_ms.unwrap_or(0),
            ms => ms,
        }
    }

    /// Loads the built-in defaults, overlaid by `file` and then by `TOOLSLOT_*` variables.
    ///
    /// # Errors
    /// [`ConfigError::File`] when the file is unreadable, malformed or holds an unknown key or
    /// a value of the wrong type; [`ConfigError::Env`] when an environment variable does.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        Self::load_with_env(file, std::env::vars())
    }

    /// As [`Config::load`], with the environment given explicitly (tests use this).
    ///
    /// # Errors
    /// As [`Config::load`].
    pub fn load_with_env(file: Option<&Path>, env: impl IntoIterator<Item = (String, String)>) -> Result<Config, ConfigError> {
        let defaults = config::File::from_str(DEFAULT_TOML, config::FileFormat::Toml).required(true);
        let mut builder = config::Config::builder().add_source(defaults.clone());
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?;
            builder = builder.add_source(config::File::from_str(&text, config::FileFormat::Toml));
        }
        // The file layer is checked alone first so its errors name the file, not "the config".
        let without_env: Config = builder.clone().build().and_then(|c| c.try_deserialize()).map_err(|e| match file {
            Some(path) => ConfigError::File {
                path: path.to_path_buf(),
                reason: e.to_string(),
            },
            None => ConfigError::Builtin(e.to_string()),
        })?;
        let vars: config::Map<String, String> = env.into_iter().filter(|(k, _)| k.starts_with("TOOLSLOT_")).collect();
        if vars.is_empty() {
            return without_env.validated().map(|c| c.loaded_from(file));
        }
        let names: Vec<String> = vars.keys().cloned().collect();
        let env_source = config::Environment::with_prefix("TOOLSLOT")
            .prefix_separator("_")
            .separator("__")
            .list_separator(",")
            .with_list_parse_key("network.allow_hosts")
            .with_list_parse_key("server.allowed_hosts")
            .with_list_parse_key("server.allowed_origins")
            .with_list_parse_key("tools.disable")
            .with_list_parse_key("loop_guard.exempt")
            .try_parsing(true)
            .source(Some(vars));
        builder
            .add_source(env_source)
            .build()
            .and_then(|c| c.try_deserialize::<Config>())
            .map_err(|e| ConfigError::Env {
                vars: names.join(", "),
                reason: e.to_string(),
            })?
            .validated()
            .map(|c| c.loaded_from(file))
    }

    fn loaded_from(mut self, file: Option<&Path>) -> Self {
        self.source_file = file.map(Path::to_path_buf);
        self
    }

    /// Checks relations between keys that serde cannot express.
    fn validated(self) -> Result<Config, ConfigError> {
        let o = &self.output;
        if o.shell_head_bytes + o.shell_tail_bytes > o.shell_max_bytes {
            return Err(ConfigError::Invalid {
                key: "output.shell_head_bytes + output.shell_tail_bytes".into(),
                reason: "must not exceed output.shell_max_bytes".into(),
            });
        }
        if o.other_head_bytes + o.other_tail_bytes > o.other_max_bytes {
            return Err(ConfigError::Invalid {
                key: "output.other_head_bytes + output.other_tail_bytes".into(),
                reason: "must not exceed output.other_max_bytes".into(),
            });
        }
        if o.rescue_percent > 100 {
            return Err(ConfigError::Invalid {
                key: "output.rescue_percent".into(),
                reason: format!("{} is not a percentage (0..=100)", o.rescue_percent),
            });
        }
        let mut names = std::collections::HashSet::new();
        for (i, server) in self.lsp.servers.iter().enumerate() {
            let key = format!("lsp.servers[{i}]");
            let refuse = |reason: String| ConfigError::Invalid { key: key.clone(), reason };
            if server.name.trim().is_empty() {
                return Err(refuse("has no name".into()));
            }
            if !names.insert(server.name.as_str()) {
                return Err(refuse(format!("repeats the name `{}`", server.name)));
            }
            if server.command.is_empty() {
                return Err(refuse(format!("`{}` has no command", server.name)));
            }
            if server.extensions.iter().all(|e| e.trim_start_matches('.').is_empty()) {
                return Err(refuse(format!("`{}` handles no file extension", server.name)));
            }
        }
        if self.hooks.iter().any(|h| h.command.is_empty()) {
            return Err(ConfigError::Invalid {
                key: "hooks.command".into(),
                reason: "a hook needs a program to run".into(),
            });
        }
        for (pattern, pool) in &self.remote.routes {
            if pool.is_empty() || !pool.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
                return Err(ConfigError::Invalid {
                    key: format!("remote.routes.\"{pattern}\""),
                    reason: format!("pool `{pool}` must be letters, digits, `_` or `-` (it names a NATS subject token)"),
                });
            }
        }
        let r = &self.remote;
        if r.enabled()
            && (r.ack_wait_ms < 1000 || r.announce_ttl_ms < 1000 || r.watchdog_interval_ms == 0 || r.read_only_max_deliveries < 1)
        {
            return Err(ConfigError::Invalid {
                key: "remote.ack_wait_ms / announce_ttl_ms / watchdog_interval_ms / read_only_max_deliveries".into(),
                reason: "ack_wait_ms and announce_ttl_ms must be at least 1000 (JetStream counts in seconds and whole heartbeats), the watchdog interval above 0, and deliveries at least 1".into(),
            });
        }
        for (key, entries) in [
            ("network.allow_hosts", &self.network.allow_hosts),
            ("server.allowed_hosts", &self.server.allowed_hosts),
        ] {
            for entry in entries {
                HostPattern::parse(entry).map_err(|reason| ConfigError::Invalid { key: key.into(), reason })?;
            }
        }
        for origin in &self.server.allowed_origins {
            let ok = url::Url::parse(origin).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some() && u.path() == "/");
            if !ok {
                return Err(ConfigError::Invalid {
                    key: "server.allowed_origins".into(),
                    reason: format!("`{origin}` is not an origin (scheme://host[:port])"),
                });
            }
        }
        if self.server.cancel_on_disconnect && self.server.disconnect_grace_ms == 0 {
            return Err(ConfigError::Invalid {
                key: "server.disconnect_grace_ms".into(),
                reason: "must be at least 1 with server.cancel_on_disconnect (a round whose events are read is checked again every grace)"
                    .into(),
            });
        }
        if self.loop_guard.repeat_block < 2 {
            return Err(ConfigError::Invalid {
                key: "loop_guard.repeat_block".into(),
                reason: "must be at least 2, or every call would be blocked".into(),
            });
        }
        Ok(self)
    }

    /// The built-in defaults alone; they are tested to load, so this cannot fail at run time.
    pub fn builtin() -> Config {
        match Self::load_with_env(None, std::iter::empty()) {
            Ok(c) => c,
            // The defaults are compiled in and covered by a unit test; reaching this means
            // the binary itself was built broken.
            Err(e) => panic!("built-in config/default.toml does not load: {e}"),
        }
    }
}

/// `path` with a leading `~/` replaced by the home folder.
pub fn expand_home(path: &str) -> PathBuf {
    if let Some(rest) = path.strip_prefix("~/")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    PathBuf::from(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_with(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn builtin_defaults_load() {
        let c = Config::builtin();
        assert_eq!(c.approval.mode, ApprovalMode::Ask);
        assert_eq!(c.network.policy, NetworkPolicy::Prompt);
        assert_eq!(
            (c.output.shell_max_bytes, c.output.shell_head_bytes, c.output.shell_tail_bytes),
            (30_000, 22_000, 8_000)
        );
        assert_eq!(c.loop_guard.repeat_block, 3);
    }

    #[test]
    fn remote_routes_name_pools_nats_accepts() {
        let f = file_with("[remote]\nroutes = { \"exec_shell\" = \"shell\", \"git__*\" = \"mcp-pool_2\" }\n");
        let c = Config::load_with_env(Some(f.path()), std::iter::empty()).unwrap();
        assert_eq!(c.remote.routes.get("git__*").map(String::as_str), Some("mcp-pool_2"));
        assert!(!c.remote.enabled(), "routes alone route nothing: no NATS server is named");
        for bad in ["a.b", "a b", "", "x>"] {
            let f = file_with(&format!("[remote]\nroutes = {{ \"exec_shell\" = \"{bad}\" }}\n"));
            let err = Config::load_with_env(Some(f.path()), std::iter::empty()).unwrap_err().to_string();
            assert!(err.contains("remote.routes"), "{bad:?}: {err}");
        }
        let f = file_with("[remote]\nnats_url = \"nats://127.0.0.1:4222\"\nack_wait_ms = 10\n");
        let err = Config::load_with_env(Some(f.path()), std::iter::empty()).unwrap_err().to_string();
        assert!(err.contains("ack_wait_ms"), "{err}");
    }

    #[test]
    fn file_overlays_defaults() {
        let f = file_with("[approval]\nmode = \"full-auto\"\n[network]\nallow_hosts = [\"127.0.0.1\"]\n");
        let c = Config::load_with_env(Some(f.path()), std::iter::empty()).unwrap();
        assert_eq!(c.approval.mode, ApprovalMode::FullAuto);
        assert_eq!(c.network.allow_hosts, vec!["127.0.0.1".to_string()]);
        assert_eq!(c.search.top_n, 5, "untouched keys keep their defaults");
    }

    #[test]
    fn env_overlays_file() {
        let f = file_with("[approval]\nmode = \"full-auto\"\n");
        let env = vec![
            ("TOOLSLOT_APPROVAL__MODE".to_string(), "read-only".to_string()),
            ("TOOLSLOT_SEARCH__TOP_N".to_string(), "9".to_string()),
            ("PATH".to_string(), "/bin".to_string()),
        ];
        let c = Config::load_with_env(Some(f.path()), env).unwrap();
        assert_eq!(c.approval.mode, ApprovalMode::ReadOnly);
        assert_eq!(c.search.top_n, 9);
    }

    #[test]
    fn unknown_key_names_file_and_key() {
        let f = file_with("[output]\nshell_max_byte = 5\n");
        let err = Config::load_with_env(Some(f.path()), std::iter::empty()).unwrap_err();
        let text = err.to_string();
        assert!(text.contains(&f.path().display().to_string()), "{text}");
        assert!(text.contains("shell_max_byte"), "{text}");
    }

    #[test]
    fn malformed_file_is_a_clear_error() {
        let f = file_with("[approval\nmode = ");
        let err = Config::load_with_env(Some(f.path()), std::iter::empty()).unwrap_err();
        assert!(matches!(err, ConfigError::File { .. }), "{err}");
    }

    #[test]
    fn wrong_type_names_the_key() {
        let f = file_with("[search]\ntop_n = \"many\"\n");
        let err = Config::load_with_env(Some(f.path()), std::iter::empty()).unwrap_err();
        assert!(err.to_string().contains("top_n"), "{err}");
    }

    #[test]
    fn bad_env_value_names_the_variable() {
        let env = vec![("TOOLSLOT_APPROVAL__MODE".to_string(), "yolo".to_string())];
        let err = Config::load_with_env(None, env).unwrap_err();
        assert!(err.to_string().contains("TOOLSLOT_APPROVAL__MODE"), "{err}");
    }

    #[test]
    fn a_zero_disconnect_grace_is_refused_only_while_it_cancels() {
        let f = file_with("[server]\ndisconnect_grace_ms = 0\n");
        let err = Config::load_with_env(Some(f.path()), std::iter::empty()).unwrap_err();
        assert!(err.to_string().contains("server.disconnect_grace_ms"), "{err}");
        let f = file_with("[server]\ndisconnect_grace_ms = 0\ncancel_on_disconnect = false\n");
        assert!(Config::load_with_env(Some(f.path()), std::iter::empty()).is_ok());
    }

    #[test]
    fn missing_file_is_a_clear_error() {
        let err = Config::load_with_env(Some(Path::new("/nonexistent/x.toml")), std::iter::empty()).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/x.toml"), "{err}");
    }

    #[test]
    fn inconsistent_budget_is_refused() {
        let f = file_with("[output]\nshell_head_bytes = 29000\n");
        let err = Config::load_with_env(Some(f.path()), std::iter::empty()).unwrap_err();
        assert!(err.to_string().contains("shell_head_bytes"), "{err}");
    }

    #[test]
    fn bad_host_entries_and_origins_are_refused() {
        for (text, key) in [
            ("[network]\nallow_hosts = [\"intranet:http\"]\n", "network.allow_hosts"),
            ("[server]\nallowed_hosts = [\"[::1\"]\n", "server.allowed_hosts"),
            ("[server]\nallowed_origins = [\"ui.example\"]\n", "server.allowed_origins"),
            (
                "[server]\nallowed_origins = [\"https://ui.example/app\"]\n",
                "server.allowed_origins",
            ),
        ] {
            let f = file_with(text);
            let err = Config::load_with_env(Some(f.path()), std::iter::empty()).unwrap_err();
            assert!(err.to_string().contains(key), "{text}: {err}");
        }
        let f = file_with(
            "[network]\nallow_hosts = [\"127.0.0.1:8080\", \"[::1]:9000\", \"db.internal\"]\n[server]\nallowed_origins = [\"https://ui.example\"]\n",
        );
        assert!(Config::load_with_env(Some(f.path()), std::iter::empty()).is_ok());
    }
}
