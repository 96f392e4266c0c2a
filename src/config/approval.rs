//! The sections that decide whether a call runs and record what was decided: `[approval]`,
//! `[policy]` with its rules, the `[[hooks]]` tables and `[audit]`.

use std::path::PathBuf;

use serde::Deserialize;

use super::{Config, expand_home};

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
    /// Where `toolslot trust` records the project policy files whose allow rules apply (the
    /// SHA-256 of each file's bytes, by its canonical path); `~/` is the home folder. It must
    /// lie outside every workspace. Default `~/.toolslot/trusted.toml`; "" trusts no project
    /// file, so no project's allow rule ever applies.
    pub trust_file: String,
    /// How long one hook may run (ms) when its table does not say.
    pub hook_timeout_ms: u64,
    /// Largest stdout or stderr read from a hook (bytes); more counts as a failure.
    pub hook_max_output_bytes: usize,
    /// Largest program file whose content a rule on a program compares with the denied
    /// program's (a copy under another name), in bytes; a larger one is compared by identity
    /// (device and inode) only. Default 64 MiB; 0 compares no content.
    pub program_hash_max_bytes: u64,
    /// Most files and folders looked at to find what a `path` deny rule names, before a
    /// program starts (the sandbox masks each one found); past it the program is not started.
    /// Default 100000; 0 = no limit.
    pub mask_max_entries: usize,
    /// Largest project policy file read (bytes); a larger one is refused unread.
    pub project_file_max_bytes: u64,
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
    /// The key the ledger's records are MACed under (`~/` expands), made on first use; the
    /// heads that seal each ledger's end live in `heads/` beside it.
    pub key_file: String,
    /// How long what the ledger's guarantee does not need at once may wait for its sync (ms;
    /// 0 = nothing waits): a call's outcome record, and the head after any record. A decision
    /// is always on disk before its call runs.
    pub lazy_seal_ms: u64,
}

impl AuditConfig {
    /// `lazy_seal_ms` as a duration.
    pub fn lazy_seal(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.lazy_seal_ms)
    }

    /// The ledger folder, `~` expanded; `None` when no ledger is kept.
    pub fn ledger_path(&self) -> Option<PathBuf> {
        (!self.ledger_dir.is_empty()).then(|| expand_home(&self.ledger_dir))
    }

    /// The key file, `~` expanded.
    pub fn key_path(&self) -> PathBuf {
        expand_home(&self.key_file)
    }
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
}
