//! Why a policy was refused.

use std::path::PathBuf;

/// A policy that cannot be used: every variant names the file (or layer) and, where it is one
/// rule's fault, the rule, in one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A policy file is unreadable or malformed, or holds an unknown key.
    #[error("policy file {}: {reason}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong (the TOML parser's words name the key).
        reason: String,
    },
    /// A rule cannot be compiled (a bad glob, an empty command, a JSON pointer without `/`).
    #[error("{place}: rule {index} (tool `{tool}`): {reason}")]
    Rule {
        /// The layer and file.
        place: String,
        /// The rule's index in its layer, from 0.
        index: usize,
        /// The rule's tool glob.
        tool: String,
        /// What is wrong.
        reason: String,
    },
    /// A rule's example does not behave.
    #[error("{place}: rule {index} (tool `{tool}`): example {example} {problem}")]
    Example {
        /// The layer and file.
        place: String,
        /// The rule's index in its layer, from 0.
        index: usize,
        /// The rule's tool glob.
        tool: String,
        /// The example, as JSON.
        example: String,
        /// How it misbehaves ("should match but does not").
        problem: String,
    },
    /// A key only the managed file may hold (or hooks in a project's file).
    #[error("policy file {}: {reason}", path.display())]
    NotHere {
        /// The file.
        path: PathBuf,
        /// Which key, and why not here.
        reason: String,
    },
    /// A project rule could not be written.
    #[error("cannot write the project policy {}: {reason}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}
