//! The dispatcher's side: [`RemoteHub`] hands routed calls to workers and waits for their
//! records, and keeps what the workers announce.
//!
//! A call is published to its pool's queue with its key as the message id (a repeated publish
//! is dropped as a duplicate), then its answer is awaited: the worker publishes its `done`
//! record to this hub before writing it. The record is what counts: it is read when the
//! watchdog ticks and when the connection comes back (a lost answer is found there), and, with
//! signing on, followed as it changes, since only the claim in it says whose answer counts. What the
//! server reports (a delivery that ran out of acknowledgements, on the max-deliveries
//! advisory) and what the watchdog finds (a worker that stopped announcing itself, a pool with
//! no live worker left) settle the call instead: the hub writes `abandoned` over the record
//! with compare-and-set, so nothing can start the call afterwards and a late result is
//! refused, and answers `outcome_unknown` when a worker had claimed it, `unavailable` when none
//! had.
//!
//! With signing on (`remote.dispatcher_key_file`, `trusted_workers`), every job is signed with
//! the dispatcher's key for the subject it is published on, and what comes back (records,
//! answers, progress, announcements) counts only if it is signed by a key trusted for the worker
//! it names; a worker's id is bound to the key of its first announcement, and a call's `done`
//! and progress count only from the key that signed its `started` (the claim). A forged answer
//! is dropped, and a record forged over a call's claim (by a client without a trusted key, or
//! by another trusted worker) settles the call as `outcome_unknown` (the hub cannot tell what
//! its worker did), never as the forged output.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use futures::StreamExt;
use futures::future::BoxFuture;
use tokio::sync::mpsc;
use toolslot::config::{Config, RemoteConfig};
use toolslot::registry::LiveRegistry;
use toolslot::remote::seal::Domain;
use toolslot::remote::wire::{CallRecord, Job};
use toolslot::remote::{RemoteAnswer, RemoteCaller, RemoteProgress, RemoteTool, Routes};
use toolslot::tool::{ErrorCategory, ToolError, ToolSpec};
use tracing::Instrument;

use super::broker::{Broker, DISPATCHER_INBOX, MAX_DELIVERIES_ADVISORY, all_progress, answer_prefix, call_subject, direct_subject};
use super::records::{self, ReadError};

mod pending;
mod progress;
mod workers;
use pending::{FORGED, Pending};
use progress::Relay;
use workers::Seen;

/// What a call's waiter hears.
enum Signal {
    /// Its record changed, signed by this key (`None`: signing is off).
    Record(Box<CallRecord>, Option<String>),
    /// Its worker answered ahead of the record, signed by this key: a hint, dropped unless it
    /// comes from the claim's worker.
    Answer(Box<CallRecord>, Option<String>),
    /// The server gave up delivering it.
    Exhausted,
    /// Its record was overwritten by a writer without a trusted key.
    Forged(String),
}

/// Tools known only from announcements, in the order they arrived, and their names.
#[derive(Default)]
struct Announced {
    tools: Vec<Arc<dyn ToolSpec>>,
    names: HashSet<String>,
}

/// The dispatcher's connection to the workers.
pub struct RemoteHub {
    broker: Broker,
    cfg: RemoteConfig,
    routes: Routes,
    workers: Mutex<HashMap<String, Seen>>,
    waiters: Mutex<HashMap<String, mpsc::UnboundedSender<Signal>>>,
    /// The waiting calls whose progress reports are relayed, by key.
    relays: Mutex<HashMap<String, Relay>>,
    by_seq: Mutex<HashMap<u64, String>>,
    /// Names defined here (local tools routed away): announcements never replace them.
    local: Mutex<HashSet<String>>,
    /// Tools known only from announcements, in the order they arrived.
    announced: Mutex<Announced>,
    live: OnceLock<LiveRegistry>,
    /// Calls being given up on their own tasks, which a closing host waits for.
    settling: std::sync::atomic::AtomicUsize,
    me: Weak<RemoteHub>,
    /// Where workers publish this hub's answers (see `Job::reply`).
    answers: String,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every update here is one insert or remove: a poisoned lock holds whole data.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl RemoteHub {
    /// Connects to `remote.nats_url`, reads the workers' announcements, and starts listening
    /// for records and advisories. Must run inside an actix system (it spawns its listeners).
    ///
    /// # Errors
    /// A one-line reason when NATS cannot be reached or JetStream refuses.
    pub async fn start(config: &Config) -> Result<Arc<Self>, String> {
        let cfg = config.remote.clone();
        let broker = Broker::connect(&cfg, "toolslot-dispatcher", DISPATCHER_INBOX)
            .await
            .map_err(|e| e.to_string())?;
        let hub = Arc::new_cyclic(|me| Self {
            broker,
            routes: Routes::new(&cfg.routes),
            cfg,
            workers: Mutex::new(HashMap::new()),
            waiters: Mutex::new(HashMap::new()),
            relays: Mutex::new(HashMap::new()),
            by_seq: Mutex::new(HashMap::new()),
            local: Mutex::new(HashSet::new()),
            announced: Mutex::new(Announced::default()),
            live: OnceLock::new(),
            settling: std::sync::atomic::AtomicUsize::new(0),
            me: me.clone(),
            answers: answer_prefix(&toolslot::output::random_hex(8)),
        });
        // The workers already there, before the first registry is built from them.
        if let Ok(mut keys) = hub.broker.workers.keys().await {
            while let Some(Ok(key)) = keys.next().await {
                if let Ok(Some(value)) = hub.broker.workers.get(&key).await {
                    hub.heard_from(&key, &value);
                }
            }
        }
        actix::spawn(Arc::clone(&hub).watch_workers());
        // Subscribed before any call is sent, so no answer is published to nobody.
        let answered = match hub.broker.client.subscribe(format!("{}.>", hub.answers)).await {
            Ok(sub) => {
                actix::spawn(Arc::clone(&hub).hear_answers(sub));
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "answers will arrive through the call records only");
                false
            }
        };
        match hub.broker.client.subscribe(all_progress()).await {
            Ok(sub) => {
                actix::spawn(Arc::clone(&hub).hear_progress(sub));
            }
            Err(e) => tracing::warn!(error = %e, "the progress reports of remote calls will not be relayed"),
        }
        // Following every record brings each call's claim and its `done` once more after the
        // answer: two messages a call. Only a claim can say whose answer counts when signing
        // is on; otherwise a call's record is read when its watchdog ticks or the connection
        // comes back, which is where an answer lost on the way is found.
        if hub.broker.sealer.is_on() || !answered {
            actix::spawn(Arc::clone(&hub).watch_records());
        }
        actix::spawn(Arc::clone(&hub).watch_advisories());
        Ok(hub)
    }

    /// Waits (at most `limit`) until the calls being given up are settled, so that a host
    /// that exits right after a round still tells the workers to stop what it gave up.
    pub async fn drain(&self, limit: Duration) {
        let until = Instant::now() + limit;
        while self.settling.load(std::sync::atomic::Ordering::SeqCst) > 0 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The hub's connection, for the other users of the same server (durable sessions).
    pub fn broker(&self) -> &Broker {
        &self.broker
    }

    fn caller(&self) -> Option<Arc<dyn RemoteCaller>> {
        self.me.upgrade().map(|h| h as Arc<dyn RemoteCaller>)
    }

    /// `tools`, with each routed one replaced by a [`RemoteTool`] of its pool.
    pub fn route(&self, tools: Vec<Arc<dyn ToolSpec>>) -> Vec<Arc<dyn ToolSpec>> {
        let Some(caller) = self.caller() else { return tools };
        tools
            .into_iter()
            .map(|t| match self.routes.pool_of(t.name()) {
                Some(pool) => {
                    lock(&self.local).insert(t.name().to_string());
                    Arc::new(RemoteTool::new(t, pool, Arc::clone(&caller))) as Arc<dyn ToolSpec>
                }
                None => t,
            })
            .collect()
    }

    /// The routed tools known only from workers' announcements (MCP servers configured on the
    /// workers), as remote tools.
    pub fn announced_tools(&self) -> Vec<Arc<dyn ToolSpec>> {
        let local = lock(&self.local);
        // A name defined here keeps its own definition (its schema and approval rules).
        lock(&self.announced)
            .tools
            .iter()
            .filter(|t| !local.contains(t.name()))
            .cloned()
            .collect()
    }

    /// From now on, tools workers announce are appended to `live`.
    pub fn attach(&self, live: LiveRegistry) {
        let live = self.live.get_or_init(|| live);
        live.append(self.announced_tools());
    }

    /// The `done` records workers publish straight to this hub, ahead of their write.
    async fn hear_answers(self: Arc<Self>, mut sub: async_nats::Subscriber) {
        let prefix = format!("{}.", self.answers);
        while let Some(msg) = sub.next().await {
            let Some(key) = msg.subject.as_str().strip_prefix(&prefix) else {
                continue;
            };
            let Some(tx) = lock(&self.waiters).get(key).cloned() else {
                continue;
            };
            // A hint only, and anyone allowed to answer some call may publish here: what does
            // not open under the key is dropped, and the record decides.
            match records::decode(&self.broker.sealer, key, &msg.payload) {
                Ok((record @ CallRecord::Done { .. }, signer)) => {
                    let _ = tx.send(Signal::Answer(Box::new(record), signer));
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(key, error = %e, "an answer that is not a worker's was dropped"),
            }
        }
    }

    async fn watch_records(self: Arc<Self>) {
        loop {
            match self.broker.records.watch(">").await {
                Ok(mut entries) => {
                    while let Some(entry) = entries.next().await {
                        let Ok(entry) = entry else { break };
                        if entry.operation != async_nats::jetstream::kv::Operation::Put {
                            continue;
                        }
                        let Some(tx) = lock(&self.waiters).get(&entry.key).cloned() else {
                            continue;
                        };
                        let _ = match records::decode(&self.broker.sealer, &entry.key, &entry.value) {
                            Ok((record, signer)) => tx.send(Signal::Record(Box::new(record), signer)),
                            Err(e) => tx.send(Signal::Forged(e)),
                        };
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot watch call records; retrying"),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn watch_advisories(self: Arc<Self>) {
        #[derive(serde::Deserialize)]
        struct Advisory {
            stream_seq: u64,
        }
        loop {
            match self.broker.client.subscribe(MAX_DELIVERIES_ADVISORY).await {
                Ok(mut sub) => {
                    while let Some(msg) = sub.next().await {
                        let Ok(a) = serde_json::from_slice::<Advisory>(&msg.payload) else {
                            continue;
                        };
                        let key = lock(&self.by_seq).get(&a.stream_seq).cloned();
                        if let Some(key) = key
                            && let Some(tx) = lock(&self.waiters).get(&key).cloned()
                        {
                            let _ = tx.send(Signal::Exhausted);
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot subscribe to delivery advisories; retrying"),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn run_call(self: Arc<Self>, pool: String, mut job: Job, target: Option<String>) -> Result<RemoteAnswer, ToolError> {
        job.reply = Some(self.answers.clone());
        let tool = job.tool.clone();
        match &target {
            Some(w) if !self.is_alive(w) => {
                return Err(ToolError::refused(
                    ErrorCategory::Unavailable,
                    format!(
                        "`{tool}` was not run: worker `{w}`, which held this session's background tasks, is gone, and its tasks ended with it. Nothing was run."
                    ),
                ));
            }
            None if !self.pool_serves(&pool, &tool) => {
                return Err(ToolError::refused(
                    ErrorCategory::Unavailable,
                    format!("`{tool}` was not run: no live worker of pool `{pool}` hosts it. Nothing was run."),
                ));
            }
            _ => {}
        }
        if !job.hidden.is_empty() {
            let old = self.cannot_hide(&pool, &tool, target.as_deref());
            if !old.is_empty() {
                return Err(ToolError::refused(
                    ErrorCategory::Unavailable,
                    format!(
                        "`{tool}` was not run: the session's policy hides paths from it, and worker(s) `{}` of pool `{pool}` could take it but run a toolslot too old to hide them. Nothing was run.",
                        old.join("`, `")
                    ),
                ));
            }
        }
        // Sealed for the subject it goes to: a worker refuses it anywhere else.
        let body = serde_json::to_vec(&job).unwrap_or_default();
        let sealed = |subject: &str| -> bytes::Bytes { self.broker.sealer.seal(Domain::Job, subject, &body).into() };
        let (tx, mut rx) = mpsc::unbounded_channel();
        lock(&self.waiters).insert(job.key.clone(), tx);
        let mut call = Pending {
            hub: Arc::clone(&self),
            key: job.key.clone(),
            tool: tool.clone(),
            seq: None,
            settled: false,
            claim: None,
            writes: !job.read_only,
        };
        match &target {
            None => {
                let subject = call_subject(&pool, job.read_only);
                let payload = sealed(&subject);
                let give_up = Instant::now() + Duration::from_millis(self.cfg.ack_wait_ms);
                loop {
                    let mut publish = PublishMessage::build().payload(payload.clone()).message_id(&job.key);
                    if let Some(headers) = super::trace::headers() {
                        for (name, values) in headers.iter() {
                            for value in values {
                                publish = publish.header(name.clone(), value.clone());
                            }
                        }
                    }
                    let failure = match self.broker.js.send_publish(subject.clone(), publish).await {
                        Ok(ack) => match ack.await {
                            Ok(ack) => {
                                lock(&self.by_seq).insert(ack.sequence, job.key.clone());
                                call.seq = Some(ack.sequence);
                                break;
                            }
                            Err(e) => e.to_string(),
                        },
                        Err(e) if e.kind() == PublishErrorKind::MaxPayloadExceeded => {
                            call.settled = true;
                            return Err(ToolError::refused(
                                ErrorCategory::Unavailable,
                                format!(
                                    "`{tool}` was not run: its arguments are larger than a NATS message may be ({e}). Nothing was run."
                                ),
                            ));
                        }
                        Err(e) => e.to_string(),
                    };
                    if Instant::now() > give_up {
                        return call.settle(format!("it could not be queued ({failure})")).await;
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
            Some(w) => match self
                .broker
                .client
                .request_with_headers(
                    direct_subject(w),
                    super::trace::headers().unwrap_or_default(),
                    sealed(&direct_subject(w)),
                )
                .await
            {
                Ok(reply) if reply.payload.as_ref() == b"started" => {}
                Ok(reply) => {
                    let why = String::from_utf8_lossy(&reply.payload).into_owned();
                    return call.settle(format!("worker `{w}` did not take it ({why})")).await;
                }
                Err(e) => return call.settle(format!("worker `{w}` did not take it ({e})")).await,
            },
        }
        // The first check one period from now. Not `interval` and a first `tick().await`: that
        // tick waits for the timer's next millisecond, a whole tick of latency on every call.
        let period = Duration::from_millis(self.cfg.watchdog_interval_ms.max(1));
        let mut watchdog = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        loop {
            let record = tokio::select! {
                signal = rx.recv() => match signal {
                    Some(Signal::Record(r, signer)) => Some((*r, signer)),
                    // Before the claim is seen there is no worker to compare with: the record decides.
                    Some(Signal::Answer(..)) if call.claim.is_none() && self.broker.sealer.is_on() => None,
                    Some(Signal::Answer(r, signer)) => match call.vouched(&r, signer.as_deref()) {
                        Ok(()) => Some((*r, signer)),
                        Err(why) => {
                            tracing::warn!(key = %job.key, error = %why, "an answer not from the call's claiming worker was dropped");
                            None
                        }
                    },
                    Some(Signal::Exhausted) => {
                        return call.settle("its worker stopped acknowledging it (remote.ack_wait_ms passed)".into()).await;
                    }
                    Some(Signal::Forged(why)) => {
                        tracing::warn!(key = %job.key, error = %why, "a call record not written by a worker or dispatcher");
                        return call.settle(FORGED.into()).await;
                    }
                    None => None,
                },
                () = self.time_to_look(&mut watchdog) => match self.look(&job.key, &pool, &tool, target.as_deref()).await {
                    Ok(record) => record,
                    Err(why) => return call.settle(why).await,
                },
            };
            if let Some((r, signer)) = &record
                && let Err(why) = call.vouched(r, signer.as_deref())
            {
                tracing::warn!(key = %job.key, error = %why, "a call record not written by its claiming worker");
                return call.settle(FORGED.into()).await;
            }
            match record.map(|(r, _)| r) {
                Some(CallRecord::Done {
                    worker,
                    outcome,
                    object,
                    digest,
                }) => return call.finish(worker, outcome, object, digest).await,
                Some(CallRecord::Started { worker, .. }) => {
                    // A lost worker's read-only call goes to another worker while one is left.
                    let redelivered = job.read_only && target.is_none() && self.pool_serves(&pool, &tool);
                    if !self.is_alive(&worker) && !redelivered {
                        return call.settle(format!("worker `{worker}` stopped announcing itself")).await;
                    }
                }
                Some(CallRecord::Abandoned { reason, .. }) => return call.settle(reason).await,
                None => {}
            }
        }
    }

    /// When a waiting call reads its record: at the watchdog's tick, and at once when the
    /// connection comes back (an answer published while it was down never arrives).
    async fn time_to_look(&self, watchdog: &mut tokio::time::Interval) {
        tokio::select! {
            _ = watchdog.tick() => {}
            () = self.broker.link.came_back() => {}
        }
    }

    /// A waiting call's record as it stands (`None`: nothing to act on yet), or why the call
    /// is to be settled: its record was forged over, or nobody claimed it and no live worker
    /// could.
    async fn look(&self, key: &str, pool: &str, tool: &str, target: Option<&str>) -> Result<Option<(CallRecord, Option<String>)>, String> {
        match records::read_signed(&self.broker.records, &self.broker.sealer, key).await {
            Ok(Some((r, _, signer))) => Ok(Some((r, signer))),
            Err(e @ ReadError::Forged { .. }) => {
                tracing::warn!(key, error = %e, "a call record not written by a worker or dispatcher");
                Err(FORGED.into())
            }
            Ok(None) => {
                let lost = match target {
                    Some(w) => !self.is_alive(w),
                    None => !self.pool_serves(pool, tool),
                };
                if lost {
                    return Err(format!("no live worker of pool `{pool}` took it"));
                }
                Ok(None)
            }
            // NATS is not answering: keep waiting; the call's timeout bounds the wait.
            Err(ReadError::Nats(_)) => Ok(None),
        }
    }
}

impl RemoteCaller for RemoteHub {
    fn call<'a>(
        &'a self,
        pool: &'a str,
        job: Job,
        target: Option<&'a str>,
        progress: Option<RemoteProgress>,
    ) -> BoxFuture<'a, Result<RemoteAnswer, ToolError>> {
        let span = tracing::info_span!(
            "remote_call",
            key = %job.key,
            tool = %job.tool,
            pool,
            "otel.name" = %format_args!("remote_call {}", job.tool),
            "otel.kind" = "producer",
            "toolslot.remote.key" = %job.key,
            "toolslot.remote.pool" = pool,
        );
        let Some(hub) = self.me.upgrade() else {
            return Box::pin(async {
                Err(ToolError::refused(
                    ErrorCategory::Unavailable,
                    "the remote hub is shutting down; nothing was run.",
                ))
            });
        };
        Box::pin(
            async move {
                // Listening before the call is queued, so the first report is not missed; the
                // relay ends with the call.
                let _relay = progress.map(|sink| hub.relay_progress(&job.key, sink));
                hub.run_call(pool.to_string(), job, target.map(str::to_string)).await
            }
            .instrument(span),
        )
    }

    fn is_alive(&self, worker: &str) -> bool {
        // Silence counts only when we could have heard: right after our own connection came
        // back (nats-server restarted), a live worker has not re-announced itself yet.
        let ttl = self.ttl();
        let heard = self.broker.link.heard_for(ttl);
        lock(&self.workers).get(worker).is_some_and(|w| !heard || w.at.elapsed() < ttl)
    }
}
