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
    /// The store of trusted project policy files could not be used.
    #[error(transparent)]
    Trust(#[from] TrustError),
}

/// Why the store of trusted project policy files (`policy.trust_file`) could not be read or
/// changed, or a project's file cannot be trusted; each in one line naming the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TrustError {
    /// `policy.trust_file` is "": no project policy file is trusted, and none can be.
    #[error("policy.trust_file is \"\": no project policy file can be trusted (set it to a file outside every workspace)")]
    Disabled,
    /// `policy.trust_file` names a place a checkout could hold.
    #[error("policy.trust_file `{}` {reason}", path.display())]
    Place {
        /// The store, as configured (home expanded).
        path: PathBuf,
        /// Why it may not be used there.
        reason: String,
    },
    /// The store is unreadable or malformed.
    #[error("trust store {}: {reason}", path.display())]
    Store {
        /// The store.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The store could not be written.
    #[error("cannot write the trust store {}: {reason}", path.display())]
    Write {
        /// The store.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The project's policy file cannot be trusted: there is none, it cannot be read, or it
    /// is a link out of its workspace.
    #[error("cannot trust {}: {reason}", path.display())]
    Project {
        /// The project's policy file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}
