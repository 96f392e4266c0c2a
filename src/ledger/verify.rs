//! Checking a ledger: its keyed chain record by record, then its end against its sealed head.

use std::path::Path;

use serde_json::Value;

use super::seal::{Head, LedgerKey, Seal, read_head};
use super::{GENESIS, LedgerError, mac_message, record_hash};

/// What a ledger that verifies holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// How many records.
    pub records: u64,
    /// Their session (none in a ledger of no records).
    pub session: Option<String>,
    /// Whether a closing record is among them: the session closed. A session still open
    /// verifies against its head so far.
    pub closed: bool,
    /// Records past the sealed head: written just before a crash (a session's parallel calls
    /// write theirs together and seal them with one head), whose head was not yet. Their MACs
    /// hold, so they were written with the key; nothing below the head was removed.
    pub unsealed: u64,
    /// The id of the key the records are MACed under.
    pub key_id: String,
}

/// Why a ledger does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The file (or its head) cannot be read.
    #[error("cannot read {path}: {reason}")]
    Unreadable {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The key the records are MACed under cannot be read: nothing can be checked.
    #[error("cannot check the ledger's MACs: the key {path} cannot be read: {reason}")]
    Key {
        /// The key file (`audit.key_file`).
        path: String,
        /// Why.
        reason: String,
    },
    /// The ledger names another key than the one given.
    #[error(
        "the ledger's first record names key {ledger}, not this key ({key}): check it with the key that wrote it (audit.key_file), or it was rewritten"
    )]
    WrongKey {
        /// The key id its first record names.
        ledger: String,
        /// The given key's id.
        key: String,
    },
    /// The chain breaks at this record.
    #[error("the chain breaks at seq {seq} (line {line}): {reason}")]
    Broken {
        /// The first record that does not hold (the one expected there, when its own is unreadable).
        seq: u64,
        /// Its line, from 1.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// Records were cut from the end (or all of them, or the file deleted).
    #[error("record {seq} of {sealed} missing: the ledger ends before its sealed head")]
    Truncated {
        /// The first record missing.
        seq: u64,
        /// How many records the head seals.
        sealed: u64,
    },
    /// A keyed ledger whose head is missing: its tail cannot be checked.
    #[error("no sealed head for this ledger in {heads}: nothing proves where its {records} records end")]
    NoHead {
        /// How many records it holds.
        records: u64,
        /// The folder the head was looked for in.
        heads: String,
    },
    /// A ledger written before keys: its chain holds, but proves nothing.
    #[error(
        "unkeyed ledger (written before ledger keys): its {records} records are chained by plain SHA-256, which anyone who can write the file can recompute, so it cannot prove its tail or its content"
    )]
    Unkeyed {
        /// How many records its plain chain holds.
        records: u64,
    },
}

impl VerifyError {
    /// The record the failure is at, when it is at one.
    pub fn seq(&self) -> Option<u64> {
        match self {
            Self::Broken { seq, .. } | Self::Truncated { seq, .. } => Some(*seq),
            _ => None,
        }
    }
}

/// Where a keyed chain ends.
#[derive(Debug)]
pub(super) struct End {
    /// How many records.
    pub records: u64,
    /// The last one's MAC ([`GENESIS`] for none).
    pub last_mac: String,
    /// Whether a closing record is among them.
    pub closed: bool,
    /// Their session.
    pub session: Option<String>,
    /// How many are past the head.
    pub unsealed: u64,
    /// Whether it has a head at all.
    pub headed: bool,
}

/// Checks the ledger at `path` under the key `key_file` (`audit.key_file`) and the head kept
/// beside it: every record's `seq` follows the previous one's (from 1), its `prev` is the previous
/// record's MAC, its `mac` is the key's MAC of its content, and it belongs to the session the
/// file is named for; then the ledger ends where its head says, or later (records written just
/// before a crash, whose head was not yet: reported unsealed).
///
/// # Errors
/// [`VerifyError::Broken`] at the first record that does not hold (changed, removed, inserted,
/// reordered, appended or recomputed without the key); [`VerifyError::Truncated`] when the
/// ledger ends before its head (its tail cut, emptied, deleted); [`VerifyError::Unkeyed`] for a
/// ledger of the format before keys; the others when it cannot be checked.
pub fn verify(path: &Path, key_file: &Path) -> Result<Verified, VerifyError> {
    let heads = Seal::heads_dir(key_file);
    let name = path.file_stem().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let head = read_head(&heads, &name).map_err(unreadable)?;
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && head.is_some() => String::new(),
        Err(e) => {
            return Err(VerifyError::Unreadable {
                path: path.display().to_string(),
                reason: e.to_string(),
            });
        }
    };
    let Some(first) = text.lines().next() else {
        return Err(match head {
            Some(h) if h.records > 0 => VerifyError::Truncated { seq: 1, sealed: h.records },
            _ => VerifyError::NoHead {
                records: 0,
                heads: heads.display().to_string(),
            },
        });
    };
    let first: Option<Value> = serde_json::from_str(first).ok();
    let unkeyed = first.as_ref().is_some_and(|r| r.get("hash").is_some() && r.get("mac").is_none());
    if unkeyed {
        let records = walk_plain(&text)?;
        return Err(match head {
            Some(h) => VerifyError::Broken {
                seq: 1,
                line: 1,
                reason: format!(
                    "its records are unkeyed (plain SHA-256), but its sealed head says toolslot wrote {} keyed records: the chain was recomputed without the key",
                    h.records
                ),
            },
            None => VerifyError::Unkeyed { records },
        });
    }
    let seal = Seal::open(key_file).map_err(|e| VerifyError::Key {
        path: e.path.display().to_string(),
        reason: e.reason,
    })?;
    let end = against(&text, &name, &seal, head.as_ref())?;
    Ok(Verified {
        records: end.records,
        session: end.session,
        closed: end.closed,
        unsealed: end.unsealed,
        key_id: seal.key().id().to_string(),
    })
}

/// Checks what the ledger named `name` holds (`text`) against its head under `seal`, for
/// writing on: a ledger of no records with no head is a new one.
pub(super) fn check(text: &str, name: &str, seal: &Seal) -> Result<End, VerifyError> {
    let head = read_head(seal.heads(), name).map_err(unreadable)?;
    against(text, name, seal, head.as_ref())
}

fn unreadable(e: LedgerError) -> VerifyError {
    VerifyError::Unreadable {
        path: e.path.display().to_string(),
        reason: e.reason,
    }
}

/// The keyed chain of `text`, then its end against `head`.
fn against(text: &str, name: &str, seal: &Seal, head: Option<&Head>) -> Result<End, VerifyError> {
    let sealed = head.map_or(0, |h| h.records);
    let chain = walk_keyed(text, name, seal.key(), sealed)?;
    if chain.records < sealed {
        return Err(VerifyError::Truncated {
            seq: chain.records + 1,
            sealed,
        });
    }
    if let Some(h) = head {
        if chain.mac_at_head.as_deref() != Some(h.mac.as_str()) {
            let at = usize::try_from(sealed).unwrap_or(usize::MAX);
            return Err(VerifyError::Broken {
                seq: sealed,
                line: at,
                reason: "its MAC is not the one its sealed head holds: the ledger was rewritten".into(),
            });
        }
        if chain.session.as_deref().is_some_and(|s| s != h.session) {
            return Err(VerifyError::Broken {
                seq: 1,
                line: 1,
                reason: format!("its session is not its sealed head's (`{}`): the ledger was swapped", h.session),
            });
        }
    }
    // Records past a head are what a crash between their sync and their head leaves (their
    // MACs hold). A ledger of several records without any head is not: its head is made
    // before its first record, so the head was deleted, and nothing shows where it ended.
    if head.is_none() && chain.records > 1 {
        return Err(VerifyError::NoHead {
            records: chain.records,
            heads: seal.heads().display().to_string(),
        });
    }
    Ok(End {
        records: chain.records,
        last_mac: chain.last_mac,
        closed: chain.closed,
        session: chain.session,
        unsealed: chain.records - sealed,
        headed: head.is_some(),
    })
}

/// A keyed chain, walked.
struct Chain {
    records: u64,
    last_mac: String,
    /// The MAC of the record the head seals (`GENESIS` for none), when there is one.
    mac_at_head: Option<String>,
    closed: bool,
    session: Option<String>,
}

/// Walks the keyed records of `text`, the ledger named `name`, under `key`; notes the MAC of
/// record `sealed`.
fn walk_keyed(text: &str, name: &str, key: &LedgerKey, sealed: u64) -> Result<Chain, VerifyError> {
    let mut chain = Chain {
        records: 0,
        last_mac: GENESIS.to_string(),
        mac_at_head: (sealed == 0).then(|| GENESIS.to_string()),
        closed: false,
        session: None,
    };
    for (n, line) in text.lines().enumerate() {
        let expected = chain.records + 1;
        let broken = |reason: String, seq: u64| VerifyError::Broken { seq, line: n + 1, reason };
        let record: Value = serde_json::from_str(line).map_err(|e| broken(format!("not a JSON record: {e}"), expected))?;
        let at = follows(&record, expected).map_err(|reason| broken(reason, record_seq(&record).unwrap_or(expected)))?;
        match record.get("key_id").and_then(Value::as_str) {
            Some(id) if id == key.id() => {}
            Some(id) if chain.records == 0 => {
                return Err(VerifyError::WrongKey {
                    ledger: id.to_string(),
                    key: key.id().to_string(),
                });
            }
            Some(_) => return Err(broken("it names another key than the records before it".into(), at)),
            None if record.get("hash").is_some() => {
                return Err(broken(
                    "it is unkeyed (a plain SHA-256 `hash`, no `mac`) in a keyed ledger".into(),
                    at,
                ));
            }
            None => return Err(broken("no key_id".into(), at)),
        }
        if record.get("prev").and_then(Value::as_str) != Some(chain.last_mac.as_str()) {
            return Err(broken("prev is not the previous record's MAC".into(), at));
        }
        let Some(mac) = record.get("mac").and_then(Value::as_str) else {
            return Err(broken("no mac".into(), at));
        };
        if !key.holds(mac_message(&record).as_bytes(), mac) {
            return Err(broken(
                "its MAC does not match its content: it was changed, or written without the key".into(),
                at,
            ));
        }
        // Its MAC holds: what it says is what toolslot wrote.
        let Some(session) = record.get("session").and_then(Value::as_str) else {
            return Err(broken("no session".into(), at));
        };
        if crate::tool_name::sanitize_tool_name(session) != name || chain.session.as_deref().is_some_and(|s| s != session) {
            return Err(broken(
                format!("it belongs to session `{session}`, not to the ledger named `{name}`: the file was swapped or renamed"),
                at,
            ));
        }
        if chain.session.is_none() {
            chain.session = Some(session.to_string());
        }
        chain.closed |= record.get("kind").and_then(Value::as_str) == Some("close");
        chain.last_mac = mac.to_string();
        chain.records += 1;
        if chain.records == sealed {
            chain.mac_at_head = Some(chain.last_mac.clone());
        }
    }
    Ok(chain)
}

/// Walks an unkeyed chain (each record's plain SHA-256 `hash`, `prev` the previous one's);
/// returns how many records hold.
fn walk_plain(text: &str) -> Result<u64, VerifyError> {
    let mut prev = GENESIS.to_string();
    let mut count = 0u64;
    for (n, line) in text.lines().enumerate() {
        let expected = count + 1;
        let broken = |reason: String, seq: u64| VerifyError::Broken { seq, line: n + 1, reason };
        let record: Value = serde_json::from_str(line).map_err(|e| broken(format!("not a JSON record: {e}"), expected))?;
        let at = follows(&record, expected).map_err(|reason| broken(reason, record_seq(&record).unwrap_or(expected)))?;
        if record.get("prev").and_then(Value::as_str) != Some(prev.as_str()) {
            return Err(broken("prev is not the previous record's hash".into(), at));
        }
        let Some(hash) = record.get("hash").and_then(Value::as_str) else {
            return Err(broken("no hash".into(), at));
        };
        if record_hash(&record) != hash {
            return Err(broken("its hash does not match its content".into(), at));
        }
        prev = hash.to_string();
        count += 1;
    }
    Ok(count)
}

fn record_seq(record: &Value) -> Option<u64> {
    record.get("seq").and_then(Value::as_u64)
}

/// Whether `record`'s seq is `expected`; returns it.
fn follows(record: &Value, expected: u64) -> Result<u64, String> {
    match record_seq(record) {
        Some(seq) if seq == expected => Ok(seq),
        seq => Err(format!(
            "seq is {}, expected {expected}",
            seq.map_or("missing".into(), |s| s.to_string())
        )),
    }
}
