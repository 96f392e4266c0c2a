//! What the hub knows of its workers: their announcements (sealed by a worker, under its own
//! pool's name), when each was last heard, what it hosts, and whether it hides a job's paths.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use toolslot::remote::seal::{Domain, Speaker};
use toolslot::remote::wire::Announcement;
use toolslot::remote::{AnnouncedSpec, RemoteTool};
use toolslot::tool::ToolSpec;

use super::{RemoteHub, lock};

/// A worker as last heard.
pub(super) struct Seen {
    pub(super) pool: String,
    /// The key its announcements are signed with (`None`: signing is off).
    pub(super) signer: Option<String>,
    pub(super) tools: HashSet<String>,
    pub(super) at: Instant,
    /// It hides what a job's `hidden` names.
    pub(super) hides: bool,
}

impl RemoteHub {
    /// Takes the announcement stored under `key` if it is sealed by a worker, names that
    /// worker, and claims the pool its id names (a worker's id is `<pool>.<random>`, and NATS
    /// permissions confine a pool's workers to keys under their pool).
    /// The announcement must be signed by a key trusted for that worker, and a worker heard
    /// before keeps the key it was first heard with while it lives.
    pub(super) fn heard_from(&self, key: &str, value: &[u8]) {
        let sealer = &self.broker.sealer;
        let announced = sealer
            .open_any(Domain::Announcement, key, value)
            .and_then(|o| sealer.vouches(o.signer.as_deref(), Speaker::Worker(key)).map(|()| o))
            .map_err(|e| e.to_string())
            .and_then(|o| {
                let a = serde_json::from_slice::<Announcement>(o.body).map_err(|e| e.to_string())?;
                Ok((a, o.signer))
            });
        match announced {
            Ok((_, signer))
                if lock(&self.workers)
                    .get(key)
                    .is_some_and(|w| w.signer != signer && w.at.elapsed() < self.ttl()) =>
            {
                tracing::warn!(key, "an announcement signed by another key than the worker's was ignored")
            }
            Ok((a, signer)) if a.worker == key && key.split('.').next() == Some(a.pool.as_str()) => self.heard(a, signer),
            Ok((a, _)) => tracing::warn!(key, pool = %a.pool, "an announcement under another worker's or pool's name was ignored"),
            Err(e) => tracing::warn!(key, error = %e, "a worker announcement was ignored"),
        }
    }

    /// Takes a worker's announcement: it is alive now, and its routed tools are known.
    fn heard(&self, a: Announcement, signer: Option<String>) {
        let mut new = Vec::new();
        if let Some(caller) = self.caller() {
            let local = lock(&self.local);
            let mut announced = lock(&self.announced);
            for t in &a.tools {
                if self.routes.pool_of(&t.name) == Some(a.pool.as_str())
                    && !local.contains(&t.name)
                    && announced.names.insert(t.name.clone())
                {
                    let spec: Arc<dyn ToolSpec> = Arc::new(AnnouncedSpec(t.clone()));
                    let tool: Arc<dyn ToolSpec> = Arc::new(RemoteTool::new(spec, a.pool.clone(), Arc::clone(&caller)));
                    announced.tools.push(Arc::clone(&tool));
                    new.push(tool);
                }
            }
        }
        lock(&self.workers).insert(
            a.worker.clone(),
            Seen {
                pool: a.pool,
                signer,
                tools: a.tools.into_iter().map(|t| t.name).collect(),
                at: Instant::now(),
                hides: a.hides,
            },
        );
        if !new.is_empty()
            && let Some(live) = self.live.get()
        {
            tracing::info!(tools = new.len(), "remote tools announced");
            live.append(new);
        }
    }

    pub(super) fn ttl(&self) -> Duration {
        Duration::from_millis(self.cfg.announce_ttl_ms)
    }

    /// The workers that could take a call of `tool` (`target`, else the pool's live workers
    /// hosting it) and would not hide what its `hidden` names: workers older than that field.
    pub(super) fn cannot_hide(&self, pool: &str, tool: &str, target: Option<&str>) -> Vec<String> {
        let ttl = self.ttl();
        let heard = self.broker.link.heard_for(ttl);
        let mut old: Vec<String> = lock(&self.workers)
            .iter()
            .filter(|(id, w)| match target {
                Some(t) => id.as_str() == t,
                None => w.pool == pool && w.tools.contains(tool) && (!heard || w.at.elapsed() < ttl),
            })
            .filter(|(_, w)| !w.hides)
            .map(|(id, _)| id.clone())
            .collect();
        old.sort();
        old
    }

    /// Whether a live worker of `pool` hosts `tool`.
    pub(super) fn pool_serves(&self, pool: &str, tool: &str) -> bool {
        let ttl = self.ttl();
        if !self.broker.link.heard_for(ttl) {
            // Deaf for part of the period: any worker of the pool heard before may still be there.
            return lock(&self.workers).values().any(|w| w.pool == pool && w.tools.contains(tool));
        }
        lock(&self.workers)
            .values()
            .any(|w| w.pool == pool && w.at.elapsed() < ttl && w.tools.contains(tool))
    }

    pub(super) async fn watch_workers(self: Arc<Self>) {
        loop {
            match self.broker.workers.watch_with_history(">").await {
                Ok(mut entries) => {
                    while let Some(entry) = entries.next().await {
                        let Ok(entry) = entry else { break };
                        if entry.operation == async_nats::jetstream::kv::Operation::Put {
                            self.heard_from(&entry.key, &entry.value);
                        } else {
                            lock(&self.workers).remove(&entry.key);
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot watch worker announcements; retrying"),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}
