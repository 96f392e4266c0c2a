//! `toolslot worker`: hosts a pool's tools and runs the calls its queues hold.
//!
//! A worker announces itself (pool, tools, slots, running calls, version) under its id in the
//! workers bucket, re-announcing three times per `remote.announce_ttl_ms`, and pulls from its
//! pool's two queues no more calls than it has free slots; while idle with a free slot it is a
//! member of its pool's bell group, so a published call wakes one such worker, not the pool.
//! Before a tool that may write runs, the worker claims the call's record with compare-and-set
//! (`started`); a read-only tool starts unclaimed and is claimed once it has run
//! `remote.read_only_claim_after_ms` (at once on a later delivery or with signing on), and one
//! that ends sooner writes its `done` as its claim, with compare-and-set on no record: either
//! way its result counts only if the claim holds. While it runs, it acknowledges progress three
//! times per `remote.ack_wait_ms` and checks that its claim still stands; when it ends, it
//! writes `done` over its own claim and acknowledges the message. A claim that was overwritten (the
//! dispatcher gave the call up) stops the tool, which kills its process group, and the late
//! result is dropped. Calls addressed to this worker (the session's background
//! tasks live here) arrive by request on its own subject, outside the slots: they only read a
//! log or stop a process.
//!
//! With signing on (`remote.worker_key_file`, `dispatcher_public_key`, `trusted_workers`), a
//! job runs only if it was signed by the dispatcher's key for the subject it arrived on, and
//! everything the worker writes or publishes is signed with its own key in turn; a worker that
//! should sign but cannot read its key does not start. A record not signed by a key trusted for
//! whom it names is never taken as the call's state: the call is not claimed, and a running
//! one stops.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_nats::jetstream::{self, AckKind};
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot, watch};
use toolslot::config::Config;
use toolslot::registry::LiveRegistry;
use toolslot::remote::Routes;
use toolslot::remote::seal::{Domain, Speaker};
use toolslot::remote::wire::{AnnouncedTool, Announcement, CallRecord, Job};
use tracing::Instrument;

use super::broker::{Broker, cancel_subject, direct_subject, worker_inbox};
use super::records::{self, ReadError};
use super::worker_session::WorkerSessions;

mod claim;
mod outcome;
mod queue;
use claim::{Claim, Held};
use queue::Queue;

/// Tools that need the dispatcher's own session (its catalog, its saved outputs): never hosted.
const SESSION_BOUND: &[&str] = &["tool_search", "retrieve_tool_result", "spawn_agent"];

/// How `toolslot worker` was asked to run.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The pool it serves.
    pub pool: String,
    /// Calls it runs at once.
    pub slots: usize,
}

/// Why a worker could not run.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// NATS or JetStream refused.
    #[error(transparent)]
    Broker(#[from] super::broker::BrokerError),
    /// A subscription or the first announcement failed.
    #[error("{0}")]
    Nats(String),
}

struct Worker {
    id: String,
    pool: String,
    slots: usize,
    config: Arc<Config>,
    routes: Routes,
    broker: Broker,
    registry: LiveRegistry,
    /// Calls running here, each with the sender that stops it.
    running: Mutex<HashMap<String, oneshot::Sender<()>>>,
    sessions: WorkerSessions,
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs a worker of `options.pool` over `registry` until SIGTERM or SIGINT; running calls
/// then get `remote.worker_shutdown_grace_secs` to finish. Must run inside an actix system.
///
/// # Errors
/// [`WorkerError`] when NATS cannot be reached or refuses the queues.
pub async fn run_worker(config: Arc<Config>, registry: LiveRegistry, options: WorkerOptions) -> Result<(), WorkerError> {
    let cfg = &config.remote;
    // `<pool>.<random>`: the pool is a subject token of its own in every subject and key that
    // names the worker, so that NATS permissions can confine the pool's workers to them.
    let id = format!("{}.{}", options.pool, toolslot::output::random_hex(4));
    let broker = Broker::connect(cfg, &format!("toolslot-worker-{id}"), &worker_inbox(&options.pool)).await?;
    if !broker.sealer.is_on() {
        tracing::warn!("remote.worker_key_file is not set: this worker runs any call published on its pool's subjects");
    }
    let mut queues = Vec::with_capacity(2);
    for read_only in [false, true] {
        let consumer = broker.queue(cfg, &options.pool, read_only).await?;
        queues.push(Queue::open(consumer, &broker).await.map_err(WorkerError::Nats)?);
    }
    let client = broker.client.clone();
    let sub = |subject: String| {
        let client = client.clone();
        async move { client.subscribe(subject).await.map_err(|e| WorkerError::Nats(e.to_string())) }
    };
    // Subscribed before the first announcement: a call addressed here is never missed.
    let direct = sub(direct_subject(&id)).await?;
    let cancels = sub(cancel_subject(&id)).await?;
    let worker = Arc::new(Worker {
        id,
        pool: options.pool,
        slots: options.slots.max(1),
        routes: Routes::new(&cfg.routes),
        config: Arc::clone(&config),
        broker,
        registry,
        running: Mutex::new(HashMap::new()),
        sessions: WorkerSessions::default(),
    });
    worker.announce().await.map_err(WorkerError::Nats)?;
    eprintln!(
        "toolslot: worker {} of pool {} ready ({} slots, {} tools)",
        worker.id,
        worker.pool,
        worker.slots,
        worker.hosted().len()
    );
    let (stop_tx, stop) = watch::channel(false);
    actix::spawn(Arc::clone(&worker).announce_loop(stop.clone()));
    actix::spawn(Arc::clone(&worker).serve_direct(direct));
    actix::spawn(Arc::clone(&worker).serve_cancels(cancels));
    actix::spawn(async move {
        wait_for_signal().await;
        let _ = stop_tx.send(true);
    });
    Arc::clone(&worker).pull(queues, stop).await;
    worker.shut_down().await;
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// How long a pull asked for right after the bell waits at the server for the call to be
/// stored (it returns as soon as one is).
const BELL_WAIT: Duration = Duration::from_millis(5);

/// The last token of each queue's subject, in the order of the worker's queues (calls that
/// may write, then read-only ones; see `broker::call_subject`).
const QUEUE_NAMES: [&str; 2] = ["write", "read"];

/// The bell: the calls published to `pool`'s queues, heard as a queue group, so that the
/// server hands each publish to one member only (the message itself is not used: calls are
/// taken from the queue, which decides who gets each). A worker is a member only while it has
/// a free slot and is idle, so a call wakes one worker that can take it, not the whole pool.
fn bell_subject(pool: &str) -> (String, String) {
    (format!("toolslot.call.{pool}.*"), format!("{pool}-bell"))
}

impl Worker {
    /// The tools this worker announces: those its routes send to its pool (all, when no route
    /// names the pool), less those bound to the dispatcher's session.
    fn hosted(&self) -> Vec<AnnouncedTool> {
        let everything = !self.routes.names_pool(&self.pool);
        self.registry
            .current()
            .iter()
            .filter(|t| !SESSION_BOUND.contains(&t.spec.name()))
            .filter(|t| everything || self.routes.pool_of(t.spec.name()) == Some(self.pool.as_str()))
            .map(|t| AnnouncedTool::of(t.spec.as_ref()))
            .collect()
    }

    async fn announce(&self) -> Result<(), String> {
        let a = Announcement {
            worker: self.id.clone(),
            pool: self.pool.clone(),
            slots: self.slots,
            running: lock(&self.running).keys().cloned().collect(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            tools: self.hosted(),
            hides: true,
        };
        let value = serde_json::to_vec(&a).map_err(|e| e.to_string())?;
        let value = self.broker.sealer.seal(Domain::Announcement, &self.id, &value);
        self.broker
            .workers
            .put(&self.id, value.into())
            .await
            .map(|_| ())
            .map_err(|e| format!("cannot announce worker {}: {e}", self.id))
    }

    async fn announce_loop(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let period = Duration::from_millis(self.config.remote.announce_ttl_ms / 3);
        loop {
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                _ = stop.changed() => return,
            }
            if let Err(e) = self.announce().await {
                tracing::warn!(worker = %self.id, error = %e, "announcement failed");
            }
        }
    }

    /// Takes calls from the two queues, never more than the free slots.
    ///
    /// The worker joins the pool's bell group only when it found nothing to take with a free
    /// slot, and leaves it when its slots are full: a call published meanwhile rings a worker
    /// that can take it, and a worker whose slots are busy is not woken for nothing. Joining
    /// is followed by one more look at the queues, since a call published before the join
    /// rang nobody here. A bell lost with its worker (killed, stopped, or full a moment
    /// after it was rung) delays the call until another worker looks (`remote.worker_poll_ms`)
    /// or a slot frees; the call stays queued, so nothing is lost.
    async fn pull(self: Arc<Self>, mut queues: Vec<Queue>, mut stop: watch::Receiver<bool>) {
        let slots = Arc::new(Semaphore::new(self.slots));
        let (bell_subject, bell_group) = bell_subject(&self.pool);
        let mut bell: Option<async_nats::Subscriber> = None;
        let poll = Duration::from_millis(self.config.remote.worker_poll_ms.max(1));
        let mut turn = 0usize;
        // The queue a bell named (its subject ends with it), set when it rang: the bell can
        // ring before the server has stored the call, so the next pass asks that queue first
        // and waits a moment there instead of until the next poll. Only there: a wait at the
        // other, empty queue would hold the call for the whole wait.
        let mut behind_bell: Option<usize> = None;
        loop {
            let first = tokio::select! {
                p = Arc::clone(&slots).acquire_owned() => match p { Ok(p) => p, Err(_) => return },
                _ = stop.changed() => return,
            };
            let mut permits = vec![first];
            while let Ok(p) = Arc::clone(&slots).try_acquire_owned() {
                permits.push(p);
            }
            let mut got = 0usize;
            // Both queues are asked: first the one a bell named, else a different one each
            // time, so that neither starves the other.
            let start = behind_bell.unwrap_or(turn);
            for i in 0..queues.len() {
                if permits.is_empty() {
                    break;
                }
                let at = (start + i) % queues.len();
                let wait = (behind_bell == Some(at)).then_some(BELL_WAIT);
                if wait.is_some() {
                    tracing::debug!(worker = %self.id, queue = QUEUE_NAMES[at], "waiting at the server for the bell's call");
                }
                // A bell rings for one call: asking for more would hold the pull at the
                // server for the whole wait and end it with a `408`.
                let ask = if wait.is_some() { 1 } else { permits.len() };
                let pulled = queues[at]
                    .pull(ask, wait, |msg| match permits.pop() {
                        Some(permit) => {
                            got += 1;
                            actix::spawn(Arc::clone(&self).delivered(msg, permit));
                        }
                        // Never more than asked for; a stray one goes back at once.
                        None => {
                            actix::spawn(async move {
                                let _ = msg.ack_with(AckKind::Nak(None)).await;
                            });
                        }
                    })
                    .await;
                if let Err(e) = pulled {
                    tracing::debug!(worker = %self.id, queue = QUEUE_NAMES[at], error = %e, "pull failed");
                }
                if wait.is_some() && got > 0 {
                    break;
                }
            }
            turn = turn.wrapping_add(1);
            drop(permits);
            if *stop.borrow() {
                return;
            }
            // The bell's call taken, with a slot still free and the bell still heard: every
            // call published since rings here or at another idle worker, so the queues are not
            // asked again, which would only bring the server's `404`s back.
            let served_bell = behind_bell.is_some() && got > 0 && bell.is_some() && slots.available_permits() > 0;
            if got == 0 || served_bell {
                let Some(ringing) = bell.as_mut() else {
                    match self.broker.client.queue_subscribe(bell_subject.clone(), bell_group.clone()).await {
                        Ok(sub) => {
                            bell = Some(sub);
                            // One more look: a call published before the join rang nobody here.
                            behind_bell = None;
                            continue;
                        }
                        Err(e) => {
                            tracing::debug!(worker = %self.id, error = %e, "cannot join the bell group; polling");
                            behind_bell = None;
                            tokio::select! {
                                _ = tokio::time::sleep(poll) => {}
                                _ = stop.changed() => return,
                            }
                            continue;
                        }
                    }
                };
                let rang = tokio::select! {
                    rang = ringing.next() => Some(rang),
                    _ = tokio::time::sleep(poll) => None,
                    _ = stop.changed() => return,
                };
                behind_bell = match rang {
                    Some(Some(msg)) => {
                        let last = msg.subject.as_str().rsplit('.').next();
                        let at = QUEUE_NAMES.iter().position(|q| Some(*q) == last);
                        tracing::debug!(worker = %self.id, queue = at.map_or("?", |q| QUEUE_NAMES[q]), "woken by the bell");
                        // A subject naming neither queue (none is published): both are asked, neither waited on.
                        at
                    }
                    // The subscription ended: joined again at the next idle pass.
                    Some(None) => {
                        bell = None;
                        None
                    }
                    None => None,
                };
            } else {
                behind_bell = None;
                if slots.available_permits() == 0
                    && let Some(mut full) = bell.take()
                {
                    // Busy: a bell heard now would wake nobody who can take its call.
                    let _ = full.unsubscribe().await;
                }
            }
        }
    }

    /// A call from a queue.
    async fn delivered(self: Arc<Self>, msg: jetstream::Message, slot: OwnedSemaphorePermit) {
        let attempt = msg.info().map_or(1, |i| i.delivered);
        let parent = super::trace::context_of(msg.headers.as_ref());
        let job = match self.open_job(msg.subject.as_str(), &msg.payload) {
            Ok(j) => j,
            Err(e) => {
                tracing::warn!(worker = %self.id, subject = %msg.subject, error = %e, "a message in the queue was refused; dropped, nothing run");
                let _ = msg.ack_with(AckKind::Term).await;
                return;
            }
        };
        if lock(&self.running).contains_key(&job.key) {
            // Delivered again while it runs here: the run under way answers it.
            let _ = msg.ack_with(AckKind::Term).await;
            return;
        }
        if job.read_only {
            // A read-only call has no side effect to guard: it starts before it is claimed, and
            // its result counts only if the claim holds.
            let held = self.unclaimed(&job, attempt);
            self.work(job, held, Some(msg), Some(slot), parent).await;
            return;
        }
        match self.claim(&job, attempt).await {
            Claim::Mine(rev) => self.work(job, Held::Claimed(rev), Some(msg), Some(slot), parent).await,
            Claim::Taken => {
                let _ = msg.ack_with(AckKind::Term).await;
            }
            Claim::Failed(e) => {
                tracing::warn!(worker = %self.id, key = %job.key, error = %e, "cannot claim a call");
                // A read-only call may be tried again; one that may write is never delivered
                // twice, and the dispatcher reports it as not started.
                let kind = if job.read_only {
                    AckKind::Nak(Some(Duration::from_millis(500)))
                } else {
                    AckKind::Term
                };
                let _ = msg.ack_with(kind).await;
            }
        }
    }

    /// The job in a message that arrived on `subject`, if a dispatcher sealed it for that
    /// subject (when signing is on).
    fn open_job(&self, subject: &str, payload: &[u8]) -> Result<Job, String> {
        let body = self
            .broker
            .sealer
            .open(Domain::Job, subject, payload, Speaker::Dispatcher)
            .map_err(|e| format!("not a dispatcher's call: {e}"))?;
        serde_json::from_slice(body).map_err(|e| format!("not a call: {e}"))
    }

    /// Runs a call to its record; `msg` is its queue message, if it came from one, and `slot`
    /// the slot it holds, freed as soon as the tool has finished.
    ///
    /// `parent` is the dispatcher's call span, from the message's headers: the run's span is its
    /// child.
    async fn work(
        self: Arc<Self>,
        job: Job,
        held: Held,
        msg: Option<jetstream::Message>,
        slot: Option<OwnedSemaphorePermit>,
        parent: Option<toolslot::telemetry::TraceContext>,
    ) {
        let span = tracing::info_span!(
            "remote_run",
            worker = %self.id,
            key = %job.key,
            tool = %job.tool,
            session = %job.session,
            "otel.name" = %format_args!("remote_run {}", job.tool),
            "otel.kind" = "consumer",
            "toolslot.worker.id" = %self.id,
            "toolslot.remote.key" = %job.key,
        );
        if let Some(parent) = &parent {
            toolslot::telemetry::adopt(&span, parent);
        }
        async move {
            let (stop_tx, mut stopped) = oneshot::channel();
            lock(&self.running).insert(job.key.clone(), stop_tx);
            // The claim, when written; being written; due at `claim_at` (a read-only call).
            let (mut rev, mut claiming, mut claim_at) = match held {
                Held::Claimed(rev) => (Some(rev), None, None),
                Held::Unclaimed { attempt, after } if after.is_zero() => (None, Some(Box::pin(self.claim(&job, attempt))), None),
                Held::Unclaimed { attempt, after } => (None, None, Some((attempt, Box::pin(tokio::time::sleep(after))))),
            };
            let mut refused = None;
            let run = self.execute(&job);
            let mut run = std::pin::pin!(run);
            // The first in-progress ack one period from now; awaiting `interval`'s immediate
            // first tick would hold the tool back until the timer's next millisecond.
            let period = Duration::from_millis((self.config.remote.ack_wait_ms / 3).max(100));
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            let mut result = loop {
                tokio::select! {
                    r = &mut run => break Some(r),
                    _ = async { match claim_at.as_mut() { Some((_, due)) => due.await, None => std::future::pending().await } }, if claim_at.is_some() => {
                        if let Some((attempt, _)) = claim_at.take() {
                            claiming = Some(Box::pin(self.claim(&job, attempt)));
                        }
                    }
                    c = async { match claiming.as_mut() { Some(c) => c.await, None => std::future::pending().await } }, if claiming.is_some() => {
                        claiming = None;
                        match c {
                            Claim::Mine(r) => rev = Some(r),
                            other => {
                                refused = Some(other);
                                break None;
                            }
                        }
                    }
                    // Dropping the tool's future stops it (exec_shell kills its process group).
                    _ = &mut stopped => break None,
                    _ = tick.tick() => {
                        if let Some(m) = &msg {
                            let _ = m.ack_with(AckKind::Progress).await;
                        }
                        if let Some(rev) = rev {
                            match records::read(&self.broker.records, &self.broker.sealer, &job.key).await {
                                Ok(Some((CallRecord::Started { worker, .. }, r))) if worker == self.id && r == rev => {}
                                // NATS is not answering: the tool goes on, its result is written later.
                                Err(ReadError::Nats(_)) => {}
                                // Lost, given up, or forged over: the claim is gone, and so is the tool.
                                Ok(_) | Err(ReadError::Forged { .. }) => break None,
                            }
                        }
                    }
                }
            };
            // A read-only call that ended before its claim was written waits for the claim.
            if result.is_some()
                && rev.is_none()
                && let Some(c) = claiming.take()
            {
                match c.await {
                    Claim::Mine(r) => rev = Some(r),
                    other => {
                        refused = Some(other);
                        result = None;
                    }
                }
            }
            lock(&self.running).remove(&job.key);
            // The tool is done: its slot takes the next call while the result is recorded.
            drop(slot);
            // `done` goes over this worker's claim, or is the claim of a read-only call that
            // ended before its claim was due (`Some(None)`).
            let over = rev.map(Some).or_else(|| claim_at.is_some().then_some(None));
            let (Some(result), Some(over)) = (result, over) else {
                let kind = match refused {
                    Some(Claim::Failed(e)) => {
                        tracing::warn!(error = %e, "cannot claim a call; it will be delivered again");
                        AckKind::Nak(Some(Duration::from_millis(500)))
                    }
                    Some(_) => AckKind::Term,
                    None => {
                        tracing::info!("the call was given up by the dispatcher; stopped");
                        AckKind::Term
                    }
                };
                if let Some(m) = msg {
                    let _ = m.ack_with(kind).await;
                }
                return;
            };
            self.record_done(&job, over, result).await;
            if let Some(m) = msg {
                let _ = m.ack().await;
            }
        }
        .instrument(span)
        .await
    }

    /// Calls addressed to this worker: claimed, answered `started` (or why not), then run.
    async fn serve_direct(self: Arc<Self>, mut direct: async_nats::Subscriber) {
        while let Some(msg) = direct.next().await {
            let this = Arc::clone(&self);
            actix::spawn(async move {
                let reply = msg.reply.clone();
                let parent = super::trace::context_of(msg.headers.as_ref());
                let (answer, run) = match this.open_job(msg.subject.as_str(), &msg.payload) {
                    Err(e) => {
                        tracing::warn!(worker = %this.id, error = %e, "a call addressed here was refused; nothing run");
                        (e, None)
                    }
                    Ok(job) => match this.claim(&job, 1).await {
                        Claim::Mine(rev) => ("started".to_string(), Some((job, Held::Claimed(rev)))),
                        Claim::Taken => ("taken or given up already".to_string(), None),
                        Claim::Failed(e) => (format!("cannot claim it: {e}"), None),
                    },
                };
                if let Some(reply) = reply {
                    let _ = this.broker.client.publish(reply, answer.into()).await;
                }
                if let Some((job, held)) = run {
                    this.work(job, held, None, None, parent).await;
                }
            });
        }
    }

    /// A cancellation names a call running here: it is stopped.
    async fn serve_cancels(self: Arc<Self>, mut cancels: async_nats::Subscriber) {
        while let Some(msg) = cancels.next().await {
            let key = String::from_utf8_lossy(&msg.payload).into_owned();
            if let Some(stop) = lock(&self.running).remove(&key) {
                let _ = stop.send(());
            }
        }
    }

    /// Lets running calls finish (up to the grace period), then withdraws the announcement.
    async fn shut_down(&self) {
        let grace = Instant::now() + Duration::from_secs(self.config.remote.worker_shutdown_grace_secs);
        while !lock(&self.running).is_empty() && Instant::now() < grace {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = self.broker.workers.delete(&self.id).await;
        let _ = self.broker.client.flush().await;
    }
}
