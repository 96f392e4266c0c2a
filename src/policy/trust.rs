//! Which projects' policy files the user trusts to loosen what is asked.
//!
//! A checkout may always restrict: its `.toolslot/policy.toml`'s deny and ask rules apply,
//! whoever wrote them. It may loosen only once the user has trusted that file's exact content
//! (`toolslot trust DIR`), since a cloned repository must not grant itself permissions. The
//! store (`policy.trust_file`, outside every workspace) keeps the SHA-256 of each trusted
//! file's bytes by the file's canonical path; a file that changed by one byte is untrusted
//! again, and its allow rules are reported, not applied ([`Untrusted`]).
//!
//! This module decides and reads; writing the store is `project_policy`'s, the IO edge that
//! also writes the project's file for `approve_for_project`.
//!
//! # Example
//! ```
//! use toolslot::policy::trust::{TrustKey, TrustState, TrustStore, sha256_hex};
//! let key = TrustKey::from_canonical("/work/app/.toolslot/policy.toml".as_ref()).unwrap();
//! let mut store = TrustStore::default();
//! store.trust(&key, sha256_hex(b"[[policy.rules]]\n"));
//! assert_eq!(store.state(&key, &sha256_hex(b"[[policy.rules]]\n")), TrustState::Trusted);
//! assert_eq!(store.state(&key, &sha256_hex(b"[[policy.rules]] \n")), TrustState::Changed);
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{PROJECT_FILE, TrustError};
use crate::config::{PolicyConfig, expand_home};

/// The trusted project policy files: canonical path → SHA-256 (hex) of the bytes trusted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustStore {
    #[serde(default)]
    trusted: BTreeMap<String, String>,
}

/// Where a project's policy file stands with the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TrustState {
    /// Its content is the content that was trusted.
    Trusted,
    /// It was trusted, with other content.
    Changed,
    /// It was never trusted (or was revoked).
    Unknown,
}

/// A project policy file's key in the store: its canonical path, as UTF-8 (a path that is not
/// UTF-8 has no key, so no lossy spelling can stand for two files).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TrustKey(String);

impl TrustKey {
    /// The key of `path`, which the caller has made canonical; `None` when it is not UTF-8.
    pub fn from_canonical(path: &Path) -> Option<Self> {
        path.to_str().map(|s| Self(s.to_string()))
    }

    /// The file's canonical path.
    pub fn as_path(&self) -> &Path {
        Path::new(&self.0)
    }
}

impl fmt::Display for TrustKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The first lines of the store as toolslot writes it.
const HEADER: &str = "# Project policy files whose allow rules apply, written by `toolslot trust` (and by\n# approve_for_project on a file that was trusted): canonical path = SHA-256 of the bytes\n# trusted. A file whose bytes differ is untrusted again.\n";

impl TrustStore {
    /// Reads the store at `path`; a missing file is an empty store.
    ///
    /// # Errors
    /// [`TrustError::Store`] when it cannot be read or is not a store.
    pub fn read(path: &Path) -> Result<Self, TrustError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(TrustError::Store {
                path: path.to_path_buf(),
                reason: e.to_string(),
            }),
        }
    }

    /// The store written as `text` (read from `path`, which errors name).
    ///
    /// # Errors
    /// [`TrustError::Store`] when it is not TOML of `[trusted]` path = digest pairs.
    pub fn parse(text: &str, path: &Path) -> Result<Self, TrustError> {
        let bad = |reason: String| TrustError::Store {
            path: path.to_path_buf(),
            reason,
        };
        let store: Self = toml::from_str(text).map_err(|e| bad(e.message().lines().next().unwrap_or("malformed TOML").to_string()))?;
        if let Some((file, _)) = store.trusted.iter().find(|(_, d)| !is_digest(d)) {
            return Err(bad(format!("the digest of `{file}` is not a SHA-256 in hex")));
        }
        Ok(store)
    }

    /// The store as TOML, with a header saying what it is.
    pub fn to_toml(&self) -> String {
        let mut doc = toml_edit::DocumentMut::new();
        let mut table = toml_edit::Table::new();
        for (file, digest) in &self.trusted {
            table.insert(file, toml_edit::value(digest.as_str()));
        }
        doc.insert("trusted", toml_edit::Item::Table(table));
        format!("{HEADER}{doc}")
    }

    /// Where the file under `key` stands, its bytes now hashing to `digest`.
    pub fn state(&self, key: &TrustKey, digest: &str) -> TrustState {
        match self.trusted.get(&key.0) {
            Some(d) if d == digest => TrustState::Trusted,
            Some(_) => TrustState::Changed,
            None => TrustState::Unknown,
        }
    }

    /// Trusts the file under `key` with the content whose SHA-256 is `digest` (any other
    /// content it had trusted is no longer).
    pub fn trust(&mut self, key: &TrustKey, digest: String) {
        self.trusted.insert(key.0.clone(), digest);
    }

    /// Forgets the file under `key`; whether it was there.
    pub fn revoke(&mut self, key: &TrustKey) -> bool {
        self.trusted.remove(&key.0).is_some()
    }

    /// Every trusted file, by path, with the digest trusted.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str)> {
        self.trusted.iter().map(|(f, d)| (f.as_str(), d.as_str()))
    }
}

fn is_digest(d: &str) -> bool {
    d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// The SHA-256 of `bytes`, in lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The key of `workspace`'s project policy file, which must be the workspace's own: its
/// canonical path is the canonical workspace's `.toolslot/policy.toml`.
///
/// # Errors
/// [`TrustError::Project`] when there is no such file, or it resolves elsewhere (a link out
/// of the checkout could lend it another file's trust), or its path is not UTF-8.
pub fn trust_key(workspace: &Path) -> Result<TrustKey, TrustError> {
    let file = workspace.join(PROJECT_FILE);
    let bad = |reason: String| TrustError::Project {
        path: file.clone(),
        reason,
    };
    let real = match file.canonicalize() {
        Ok(p) => p,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(bad("there is no project policy file".into())),
        Err(e) => return Err(bad(e.to_string())),
    };
    let own = workspace.canonicalize().map_err(|e| bad(e.to_string()))?.join(PROJECT_FILE);
    if real != own {
        return Err(bad(format!(
            "it resolves to {}, not to the workspace's own {PROJECT_FILE}: only a file the checkout holds itself can be trusted",
            real.display()
        )));
    }
    TrustKey::from_canonical(&real).ok_or_else(|| bad("its path is not UTF-8".into()))
}

/// The store's place (`policy.trust_file`, `~/` expanded), checked against `workspace` when
/// one is given.
///
/// # Errors
/// [`TrustError::Disabled`] when it is ""; [`TrustError::Place`] when it is relative (it would
/// follow the current folder, often a checkout) or lies inside `workspace` other than under
/// its `.toolslot` folder (which no tool may write): a repository could bring it.
pub fn store_path(config: &PolicyConfig, workspace: Option<&Path>) -> Result<PathBuf, TrustError> {
    if config.trust_file.is_empty() {
        return Err(TrustError::Disabled);
    }
    let path = expand_home(&config.trust_file);
    let bad = |reason: String| TrustError::Place {
        path: path.clone(),
        reason,
    };
    if !path.is_absolute() {
        return Err(bad(
            "is relative: it must be absolute (or start with ~/), outside every workspace".into()
        ));
    }
    let Some(ws) = workspace.and_then(|w| w.canonicalize().ok()) else {
        return Ok(path);
    };
    // The store may not exist yet: its nearest existing folder says where it lies.
    let mut real = path.clone();
    let mut rest = Vec::new();
    while !real.exists() {
        match (real.file_name().map(ToOwned::to_owned), real.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                real = parent.to_path_buf();
            }
            _ => break,
        }
    }
    let mut real = real.canonicalize().unwrap_or(real);
    real.extend(rest.iter().rev());
    if real.starts_with(&ws) && !real.starts_with(ws.join(".toolslot")) {
        return Err(bad(format!(
            "lies inside the workspace {}, where a checkout could bring it",
            ws.display()
        )));
    }
    Ok(path)
}

/// A project policy file whose allow rules were not applied, because its content is not
/// trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untrusted {
    /// The project's policy file.
    pub file: PathBuf,
    /// The folder `toolslot trust` takes (the workspace, canonical where it can be).
    pub dir: PathBuf,
    /// Why it is not trusted.
    pub why: Distrust,
    /// How many allow rules were not applied.
    pub ignored: usize,
}

/// Why a project's policy file is not trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Distrust {
    /// Its content was never trusted (or was revoked).
    Never,
    /// It was trusted with other content.
    Changed,
    /// No trust can be read for it (the store, or the file's place): why.
    Unusable(String),
}

impl Distrust {
    /// Why, as a clause: "it was never trusted", "it changed since it was trusted", or the
    /// reason no trust could be read.
    pub fn reason(&self) -> String {
        match self {
            Self::Never => "it was never trusted".to_string(),
            Self::Changed => "it changed since it was trusted".to_string(),
            Self::Unusable(reason) => reason.clone(),
        }
    }
}

impl Untrusted {
    /// The command that trusts the file's present content.
    pub fn command(&self) -> String {
        trust_command(&self.dir)
    }

    /// What `policy explain` and `policy check` say of each allow rule not applied.
    pub fn not_applied(&self) -> String {
        format!("not applied: the project's policy file is not trusted (run `{}`)", self.command())
    }

    /// The host's notice: the file, why, how many allow rules were ignored, how to trust it.
    pub fn message(&self) -> String {
        let why = match &self.why {
            Distrust::Never => String::new(),
            other => format!(" ({})", other.reason()),
        };
        let rules = if self.ignored == 1 { "rule was" } else { "rules were" };
        format!(
            "the project's policy file {} is not trusted{why}: its {} allow {rules} not applied (its deny and ask rules were); review it, then run `{}` to apply them",
            self.file.display(),
            self.ignored,
            self.command()
        )
    }
}

/// `toolslot trust DIR`, DIR written as one shell word.
pub fn trust_command(dir: &Path) -> String {
    format!("toolslot trust {}", shell_word(&dir.display().to_string()))
}

/// `word` as one shell word: as it is when it holds nothing a shell reads specially, else in
/// single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
#[path = "trust_tests.rs"]
mod tests;
