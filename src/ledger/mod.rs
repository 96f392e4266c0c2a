//! The ledger: every decision on a call and every outcome, one JSON line each, each line
//! chained to the one before by its SHA-256, so that a line removed, changed or inserted is
//! found by [`verify`].
//!
//! One file per session (`<audit.ledger_dir>/<session>.jsonl`). A record is written, flushed and
//! synced before the call it allows runs: a decision that is not on disk did not happen, so a
//! failed write refuses the call ([`Ledger::append`] returns the error to say so).
//!
//! `hash` is the SHA-256 (hex) of the record's canonical JSON (keys sorted, no spaces) without
//! `hash`; `prev` is the previous record's hash ([`GENESIS`] for the first); `seq` counts from 1.

mod verify;

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::canonical::canonical_json;

pub use verify::{VerifyError, verify};

/// The `prev` of a ledger's first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Whether a record is a decision or an outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Whether the call may run.
    Decision,
    /// How it ended.
    Outcome,
}

/// Who decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A policy rule.
    Rule,
    /// A hook's answer (or its failure, under its `on_error`).
    Hook,
    /// The host's answer to an approval request (or a remembered one).
    Host,
    /// The approval mode's table.
    Mode,
    /// Nobody answered in time.
    Timeout,
}

/// One record to append (the ledger adds `seq`, `ts`, `session`, `prev` and `hash`).
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    /// The provider's call id.
    pub call_id: &'a str,
    /// The call's index in its response.
    pub index: usize,
    /// The resolved tool name.
    pub tool: &'a str,
    /// The input that runs (its SHA-256 is recorded, not the input).
    pub input: &'a Value,
    /// Decision or outcome.
    pub kind: Kind,
    /// `allow` or `deny` (for an outcome, the decision it ran under).
    pub decision: &'a str,
    /// Who decided.
    pub source: Source,
    /// The rule that decided, `{"layer", "file", "index"}`.
    pub rule: Option<Value>,
    /// How it ended (`ok`, `error`, `withheld`), for an outcome.
    pub outcome: Option<&'a str>,
    /// More about the decision (`approve_for_session`, a hook's command), when there is more.
    pub detail: Option<&'a str>,
}

/// Why the ledger could not be written: the call it was to record does not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the ledger {} cannot be written: {reason}", path.display())]
pub struct LedgerError {
    /// The file.
    pub path: PathBuf,
    /// Why.
    pub reason: String,
}

/// A session's ledger, open for appending.
#[derive(Debug)]
pub struct Ledger {
    path: PathBuf,
    file: std::fs::File,
    session: String,
    seq: u64,
    prev: String,
}

impl Ledger {
    /// Opens (or creates) `session`'s ledger in `dir`, continuing the chain of what it holds (a
    /// session resumed after a restart writes on in the same file).
    ///
    /// # Errors
    /// [`LedgerError`] when the folder or file cannot be made or read, or its last line is not
    /// a record.
    pub fn open(dir: &Path, session: &str) -> Result<Self, LedgerError> {
        let path = dir.join(format!("{}.jsonl", crate::tool_name::sanitize_tool_name(session)));
        let err = |reason: String| LedgerError {
            path: path.clone(),
            reason,
        };
        std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
        let (seq, prev) = match std::fs::read_to_string(&path) {
            Ok(text) => match text.lines().rev().find(|l| !l.trim().is_empty()) {
                Some(last) => {
                    let v: Value = serde_json::from_str(last).map_err(|e| err(format!("its last line is not a record: {e}")))?;
                    let seq = v
                        .get("seq")
                        .and_then(Value::as_u64)
                        .ok_or_else(|| err("its last record has no seq".into()))?;
                    let hash = v
                        .get("hash")
                        .and_then(Value::as_str)
                        .ok_or_else(|| err("its last record has no hash".into()))?;
                    (seq, hash.to_string())
                }
                None => (0, GENESIS.to_string()),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (0, GENESIS.to_string()),
            Err(e) => return Err(err(e.to_string())),
        };
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            // Who allowed what is the user's business only.
            options.mode(0o600);
        }
        let file = options.open(&path).map_err(|e| err(e.to_string()))?;
        Ok(Self {
            path,
            file,
            session: session.to_string(),
            seq,
            prev,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `entry` as the next record, flushed and synced to disk before it returns.
    ///
    /// # Errors
    /// [`LedgerError`] when it is not on disk; the chain is left as it was.
    pub fn append(&mut self, entry: &Entry<'_>) -> Result<Value, LedgerError> {
        let mut record = Map::new();
        record.insert("seq".into(), json!(self.seq + 1));
        record.insert("ts".into(), json!(now()));
        record.insert("session".into(), json!(self.session));
        record.insert("call_id".into(), json!(entry.call_id));
        record.insert("index".into(), json!(entry.index));
        record.insert("tool".into(), json!(entry.tool));
        record.insert("input_sha256".into(), json!(input_sha256(entry.input)));
        record.insert("kind".into(), json!(entry.kind));
        record.insert("decision".into(), json!(entry.decision));
        record.insert("source".into(), json!(entry.source));
        if let Some(rule) = &entry.rule {
            record.insert("rule".into(), rule.clone());
        }
        if let Some(outcome) = entry.outcome {
            record.insert("outcome".into(), json!(outcome));
        }
        if let Some(detail) = entry.detail {
            record.insert("detail".into(), json!(detail));
        }
        record.insert("prev".into(), json!(self.prev));
        let hash = record_hash(&Value::Object(record.clone()));
        record.insert("hash".into(), json!(hash));
        let record = Value::Object(record);
        let mut line = canonical_json(&record);
        line.push('\n');
        let written = self
            .file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.flush())
            .and_then(|()| self.file.sync_data());
        written.map_err(|e| LedgerError {
            path: self.path.clone(),
            reason: e.to_string(),
        })?;
        self.seq += 1;
        self.prev = hash;
        Ok(record)
    }
}

/// The SHA-256 (hex) of `input`'s canonical JSON: which input ran, without keeping it.
pub fn input_sha256(input: &Value) -> String {
    hex(&Sha256::digest(canonical_json(input).as_bytes()))
}

/// The hash of a record: SHA-256 of its canonical JSON without `hash`.
pub(crate) fn record_hash(record: &Value) -> String {
    let mut without = record.clone();
    if let Some(map) = without.as_object_mut() {
        map.remove("hash");
    }
    hex(&Sha256::digest(canonical_json(&without).as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Now, in RFC 3339 (UTC, milliseconds).
fn now() -> String {
    let t = time::OffsetDateTime::now_utc();
    let t = t.replace_nanosecond(t.millisecond() as u32 * 1_000_000).unwrap_or(t);
    t.format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

#[cfg(test)]
#[path = "ledger_tests.rs"]
mod tests;
