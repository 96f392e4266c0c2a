//! Reading and writing call records with compare-and-set: the one place a call's fate is
//! decided (see `toolslot::remote::wire`).
//!
//! Every record is signed for the call's key as it is written (`toolslot::remote::seal`), and
//! checked as it is read: with signing on, a record not signed by a key trusted for the worker
//! it names (`started`, `done`), or for the dispatcher or a worker (`abandoned`), is
//! [`ReadError::Forged`], never a state of the call. Whether a `done` comes from the key that
//! signed the claim is the dispatcher's check (it saw the claim; `hub.rs`).

use async_nats::jetstream::kv;
use toolslot::remote::seal::{Domain, SealError, Sealer, Speaker};
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

/// Why a record could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// NATS did not answer, or answered with an error: the record may be fine.
    #[error("{0}")]
    Nats(String),
    /// The record under the key is not one a dispatcher or worker wrote: unsigned, forged, or
    /// not a call record. Its revision lets the dispatcher write over it.
    #[error("record `{key}` {reason}")]
    Forged {
        /// The call's key.
        key: String,
        /// Its revision.
        revision: u64,
        /// Why it was refused.
        reason: String,
    },
}

/// The record of `key` and its revision, if there is one.
///
/// # Errors
/// [`ReadError`] when NATS did not answer or the record is not one of ours.
pub async fn read(store: &kv::Store, sealer: &Sealer, key: &str) -> Result<Option<(CallRecord, u64)>, ReadError> {
    read_signed(store, sealer, key)
        .await
        .map(|r| r.map(|(record, revision, _)| (record, revision)))
}

/// As [`read`], with the public key that signed the record (`None` when signing is off).
///
/// # Errors
/// [`ReadError`] when NATS did not answer or the record is not one of ours.
pub async fn read_signed(store: &kv::Store, sealer: &Sealer, key: &str) -> Result<Option<(CallRecord, u64, Option<String>)>, ReadError> {
    let Some(entry) = store.entry(key).await.map_err(|e| ReadError::Nats(e.to_string()))? else {
        return Ok(None);
    };
    if entry.operation != kv::Operation::Put {
        return Ok(None);
    }
    decode(sealer, key, &entry.value)
        .map(|(record, signer)| Some((record, entry.revision, signer)))
        .map_err(|reason| ReadError::Forged {
            key: key.to_string(),
            revision: entry.revision,
            reason,
        })
}

/// The record in `bytes` (a stored value or an answer message) of the call `key`, and the
/// public key that signed it (`None` when signing is off).
///
/// # Errors
/// Why it is refused: its signature does not verify, its key is not trusted for whom the
/// record speaks for, or it is not a call record.
pub fn decode(sealer: &Sealer, key: &str, bytes: &[u8]) -> Result<(CallRecord, Option<String>), String> {
    let opened = sealer.open_any(Domain::Record, key, bytes).map_err(|e: SealError| e.to_string())?;
    let record: CallRecord = serde_json::from_slice(opened.body).map_err(|e| format!("is not a call record: {e}"))?;
    let speaker = match &record {
        CallRecord::Started { worker, .. } | CallRecord::Done { worker, .. } => Speaker::Worker(worker),
        CallRecord::Abandoned { .. } => Speaker::Anyone,
    };
    sealer.vouches(opened.signer.as_deref(), speaker).map_err(|e| e.to_string())?;
    Ok((record, opened.signer))
}

/// A record's bytes as stored (and as sent as an answer), signed for the call's key.
pub fn encode(sealer: &Sealer, key: &str, record: &CallRecord) -> bytes::Bytes {
    // A CallRecord is plain data (strings, numbers, JSON values): it always serializes.
    let body = serde_json::to_vec(record).unwrap_or_default();
    sealer.seal(Domain::Record, key, &body).into()
}

/// Writes `record` under `key` if there is none; returns the new revision.
///
/// # Errors
/// [`CasError::Conflict`] when a record exists.
pub async fn create(store: &kv::Store, sealer: &Sealer, key: &str, record: &CallRecord) -> Result<u64, CasError> {
    store.create(key, encode(sealer, key, record)).await.map_err(|e| match e.kind() {
        kv::CreateErrorKind::AlreadyExists => CasError::Conflict,
        _ => CasError::Nats(e.to_string()),
    })
}

/// Replaces the record of `key` if its revision is still `revision`; returns the new one.
///
/// # Errors
/// [`CasError::Conflict`] when someone wrote meanwhile.
pub async fn update(store: &kv::Store, sealer: &Sealer, key: &str, record: &CallRecord, revision: u64) -> Result<u64, CasError> {
    store
        .update(key, encode(sealer, key, record), revision)
        .await
        .map_err(|e| match e.kind() {
            kv::UpdateErrorKind::WrongLastRevision => CasError::Conflict,
            _ => CasError::Nats(e.to_string()),
        })
}
