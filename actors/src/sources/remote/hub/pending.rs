//! A call in flight at the hub, and how it is settled: whether a record may be taken as the
//! call's state (signed by the claiming worker's key), and, when the call is given up or its
//! worker is lost, the `abandoned` record written with compare-and-set and the answer that
//! follows (`unavailable` when nobody had claimed it, `outcome_unknown` when someone had).

use std::sync::Arc;

use tokio::io::AsyncReadExt;
use toolslot::remote::RemoteAnswer;
use toolslot::remote::seal;
use toolslot::remote::wire::{CallRecord, WireOutcome};
use toolslot::tool::{ErrorCategory, ToolError};

use super::super::broker::cancel_subject;
use super::super::records::{self, CasError, ReadError};
use super::{RemoteHub, lock};

/// Why a call is given up when its record was written by someone without the claiming
/// worker's key.
pub(super) const FORGED: &str = "its record was overwritten by a client without the claiming worker's key";

/// Why a call was settled without a result, by who had claimed it.
enum Settled {
    NotStarted,
    StartedOn(String),
    /// The record was forged over: a worker may have claimed and run the call.
    Overwritten,
    Unknown(String),
}

/// A call in flight. Dropped before it is settled (the round was cancelled, the call timed
/// out), it gives the call up on its own task: no worker may start it afterwards, and the
/// worker running it is told to stop.
pub(super) struct Pending {
    pub(super) hub: Arc<RemoteHub>,
    pub(super) key: String,
    pub(super) tool: String,
    pub(super) seq: Option<u64>,
    pub(super) settled: bool,
    /// The worker that claimed the call and the key its `started` was signed with, once seen.
    pub(super) claim: Option<(String, Option<String>)>,
    /// Whether the call may write: its claim is never taken over.
    pub(super) writes: bool,
}

impl Pending {
    /// Whether `record`, signed by `signer`, may be taken as the call's state: a worker's record
    /// must be signed with the key the worker announced itself with (when it was heard), a
    /// `done` must come from the claim's worker and key, and a writing call's claim is never
    /// taken over. A `started` that passes becomes the claim. Always when signing is off.
    pub(super) fn vouched(&mut self, record: &CallRecord, signer: Option<&str>) -> Result<(), String> {
        if !self.hub.broker.sealer.is_on() {
            return Ok(());
        }
        let worker = match record {
            CallRecord::Started { worker, .. } | CallRecord::Done { worker, .. } => worker,
            CallRecord::Abandoned { .. } => return Ok(()),
        };
        if let Some(seen) = lock(&self.hub.workers).get(worker)
            && seen.signer.as_deref() != signer
        {
            return Err(format!(
                "signed by another key than the one worker `{worker}` announced itself with"
            ));
        }
        let ours = |(w, k): &(String, Option<String>)| w == worker && k.as_deref() == signer;
        match (record, &self.claim) {
            (CallRecord::Done { .. }, Some(claim)) if !ours(claim) => {
                Err(format!("a `done` of worker `{worker}` over the claim of worker `{}`", claim.0))
            }
            (CallRecord::Started { .. }, Some(claim)) if self.writes && !ours(claim) => Err(format!(
                "a claim of worker `{worker}` over the claim of worker `{}` on a call that may write",
                claim.0
            )),
            (CallRecord::Started { .. }, _) => {
                self.claim = Some((worker.clone(), signer.map(str::to_string)));
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Gives the call up: `abandoned` is written over whatever its record holds, unless it is
    /// `done`, in which case that is the answer.
    pub(super) async fn settle(&mut self, reason: String) -> Result<RemoteAnswer, ToolError> {
        let hub = Arc::clone(&self.hub);
        let mut outcome = Settled::Unknown("the record kept changing".into());
        for _ in 0..8 {
            let read = match records::read_signed(&hub.broker.records, &hub.broker.sealer, &self.key).await {
                // A record not from the claim's worker counts as forged: `abandoned` goes over it.
                Ok(Some((record, revision, signer))) => match self.vouched(&record, signer.as_deref()) {
                    Ok(()) => Ok(Some((record, revision))),
                    Err(reason) => Err(ReadError::Forged {
                        key: self.key.clone(),
                        revision,
                        reason,
                    }),
                },
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            };
            let (store, sealer) = (&self.hub.broker.records, &self.hub.broker.sealer);
            outcome = match read {
                Ok(None) => match records::create(
                    store,
                    sealer,
                    &self.key,
                    &CallRecord::Abandoned {
                        reason: reason.clone(),
                        worker: None,
                    },
                )
                .await
                {
                    Ok(_) => Settled::NotStarted,
                    Err(CasError::Conflict) => continue,
                    Err(CasError::Nats(e)) => Settled::Unknown(e),
                },
                Ok(Some((CallRecord::Started { worker, .. }, rev))) => {
                    let abandoned = CallRecord::Abandoned {
                        reason: reason.clone(),
                        worker: Some(worker.clone()),
                    };
                    match records::update(store, sealer, &self.key, &abandoned, rev).await {
                        Ok(_) => Settled::StartedOn(worker),
                        Err(CasError::Conflict) => continue,
                        Err(CasError::Nats(e)) => Settled::Unknown(e),
                    }
                }
                Ok(Some((
                    CallRecord::Done {
                        worker,
                        outcome,
                        object,
                        digest,
                    },
                    _,
                ))) => return self.finish(worker, outcome, object, digest).await,
                Ok(Some((CallRecord::Abandoned { worker: Some(w), .. }, _))) => Settled::StartedOn(w),
                Ok(Some((CallRecord::Abandoned { worker: None, .. }, _))) => Settled::NotStarted,
                // Someone without the claiming worker's key wrote over the record: whatever it
                // held (a worker's claim, perhaps) is lost, so the call may have run. `abandoned` goes over it,
                // so that its worker, reading it at its next tick, stops the tool.
                Err(ReadError::Forged { revision, .. }) => {
                    let abandoned = CallRecord::Abandoned {
                        reason: FORGED.into(),
                        worker: None,
                    };
                    match records::update(store, sealer, &self.key, &abandoned, revision).await {
                        Ok(_) => Settled::Overwritten,
                        Err(CasError::Conflict) => continue,
                        Err(CasError::Nats(e)) => Settled::Unknown(e),
                    }
                }
                Err(ReadError::Nats(e)) => Settled::Unknown(e),
            };
            break;
        }
        self.settled = true;
        self.forget_queued();
        let tool = &self.tool;
        match outcome {
            Settled::NotStarted if self.writes => Err(ToolError::refused(
                ErrorCategory::Unavailable,
                format!("`{tool}` was not run: {reason}; no worker started it, and none will. Nothing was run."),
            )),
            // A read-only call runs a while before its worker claims it, so one may have begun:
            // its claim, or its `done`, now finds the call given up, and the worker stops it.
            Settled::NotStarted => Err(ToolError::refused(
                ErrorCategory::Unavailable,
                format!(
                    "`{tool}` gave no result: {reason}; no worker had claimed it, and none will now. It only reads: a worker that had begun it stops it, and its result is dropped."
                ),
            )),
            Settled::StartedOn(worker) => {
                let _ = self
                    .hub
                    .broker
                    .client
                    .publish(cancel_subject(&worker), self.key.clone().into())
                    .await;
                Err(ToolError::outcome_unknown(format!(
                    "`{tool}` was running on worker `{worker}` when it was lost ({reason}); its outcome is unknown; check before retrying."
                )))
            }
            Settled::Overwritten => {
                let also = if reason == FORGED { String::new() } else { format!(" ({reason})") };
                Err(ToolError::outcome_unknown(format!(
                    "`{tool}` may have run on a worker, but {FORGED}{also}; its outcome is unknown; check before retrying."
                )))
            }
            Settled::Unknown(e) => Err(ToolError::outcome_unknown(format!(
                "`{tool}` could not be settled ({reason}; {e}); its outcome is unknown; check before retrying."
            ))),
        }
    }

    /// The answer of a call a worker finished; a result kept in the object store is read back.
    /// A result in the object store counts only if it is the content the sealed record names
    /// (`digest`): the store itself is not sealed.
    pub(super) async fn finish(
        &mut self,
        worker: String,
        outcome: WireOutcome,
        object: Option<String>,
        digest: Option<String>,
    ) -> Result<RemoteAnswer, ToolError> {
        self.settled = true;
        let mut outcome = outcome;
        if let Some(name) = object {
            let mut text = Vec::new();
            let read = match self.hub.broker.results.get(&name).await {
                Ok(mut o) => o.read_to_end(&mut text).await.map(|_| ()).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            let read = read.and_then(|()| match &digest {
                Some(d) if *d != seal::digest(&text) => Err("it is not the content its worker stored".to_string()),
                None if self.hub.broker.sealer.is_on() => Err("its record names no digest of it".to_string()),
                _ => Ok(()),
            });
            if let Err(e) = read {
                return Err(ToolError::outcome_unknown(format!(
                    "`{}` finished on worker `{worker}`, but its result could not be read back from the object store ({e}); check before retrying.",
                    self.tool
                )));
            }
            if let Some(content) = outcome.content_mut() {
                *content = String::from_utf8_lossy(&text).into_owned();
            }
        }
        Ok(RemoteAnswer {
            worker,
            outcome: outcome.into(),
        })
    }

    /// Drops the queued message of a settled call, so that it does not linger in the queue.
    pub(super) fn forget_queued(&self) {
        if let Some(seq) = self.seq {
            let calls = self.hub.broker.calls.clone();
            tokio::spawn(async move {
                let _ = calls.delete_message(seq).await;
            });
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        lock(&self.hub.waiters).remove(&self.key);
        if let Some(seq) = self.seq {
            lock(&self.hub.by_seq).remove(&seq);
        }
        if !self.settled {
            let mut rest = Pending {
                hub: Arc::clone(&self.hub),
                key: std::mem::take(&mut self.key),
                tool: std::mem::take(&mut self.tool),
                seq: self.seq,
                settled: true,
                claim: self.claim.take(),
                writes: self.writes,
            };
            // Drop cannot wait: the call is given up on its own task.
            self.hub.settling.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                let _ = rest.settle("the call was given up (round cancelled or timed out)".into()).await;
                rest.hub.settling.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            });
        }
    }
}
