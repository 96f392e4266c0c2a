//! Reading and writing call records with compare-and-set: the one place a call's fate is
//! decided (see `toolslot::remote::wire`).

use async_nats::jetstream::kv;
use toolslot::remote::wire::CallRecord;

/// Why a compare-and-set write did not happen.
#[derive(Debug, thiserror::Error)]
pub enum CasError {
    /// Someone wrote first: the revision (or the key's absence) was not as expected.
    #[error("the record changed meanwhile")]
    Conflict,
    /// NATS did not answer, or answered with an error.
    #[error("{0}")]
    Nats(String),
}

/// The record of `key` and its revision, if there is one.
///
/// # Errors
/// A reason when NATS did not answer or the record is not ours.
pub async fn read(store: &kv::Store, key: &str) -> Result<Option<(CallRecord, u64)>, String> {
    let Some(entry) = store.entry(key).await.map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    if entry.operation != kv::Operation::Put {
        return Ok(None);
    }
    let record = serde_json::from_slice(&entry.value).map_err(|e| format!("record `{key}` is not a call record: {e}"))?;
    Ok(Some((record, entry.revision)))
}

/// A record's bytes, as stored.
pub fn encode(record: &CallRecord) -> bytes::Bytes {
    // A CallRecord is plain data (strings, numbers, JSON values): it always serializes.
    serde_json::to_vec(record).unwrap_or_default().into()
}

/// Writes `record` under `key` if there is none; returns the new revision.
///
/// # Errors
/// [`CasError::Conflict`] when a record exists.
pub async fn create(store: &kv::Store, key: &str, record: &CallRecord) -> Result<u64, CasError> {
    store.create(key, encode(record)).await.map_err(|e| match e.kind() {
        kv::CreateErrorKind::AlreadyExists => CasError::Conflict,
        _ => CasError::Nats(e.to_string()),
    })
}

/// Replaces the record of `key` if its revision is still `revision`; returns the new one.
///
/// # Errors
/// [`CasError::Conflict`] when someone wrote meanwhile.
pub async fn update(store: &kv::Store, key: &str, record: &CallRecord, revision: u64) -> Result<u64, CasError> {
    store.update(key, encode(record), revision).await.map_err(|e| match e.kind() {
        kv::UpdateErrorKind::WrongLastRevision => CasError::Conflict,
        _ => CasError::Nats(e.to_string()),
    })
}
