//! Errors of configuration loading.

use std::path::PathBuf;

/// Why the configuration could not be loaded. Every variant names where the problem is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The `--config` file is unreadable, malformed, or holds a bad key or value.
    #[error("config file {}: {reason}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong, as the parser said it (names the key).
        reason: String,
    },
    /// A `TOOLSLOT_*` environment variable holds a bad key or value.
    #[error("environment ({vars}): {reason}")]
    Env {
        /// The TOOLSLOT_* variables that were set.
        vars: String,
        /// What is wrong.
        reason: String,
    },
    /// The built-in defaults do not load (a broken build).
    #[error("built-in config/default.toml: {0}")]
    Builtin(String),
    /// Keys that load but contradict each other.
    #[error("config key {key}: {reason}")]
    Invalid {
        /// The key or keys.
        key: String,
        /// Why the value is refused.
        reason: String,
    },
}
