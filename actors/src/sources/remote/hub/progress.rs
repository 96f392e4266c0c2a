//! A call's progress reports, from the worker running it to the call's sink. The hub hears
//! every report on one subscription, made when it starts, and hands each to the waiting call
//! its subject names: a subscription of each call's own cost the dispatcher and the server a
//! subscribe and an unsubscribe on every call, whether its tool reported anything or not.
//! A report of a call that is not waiting here (another dispatcher's, one that ended) is
//! dropped; only tools of MCP servers report progress, so what several dispatchers hear of
//! each other's calls stays small.

use std::sync::Arc;

use futures::StreamExt;
use toolslot::remote::RemoteProgress;
use toolslot::remote::seal::Domain;
use toolslot::remote::wire::{CallRecord, ProgressReport};

use super::super::broker::progress_key;
use super::super::records;
use super::{RemoteHub, lock};

/// A waiting call's sink, and, with signing on, the key that signed its claim once read.
pub(super) struct Relay {
    sink: RemoteProgress,
    claim: Option<String>,
}

/// Ends a call's relay when dropped.
pub(super) struct Relaying {
    hub: Arc<RemoteHub>,
    key: String,
}

impl Drop for Relaying {
    fn drop(&mut self) {
        lock(&self.hub.relays).remove(&self.key);
    }
}

impl RemoteHub {
    /// Hands the progress reports of call `key` to `sink` until the returned guard drops.
    pub(super) fn relay_progress(self: &Arc<Self>, key: &str, sink: RemoteProgress) -> Relaying {
        lock(&self.relays).insert(key.to_string(), Relay { sink, claim: None });
        Relaying {
            hub: Arc::clone(self),
            key: key.to_string(),
        }
    }

    /// Reads the reports on the hub's progress subscription. A report counts only if its
    /// worker sealed it for the call's key and, with signing on, signed it with the key that
    /// signed the call's claim.
    pub(super) async fn hear_progress(self: Arc<Self>, mut sub: async_nats::Subscriber) {
        while let Some(msg) = sub.next().await {
            let Some(key) = progress_key(msg.subject.as_str()) else { continue };
            let Some((sink, claim)) = lock(&self.relays).get(key).map(|r| (Arc::clone(&r.sink), r.claim.clone())) else {
                continue;
            };
            let sealer = &self.broker.sealer;
            let Ok(opened) = sealer.open_any(Domain::Progress, key, &msg.payload) else {
                tracing::warn!(key, "a progress report that is not a worker's was dropped");
                continue;
            };
            if sealer.is_on() && claim != opened.signer {
                // Read here, holding the other calls' reports back one record read: it happens
                // once per call (its first report, or a claim taken over), and a report is a hint.
                let claim = match records::read_signed(&self.broker.records, sealer, key).await {
                    Ok(Some((CallRecord::Started { .. }, _, signer))) => signer,
                    _ => None,
                };
                if let Some(relay) = lock(&self.relays).get_mut(key) {
                    relay.claim.clone_from(&claim);
                }
                if claim.is_none() || claim != opened.signer {
                    tracing::warn!(key, "a progress report not signed by the call's claiming worker was dropped");
                    continue;
                }
            }
            if let Ok(r) = serde_json::from_slice::<ProgressReport>(opened.body) {
                sink(r.progress, r.total, r.message);
            }
        }
    }
}
