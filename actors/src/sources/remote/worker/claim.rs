//! A worker's claim on a call: `started` in the call's record, written with compare-and-set,
//! and when a read-only call writes it.

use std::time::Duration;

use toolslot::remote::wire::{CallRecord, Job};

use super::super::records::{self, CasError, ReadError};
use super::{Worker, unix_ms};

/// What became of an attempt to claim a call.
pub(super) enum Claim {
    /// Claimed: the record's revision.
    Mine(u64),
    /// Claimed by another worker, given up, or too late: not to be run here.
    Taken,
    /// NATS did not answer.
    Failed(String),
}

/// Where a call's claim stands when it starts to run.
pub(super) enum Held {
    /// Written: the record's revision.
    Claimed(u64),
    /// A read-only call, claimed while it runs once `after` has passed (zero: at once); one
    /// that ends sooner records its `done` as its claim.
    Unclaimed {
        /// Its delivery attempt.
        attempt: i64,
        /// How long it runs before its claim is written.
        after: Duration,
    },
}

impl Worker {
    /// When read-only `job`, delivered for the `attempt`th time, is claimed. Most reads end
    /// before the claim is due and write claim and result in one record. A later delivery
    /// claims at once (it may take over a lost worker's claim), as does a call past its
    /// deadline (its claim gives it up) and, with signing on, every call: there the claim says
    /// whose answer counts.
    pub(super) fn unclaimed(&self, job: &Job, attempt: i64) -> Held {
        let after = if attempt <= 1 && !self.broker.sealer.is_on() && unix_ms() <= job.not_after_ms {
            Duration::from_millis(self.config.remote.read_only_claim_after_ms)
        } else {
            Duration::ZERO
        };
        Held::Unclaimed { attempt, after }
    }

    /// Records `started` for this worker, unless the call is taken, given up or too late. A
    /// read-only call a lost worker had claimed is taken over; one that may write never is.
    pub(super) async fn claim(&self, job: &Job, attempt: i64) -> Claim {
        let (store, sealer) = (&self.broker.records, &self.broker.sealer);
        if unix_ms() > job.not_after_ms {
            let late = CallRecord::Abandoned {
                reason: "no worker took it before its deadline".into(),
                worker: None,
            };
            let _ = records::create(store, sealer, &job.key, &late).await;
            return Claim::Taken;
        }
        let mine = CallRecord::Started {
            worker: self.id.clone(),
            attempt,
        };
        // A first delivery usually finds no record: claim it in one round trip.
        if attempt <= 1 {
            match records::create(store, sealer, &job.key, &mine).await {
                Ok(rev) => return Claim::Mine(rev),
                Err(CasError::Conflict) => {}
                Err(CasError::Nats(e)) => return Claim::Failed(e),
            }
        }
        for _ in 0..4 {
            match records::read(store, sealer, &job.key).await {
                Ok(None) => match records::create(store, sealer, &job.key, &mine).await {
                    Ok(rev) => return Claim::Mine(rev),
                    Err(CasError::Conflict) => continue,
                    Err(CasError::Nats(e)) => return Claim::Failed(e),
                },
                Ok(Some((CallRecord::Started { worker, .. }, rev))) if job.read_only && worker != self.id => {
                    match records::update(store, sealer, &job.key, &mine, rev).await {
                        Ok(rev) => return Claim::Mine(rev),
                        Err(CasError::Conflict) => continue,
                        Err(CasError::Nats(e)) => return Claim::Failed(e),
                    }
                }
                Ok(Some(_)) => return Claim::Taken,
                // A record nobody with the key wrote: the call's state is unknown (it may have
                // run), so it is not run here.
                Err(e @ ReadError::Forged { .. }) => {
                    tracing::warn!(key = %job.key, error = %e, "a call whose record was forged is not run");
                    return Claim::Taken;
                }
                Err(ReadError::Nats(e)) => return Claim::Failed(e),
            }
        }
        Claim::Taken
    }
}
