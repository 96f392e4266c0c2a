//! Checking a ledger's chain.

use std::path::Path;

use serde_json::Value;

use super::{GENESIS, record_hash};

/// Why a ledger does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The file cannot be read.
    #[error("cannot read {path}: {reason}")]
    Unreadable {
        /// The file.
        path: String,
        /// Why.
        reason: String,
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
}

/// Checks every record of the ledger at `path`: its `seq` follows the previous one's (from 1),
/// its `prev` is the previous record's `hash`, and its `hash` is its own. Returns how many
/// records hold.
///
/// # Errors
/// [`VerifyError::Broken`] at the first record that does not hold (a record changed, removed,
/// inserted or reordered breaks the chain there).
pub fn verify(path: &Path) -> Result<u64, VerifyError> {
    let text = std::fs::read_to_string(path).map_err(|e| VerifyError::Unreadable {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    let mut prev = GENESIS.to_string();
    let mut count = 0u64;
    for (n, line) in text.lines().enumerate() {
        let expected = count + 1;
        let broken = |reason: String, seq: u64| VerifyError::Broken { seq, line: n + 1, reason };
        let record: Value = serde_json::from_str(line).map_err(|e| broken(format!("not a JSON record: {e}"), expected))?;
        let seq = record.get("seq").and_then(Value::as_u64);
        let at = seq.unwrap_or(expected);
        if seq != Some(expected) {
            return Err(broken(
                format!("seq is {}, expected {expected}", seq.map_or("missing".into(), |s| s.to_string())),
                at,
            ));
        }
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
