//! The JetStream objects toolslot uses, named once, created where missing.
//!
//! | object | kind | what it holds |
//! |---|---|---|
//! | `TOOLSLOT_CALLS` | stream, work-queue retention | calls waiting for a worker, on `toolslot.call.<pool>.write` and `.read` |
//! | `<pool>-write`, `<pool>-read` | durable pull consumers | the pool's queues: max deliveries 1 for calls that may write, `remote.read_only_max_deliveries` for read-only ones |
//! | `toolslot_calls` | KV | each call's record: started, done or abandoned (compare-and-set) |
//! | `toolslot_workers` | KV, entries live `remote.announce_ttl_ms` | each worker's announcement |
//! | `toolslot_results` | object store | results larger than `remote.inline_result_max_bytes` |

use std::time::Duration;

use async_nats::jetstream::{self, consumer, kv, object_store, stream};
use toolslot::config::RemoteConfig;

/// The calls stream.
pub const CALLS_STREAM: &str = "TOOLSLOT_CALLS";
/// The call records.
pub const CALLS_BUCKET: &str = "toolslot_calls";
/// The worker announcements.
pub const WORKERS_BUCKET: &str = "toolslot_workers";
/// Results too large for a record.
pub const RESULTS_STORE: &str = "toolslot_results";

/// The subject of a pool's queue for calls that may write (`read_only` false) or only read.
pub fn call_subject(pool: &str, read_only: bool) -> String {
    format!("toolslot.call.{pool}.{}", if read_only { "read" } else { "write" })
}

/// The subject a worker answers calls addressed to it on (its background tasks' calls).
pub fn direct_subject(worker: &str) -> String {
    format!("toolslot.worker.{worker}.call")
}

/// The subject a call's progress reports travel on, from its worker to its dispatcher.
pub fn progress_subject(key: &str) -> String {
    format!("toolslot.progress.{key}")
}

/// The subjects a dispatcher hears its calls' answers on (`<prefix>.<key>`), one prefix per
/// dispatcher.
pub fn answer_prefix(dispatcher: &str) -> String {
    format!("toolslot.answer.{dispatcher}")
}

/// The subject a worker hears cancellations of its calls on.
pub fn cancel_subject(worker: &str) -> String {
    format!("toolslot.cancel.{worker}")
}

/// Where the server reports a call whose deliveries ran out without an acknowledgement.
pub const MAX_DELIVERIES_ADVISORY: &str = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.TOOLSLOT_CALLS.>";

/// Why talking to NATS failed.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// No connection.
    #[error("cannot reach NATS at `{url}`: {reason}")]
    Connect {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// A stream, bucket or consumer could not be created or opened.
    #[error("cannot set up JetStream {what} (is JetStream enabled on the server, version 2.10 or newer?): {reason}")]
    Setup {
        /// Which object.
        what: String,
        /// Why.
        reason: String,
    },
}

fn setup(what: &str) -> impl Fn(String) -> BrokerError + '_ {
    move |reason| BrokerError::Setup {
        what: what.to_string(),
        reason,
    }
}

/// When this process could last not hear the server: silence from a worker means something
/// only after the connection has been up for a whole announcement period.
#[derive(Debug)]
pub struct Link {
    /// `None` while connected since start-up; else the moment the connection was last lost
    /// or came back, whichever is later (set to "now" on both events).
    changed: std::sync::Mutex<Option<std::time::Instant>>,
    up: std::sync::atomic::AtomicBool,
}

impl Link {
    fn new() -> Self {
        Self {
            changed: std::sync::Mutex::new(None),
            up: std::sync::atomic::AtomicBool::new(true),
        }
    }

    fn set(&self, up: bool) {
        self.up.store(up, std::sync::atomic::Ordering::SeqCst);
        *self.changed.lock().unwrap_or_else(|p| p.into_inner()) = Some(std::time::Instant::now());
    }

    /// Whether the connection has been up, without a break, for at least `period`: only then
    /// can a worker's silence for that long be told from our own deafness.
    pub fn heard_for(&self, period: Duration) -> bool {
        self.up.load(std::sync::atomic::Ordering::SeqCst)
            && self
                .changed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_none_or(|at| at.elapsed() >= period)
    }
}

/// A connection and the objects both sides use.
#[derive(Clone)]
pub struct Broker {
    /// Whether the connection is up, and since when.
    pub link: std::sync::Arc<Link>,
    /// The core connection.
    pub client: async_nats::Client,
    /// JetStream.
    pub js: jetstream::Context,
    /// The calls stream.
    pub calls: stream::Stream,
    /// Call records.
    pub records: kv::Store,
    /// Worker announcements.
    pub workers: kv::Store,
    /// Large results.
    pub results: object_store::ObjectStore,
}

impl Broker {
    /// Connects as `name` and opens (creating where missing) the streams and buckets.
    /// The client reconnects by itself for ever after a lost connection.
    ///
    /// # Errors
    /// [`BrokerError`] when the server cannot be reached or JetStream refuses.
    pub async fn connect(cfg: &RemoteConfig, name: &str) -> Result<Self, BrokerError> {
        let link = std::sync::Arc::new(Link::new());
        let events = std::sync::Arc::clone(&link);
        let client = async_nats::ConnectOptions::new()
            .name(name)
            .event_callback(move |event| {
                match event {
                    async_nats::Event::Disconnected => events.set(false),
                    async_nats::Event::Connected => events.set(true),
                    _ => {}
                }
                std::future::ready(())
            })
            .connection_timeout(Duration::from_secs(5))
            .connect(cfg.nats_url.trim())
            .await
            .map_err(|e| BrokerError::Connect {
                url: cfg.nats_url.clone(),
                reason: e.to_string(),
            })?;
        let js = jetstream::new(client.clone());
        let calls = js
            .get_or_create_stream(stream::Config {
                name: CALLS_STREAM.into(),
                subjects: vec!["toolslot.call.>".into()],
                retention: stream::RetentionPolicy::WorkQueue,
                storage: stream::StorageType::File,
                max_age: Duration::from_secs(cfg.job_max_age_secs.max(1)),
                duplicate_window: Duration::from_secs(cfg.dedup_window_secs.clamp(1, cfg.job_max_age_secs.max(1))),
                ..Default::default()
            })
            .await
            .map_err(|e| setup("stream TOOLSLOT_CALLS")(e.to_string()))?;
        let records = open_bucket(&js, CALLS_BUCKET, Duration::from_secs(cfg.record_ttl_secs.max(1))).await?;
        let workers = open_bucket(&js, WORKERS_BUCKET, Duration::from_millis(cfg.announce_ttl_ms.max(1000))).await?;
        let results = open_objects(&js, RESULTS_STORE, Duration::from_secs(cfg.record_ttl_secs.max(1))).await?;
        Ok(Self {
            link,
            client,
            js,
            calls,
            records,
            workers,
            results,
        })
    }

    /// A pool's queue: the durable pull consumer of its calls that may write (delivered once)
    /// or of its read-only calls (delivered again to another worker when one is lost).
    ///
    /// # Errors
    /// [`BrokerError::Setup`].
    pub async fn queue(&self, cfg: &RemoteConfig, pool: &str, read_only: bool) -> Result<consumer::PullConsumer, BrokerError> {
        let name = format!("{pool}-{}", if read_only { "read" } else { "write" });
        self.calls
            .get_or_create_consumer(
                &name,
                consumer::pull::Config {
                    durable_name: Some(name.clone()),
                    filter_subject: call_subject(pool, read_only),
                    ack_policy: consumer::AckPolicy::Explicit,
                    ack_wait: Duration::from_millis(cfg.ack_wait_ms),
                    max_deliver: if read_only { cfg.read_only_max_deliveries } else { 1 },
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| setup(&format!("consumer {name}"))(e.to_string()))
    }
}

/// Opens the object store `bucket`, creating it (file storage, objects kept `max_age`) where
/// missing.
pub(crate) async fn open_objects(
    js: &jetstream::Context,
    bucket: &str,
    max_age: Duration,
) -> Result<object_store::ObjectStore, BrokerError> {
    if let Ok(store) = js.get_object_store(bucket).await {
        return Ok(store);
    }
    js.create_object_store(object_store::Config {
        bucket: bucket.into(),
        max_age,
        storage: stream::StorageType::File,
        ..Default::default()
    })
    .await
    .map_err(|e| setup(&format!("object store {bucket}"))(e.to_string()))
}

pub(crate) async fn open_bucket(js: &jetstream::Context, bucket: &str, max_age: Duration) -> Result<kv::Store, BrokerError> {
    if let Ok(store) = js.get_key_value(bucket).await {
        return Ok(store);
    }
    js.create_key_value(kv::Config {
        bucket: bucket.into(),
        history: 1,
        max_age,
        storage: stream::StorageType::File,
        ..Default::default()
    })
    .await
    .map_err(|e| setup(&format!("KV bucket {bucket}"))(e.to_string()))
}
