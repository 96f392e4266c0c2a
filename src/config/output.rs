//! What becomes of results: `[output]` truncation, the `[overflow]` store that keeps what was
//! cut, and the `[subagents]` limits.

use std::path::PathBuf;

use serde::Deserialize;

use super::expand_home;

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
