//! How tools reach the model and run: `[network]` through `[fetch_url]` in the order of
//! `config/default.toml`, and the `[[extensions]]` tables.

use serde::Deserialize;

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
    /// Rank with the sentence model beside the words (false: the lexical ranker alone).
    pub semantic: bool,
    /// The sentence model's folder; empty: found in one of `model_venvs`.
    pub model_dir: String,
    /// Virtual environments searched for the installed model package.
    pub model_venvs: Vec<String>,
    /// Longest token sequence the model reads of one tool's text.
    pub model_max_tokens: usize,
    /// How many tools' vectors are kept between index builds.
    pub model_cache_tools: usize,
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
    /// Credentials masked from the programs toolslot runs on its own account (hooks, language
    /// servers); `~/` is the home folder.
    pub secret_paths: Vec<String>,
    /// Unix socket files a program without the network may still reach (bubblewrap only).
    pub allow_unix_sockets: Vec<String>,
    /// Seconds a session's bubblewrap sandbox is kept idle for its next read-only command
    /// (0 = a fresh sandbox for every command).
    pub warm_sandbox_idle_secs: u64,
    /// Idle session sandboxes kept at most, across sessions.
    pub warm_sandboxes_max: usize,
    /// Milliseconds a command cleared to write waits for the workspace's lock when another
    /// program holds it alone (`sandbox/protect.rs`) before it is refused.
    pub policy_lock_wait_ms: u64,
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
