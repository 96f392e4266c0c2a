//! Configuration: every limit and policy of the runtime, loaded in layers.
//!
//! The built-in `config/default.toml` (compiled into the binary) is overlaid by an optional
//! file and then by `TOOLSLOT_<SECTION>__<KEY>` environment variables, through the `config`
//! crate. Every struct here denies unknown fields, so a misspelt key is an error that names
//! the file and key rather than a limit that silently keeps its default.
//!
//! Each section's structs sit in the file named after its part of `config/default.toml`, so a
//! key is found where the defaults file puts it; loading and the checks across sections are
//! apart from them.
//!
//! # Example
//! ```
//! let cfg = toolslot::config::Config::load(None).unwrap();
//! assert_eq!(cfg.output.shell_max_bytes, 30_000);
//! ```

mod approval;
mod error;
mod host_pattern;
mod load;
mod mcp;
mod output;
mod remote;
mod server;
mod telemetry;
mod tools;
mod validate;

use std::path::PathBuf;

use serde::Deserialize;

pub use approval::{
    ApprovalConfig, ApprovalMode, AuditConfig, HookConfig, HookEvent, HookOnError, InputMatcher, PolicyConfig, RuleConfig, RuleDecision,
    RuleExamples,
};
pub use error::ConfigError;
pub use host_pattern::HostPattern;
pub use load::{DEFAULT_TOML, expand_home};
pub use mcp::{LspConfig, LspServerConfig, McpConfig, McpServerConfig};
pub use output::{OutputConfig, OverflowConfig, SubagentConfig};
pub use remote::{NatsLogin, RemoteConfig, TlsFiles};
pub use server::ServerConfig;
pub use telemetry::TelemetryConfig;
pub use tools::{
    CatalogConfig, ExecutionConfig, ExtensionConfig, FetchConfig, GrepConfig, ListDirConfig, LoopGuardConfig, NamesConfig, NetworkConfig,
    NetworkPolicy, ReadFileConfig, RepairConfig, SandboxMode, SearchConfig, ShellConfig, ToolsConfig, WorkspaceConfig,
};

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
    /// OpenTelemetry export.
    pub telemetry: TelemetryConfig,
    /// The `--config` file this configuration was loaded from, if any (named in explanations
    /// of its rules).
    #[serde(skip)]
    pub source_file: Option<PathBuf>,
}

#[cfg(test)]
mod tests;
