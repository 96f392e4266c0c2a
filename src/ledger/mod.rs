//! The ledger: every decision on a call and every outcome, one JSON line each, each line
//! chained to the one before by a MAC under toolslot's key, and its end sealed by a head kept
//! apart from it, so that a line removed, changed, inserted or appended, a tail cut off, or the
//! whole chain recomputed by someone without the key is found by [`verify`].
//!
//! One file per session (`<audit.ledger_dir>/<session>.jsonl`). A record is written, flushed and
//! synced before the call it allows runs: a decision that is not on disk did not happen, so a
//! failed write refuses the call ([`Ledger::append`] returns the error to say so). When the
//! session closes, a closing record ([`Ledger::close`]) ends it.
//!
//! `mac` is HMAC-SHA-256 (hex) under the key (`audit.key_file`, see [`Seal`]) of the record's
//! canonical JSON (keys sorted, no spaces) without `mac`; `prev` is the previous record's MAC
//! ([`GENESIS`] for the first), so the MAC covers it; `key_id` names the key; `seq` counts from
//! one. After each record the session's [`Head`] (how many records, the last MAC) is written
//! beside the key. Records written at once by a session's parallel calls share one sync and one
//! head ([`Sealer`]); a record that may wait (a call's outcome) is sealed within a bound by the
//! next sync or the sealing thread ([`seal_within`]).
//!
//! Ledgers written before keys (each record with a plain SHA-256 `hash` instead of `mac`) are
//! still read by [`verify`], which says they are unkeyed: anyone who can write such a file can
//! recompute its chain, so it proves nothing about its content or its tail.

mod head;
mod later;
mod seal;
mod sealer;
mod verify;

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::canonical::{canonical_json, canonical_map};
use crate::hex::hex;

pub use later::seal_within;
pub use seal::{Head, LedgerKey, Seal, head_path, read_head};
pub use sealer::Sealer;
pub use verify::{Verified, VerifyError, verify};

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
    /// The session closed ([`Ledger::close`]): the ledger's sealed end, unless calls that were
    /// still ending when it closed record their outcomes after it.
    Close,
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
    closed: bool,
    seal: Seal,
    sealer: std::sync::Arc<Sealer>,
    /// The file's length after its last whole record: where a record that failed half-way is
    /// cut back to.
    len: u64,
    /// Why nothing more can be written: a record failed half-way and could not be cut back.
    broken: Option<String>,
}

impl Ledger {
    /// The file of `session`'s ledger in `dir`.
    pub fn file_in(dir: &Path, session: &str) -> PathBuf {
        dir.join(format!("{}.jsonl", crate::tool_name::sanitize_tool_name(session)))
    }

    /// Opens (or creates) `session`'s ledger in `dir`, MACed under `seal`'s key, continuing the
    /// chain of what it holds (a session resumed after a restart writes on in the same file).
    ///
    /// # Errors
    /// [`LedgerError`] when the folder or file cannot be made or read, or what it holds does
    /// not verify against its head (written on, a cut tail would be sealed as the end: it is
    /// left as it is for [`verify`] to report).
    pub fn open(dir: &Path, session: &str, seal: Seal) -> Result<Self, LedgerError> {
        let path = Self::file_in(dir, session);
        let name = crate::tool_name::sanitize_tool_name(session);
        let err = |reason: String| LedgerError {
            path: path.clone(),
            reason,
        };
        std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(err(e.to_string())),
        };
        let end =
            verify::check(&text, &name, &seal).map_err(|e| err(format!("it does not verify, so nothing more is written to it: {e}")))?;
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            // Who allowed what is the user's business only.
            options.mode(0o600);
        }
        let file = options.open(&path).map_err(|e| err(e.to_string()))?;
        let own = file.try_clone().map_err(|e| err(e.to_string()))?;
        // A ledger gets its head before its first record: a crash in the middle of its first
        // group of records then leaves them past a head (unsealed), never a ledger without one,
        // which `verify` reads as a deleted head.
        let head = if end.headed {
            None
        } else {
            let first = Head {
                session: session.to_string(),
                records: end.records,
                mac: end.last_mac.clone(),
                closed: end.closed,
                key_id: seal.key().id().to_string(),
            };
            Some(head::HeadFile::create(seal.heads(), &name, &first).map_err(|e| LedgerError {
                path: head_path(seal.heads(), &name),
                reason: format!("its head cannot be written: {e}"),
            })?)
        };
        // The file's name without `.jsonl` is also its head's.
        let sealer = Sealer::new(own, path.clone(), seal.heads().to_path_buf(), name, end.records, head);
        Ok(Self {
            path,
            file,
            session: session.to_string(),
            seq: end.records,
            prev: end.last_mac,
            closed: end.closed,
            seal,
            sealer: std::sync::Arc::new(sealer),
            len: text.len() as u64,
            broken: None,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many records it holds.
    pub fn records(&self) -> u64 {
        self.seq
    }

    /// Appends `entry` as the next record, flushed and synced to disk, then its head, before it
    /// returns.
    ///
    /// # Errors
    /// [`LedgerError`] when it is not on disk (the chain is left as it was when it could not
    /// be written), or its head is not (the record is, and the next record's head seals it).
    pub fn append(&mut self, entry: &Entry<'_>) -> Result<Value, LedgerError> {
        let (record, seq) = self.append_written(entry)?;
        self.sealer.seal_through(seq)?;
        Ok(record)
    }

    /// Appends `entry` as the next record, written but not yet synced: the caller makes it
    /// durable with [`Sealer::seal_through`] on its number (after letting other writers of this
    /// ledger append theirs, so one sync serves them all).
    ///
    /// # Errors
    /// [`LedgerError`] when it could not be written (the chain is left as it was).
    pub fn append_written(&mut self, entry: &Entry<'_>) -> Result<(Value, u64), LedgerError> {
        let mut record = self.opening(entry.kind);
        record.insert("call_id".into(), json!(entry.call_id));
        record.insert("index".into(), json!(entry.index));
        record.insert("tool".into(), json!(entry.tool));
        record.insert("input_sha256".into(), json!(input_sha256(entry.input)));
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
        self.write(record, entry.kind == Kind::Close)
    }

    /// Appends the closing record (`kind: "close"`): the session ended here.
    ///
    /// # Errors
    /// As [`Ledger::append`].
    pub fn close(&mut self) -> Result<Value, LedgerError> {
        let (record, seq) = self.close_written()?;
        self.sealer.seal_through(seq)?;
        Ok(record)
    }

    /// The closing record, written but not yet synced (see [`Ledger::append_written`]).
    ///
    /// # Errors
    /// As [`Ledger::append_written`].
    pub fn close_written(&mut self) -> Result<(Value, u64), LedgerError> {
        let record = self.opening(Kind::Close);
        self.write(record, true)
    }

    /// What makes this ledger's written records durable, for use outside a lock on it.
    pub fn sealer(&self) -> std::sync::Arc<Sealer> {
        std::sync::Arc::clone(&self.sealer)
    }

    /// What every record starts with.
    fn opening(&self, kind: Kind) -> Map<String, Value> {
        let mut record = Map::new();
        record.insert("seq".into(), json!(self.seq + 1));
        record.insert("ts".into(), json!(now()));
        record.insert("session".into(), json!(self.session));
        record.insert("kind".into(), json!(kind));
        record
    }

    /// Chains `record` (its key id, `prev` and `mac`) and writes it; returns it with its number.
    fn write(&mut self, mut record: Map<String, Value>, closing: bool) -> Result<(Value, u64), LedgerError> {
        let key = self.seal.key();
        record.insert("key_id".into(), json!(key.id()));
        record.insert("prev".into(), json!(self.prev));
        // The MAC is over the record as it is now, without `mac` (what `mac_message` makes of
        // the finished one), without copying it to take `mac` out.
        let mac = key.mac(canonical_map(&record).as_bytes());
        record.insert("mac".into(), json!(mac));
        let record = Value::Object(record);
        let mut line = canonical_json(&record);
        line.push('\n');
        let failed = |reason: String| LedgerError {
            path: self.path.clone(),
            reason,
        };
        if let Some(why) = &self.broken {
            return Err(failed(why.clone()));
        }
        if let Err(e) = self.file.write_all(line.as_bytes()).and_then(|()| self.file.flush()) {
            // A record written in part would end the chain in a line that does not parse:
            // cut it off, so the ledger is as it was before.
            if let Err(cut) = self.file.set_len(self.len) {
                self.broken = Some(format!(
                    "a record failed half-way ({e}) and could not be cut off ({cut}); nothing more is written"
                ));
            }
            return Err(failed(e.to_string()));
        }
        self.len += line.len() as u64;
        self.seq += 1;
        self.prev = mac;
        self.closed |= closing;
        self.sealer.written(Head {
            session: self.session.clone(),
            records: self.seq,
            mac: self.prev.clone(),
            closed: self.closed,
            key_id: key.id().to_string(),
        });
        Ok((record, self.seq))
    }
}

/// The SHA-256 (hex) of `input`'s canonical JSON: which input ran, without keeping it.
pub fn input_sha256(input: &Value) -> String {
    hex(&Sha256::digest(canonical_json(input).as_bytes()))
}

/// The hash of an unkeyed record (the format before keys): SHA-256 of its canonical JSON
/// without `hash`.
pub(crate) fn record_hash(record: &Value) -> String {
    let mut without = record.clone();
    if let Some(map) = without.as_object_mut() {
        map.remove("hash");
    }
    hex(&Sha256::digest(canonical_json(&without).as_bytes()))
}

/// What a keyed record's MAC is taken over: its canonical JSON without `mac` (`prev`, the
/// previous record's MAC, included).
pub(crate) fn mac_message(record: &Value) -> String {
    let mut without = record.clone();
    if let Some(map) = without.as_object_mut() {
        map.remove("mac");
    }
    canonical_json(&without)
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
