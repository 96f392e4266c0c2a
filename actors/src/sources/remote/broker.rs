//! The JetStream objects toolslot uses, named once, created where missing.
//!
//! | object | kind | what it holds |
//! |---|---|---|
//! | `TOOLSLOT_CALLS` | stream, work-queue retention | calls waiting for a worker, on `toolslot.call.<pool>.write` and `.read` |
//! | `<pool>-write`, `<pool>-read` | durable pull consumers | the pool's queues: max deliveries 1 for calls that may write, `remote.read_only_max_deliveries` for read-only ones |
//! | `toolslot_calls` | KV | each call's record: started, done or abandoned (compare-and-set) |
//! | `toolslot_workers` | KV, entries live `remote.announce_ttl_ms` | each worker's announcement |
//! | `toolslot_results` | object store | results larger than `remote.inline_result_max_bytes` |
//!
//! The connection logs in with the one form `[remote]` names (user and password, token, nkey,
//! credentials file), over TLS when asked, and every reply a side waits for comes to an inbox
//! of its own (`_INBOX.toolslot.dispatcher.…`, `_INBOX.toolslot.worker.<pool>.…`), so that NATS
//! permissions can keep one pool's workers from reading another's replies. Secrets are read
//! here, from the variable or file a key names, and never appear in an error.

use std::time::Duration;

use async_nats::jetstream::{self, consumer, kv, object_store, stream};
use toolslot::config::{NatsLogin, RemoteConfig};
use toolslot::remote::seal::{Sealer, Side};

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

/// The inbox prefix of dispatchers: the replies they wait for (JetStream acknowledgements,
/// records read, requests to workers) come under it.
pub const DISPATCHER_INBOX: &str = "_INBOX.toolslot.dispatcher";

/// The inbox prefix of the workers of `pool`.
pub fn worker_inbox(pool: &str) -> String {
    format!("_INBOX.toolslot.worker.{pool}")
}

/// The subject a worker answers calls addressed to it on (its background tasks' calls). A
/// worker's id is `<pool>.<random>`, so the subject names the pool as a token of its own.
pub fn direct_subject(worker: &str) -> String {
    format!("toolslot.worker.{worker}.call")
}

/// What every progress subject starts with; the call's key follows.
const PROGRESS_PREFIX: &str = "toolslot.progress.";

/// The subject a call's progress reports travel on, from its worker to its dispatcher.
pub fn progress_subject(key: &str) -> String {
    format!("{PROGRESS_PREFIX}{key}")
}

/// The subjects of every call's progress reports, which a dispatcher hears on one subscription.
pub fn all_progress() -> String {
    format!("{PROGRESS_PREFIX}>")
}

/// The call key a progress subject names.
pub fn progress_key(subject: &str) -> Option<&str> {
    subject.strip_prefix(PROGRESS_PREFIX)
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
    #[error("cannot reach NATS at `{url}`{login}: {reason}")]
    Connect {
        /// The URL, a password or token in it masked.
        url: String,
        /// How it logged in (which keys, which variable or file; never a secret), or "".
        login: String,
        /// Why (secrets masked).
        reason: String,
    },
    /// A credential `[remote]` names could not be read; names the key and the variable or
    /// file, never the secret.
    #[error("{key} {source_name}: {reason}")]
    Credential {
        /// The config key (`remote.password_env`, …).
        key: &'static str,
        /// The variable or file it names.
        source_name: String,
        /// Why.
        reason: String,
    },
    /// The signing key could not be loaded.
    #[error(transparent)]
    Key(#[from] toolslot::remote::seal::KeyError),
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
    /// Woken when the connection comes back: what was published to us meanwhile is lost.
    back: tokio::sync::Notify,
}

impl Link {
    fn new() -> Self {
        Self {
            changed: std::sync::Mutex::new(None),
            up: std::sync::atomic::AtomicBool::new(true),
            back: tokio::sync::Notify::new(),
        }
    }

    fn set(&self, up: bool) {
        let was = self.up.swap(up, std::sync::atomic::Ordering::SeqCst);
        *self.changed.lock().unwrap_or_else(|p| p.into_inner()) = Some(std::time::Instant::now());
        if up && !was {
            self.back.notify_waiters();
        }
    }

    /// Returns when the connection next comes back after a break.
    pub async fn came_back(&self) {
        self.back.notified().await;
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
    /// Signs what this side publishes with its own key and checks what it reads against the
    /// keys it trusts (`remote.dispatcher_key_file`, `worker_key_file`, `trusted_workers`).
    pub sealer: Sealer,
}

/// `url` with any password or token in it masked (`nats://user:***@host`, `nats://***@host`).
pub fn masked_url(url: &str) -> String {
    url.split(',')
        .map(|one| {
            let Some((scheme, rest)) = one.split_once("://") else {
                return one.to_string();
            };
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            match authority.rsplit_once('@') {
                Some((userinfo, host)) => match userinfo.split_once(':') {
                    Some((user, _)) => format!("{scheme}://{user}:***@{host}{path}"),
                    None => format!("{scheme}://***@{host}{path}"),
                },
                None => one.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The secrets of a login, read from where `[remote]` says, set on `options`; the secrets are
/// returned too, so that any error text can be scrubbed of them.
fn log_in(
    cfg: &RemoteConfig,
    options: async_nats::ConnectOptions,
) -> Result<(async_nats::ConnectOptions, String, Vec<String>), BrokerError> {
    let var = |key: &'static str, name: &str| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| BrokerError::Credential {
                key,
                source_name: format!("`{name}`"),
                reason: "the environment variable is not set (or empty)".into(),
            })
    };
    let file = |key: &'static str, path: &std::path::Path| {
        std::fs::read_to_string(path).map_err(|e| BrokerError::Credential {
            key,
            source_name: format!("`{}`", path.display()),
            reason: format!("cannot be read ({e})"),
        })
    };
    let login = cfg.login().map_err(|(key, reason)| BrokerError::Credential {
        key: "remote",
        source_name: key,
        reason,
    })?;
    Ok(match login {
        NatsLogin::Anonymous => (options, String::new(), Vec::new()),
        NatsLogin::UserPassword { user, password_env } => {
            let password = var("remote.password_env", &password_env)?;
            let how = format!(" as user `{user}` (password from ${password_env})");
            (options.user_and_password(user, password.clone()), how, vec![password])
        }
        NatsLogin::Token { token_env } => {
            let token = var("remote.token_env", &token_env)?;
            let how = format!(" with the token from ${token_env}");
            (options.token(token.clone()), how, vec![token])
        }
        NatsLogin::Nkey { seed_file } => {
            let seed = file("remote.nkey_seed_file", &seed_file)?.trim().to_string();
            // A user seed: `S` (seed), `U` (user), base32. Checked here because the client
            // only logs a bad seed and then connects without it.
            if seed.len() != 58 || !seed.starts_with("SU") || !seed.bytes().all(|b| b.is_ascii_uppercase() || (b'2'..=b'7').contains(&b)) {
                return Err(BrokerError::Credential {
                    key: "remote.nkey_seed_file",
                    source_name: format!("`{}`", seed_file.display()),
                    reason: "does not hold a user nkey seed (one line of 58 characters starting `SU`)".into(),
                });
            }
            let how = format!(" with the nkey seed in `{}`", seed_file.display());
            (options.nkey(seed.clone()), how, vec![seed])
        }
        NatsLogin::Credentials { file: path } => {
            let text = file("remote.credentials_file", &path)?;
            let options = options.credentials(&text).map_err(|e| BrokerError::Credential {
                key: "remote.credentials_file",
                source_name: format!("`{}`", path.display()),
                reason: format!("is not a NATS credentials file ({e})"),
            })?;
            (options, format!(" with the credentials in `{}`", path.display()), Vec::new())
        }
    })
}

/// TLS as `[remote]` asks: the CA, the client's certificate, whether TLS is required. Files are
/// checked here so that a missing one is named by its key.
fn with_tls(cfg: &RemoteConfig, mut options: async_nats::ConnectOptions) -> Result<async_nats::ConnectOptions, BrokerError> {
    let tls = cfg.tls_files().map_err(|(key, reason)| BrokerError::Credential {
        key: "remote",
        source_name: key,
        reason,
    })?;
    let readable = |key: &'static str, path: &std::path::Path| {
        std::fs::File::open(path).map(|_| ()).map_err(|e| BrokerError::Credential {
            key,
            source_name: format!("`{}`", path.display()),
            reason: format!("cannot be read ({e})"),
        })
    };
    if let Some(ca) = tls.ca {
        readable("remote.tls_ca_file", &ca)?;
        options = options.add_root_certificates(ca);
    }
    if let Some((cert, key)) = tls.client {
        readable("remote.tls_cert_file", &cert)?;
        readable("remote.tls_key_file", &key)?;
        options = options.add_client_certificate(cert, key);
    }
    Ok(options.require_tls(cfg.tls_required))
}

impl Broker {
    /// Connects as `name`, its replies under `inbox` ([`DISPATCHER_INBOX`], [`worker_inbox`]),
    /// logged in as `[remote]` says, and opens (creating where missing) the streams and
    /// buckets. The client reconnects by itself for ever after a lost connection.
    ///
    /// # Errors
    /// [`BrokerError`] when a credential or the signing key cannot be read, the server cannot
    /// be reached or refuses the login, or JetStream refuses.
    pub async fn connect(cfg: &RemoteConfig, name: &str, inbox: &str) -> Result<Self, BrokerError> {
        // The key first: a side that should sign but cannot never touches the bus.
        let side = if inbox == DISPATCHER_INBOX {
            Side::Dispatcher
        } else {
            Side::Worker
        };
        let sealer = Sealer::from_config(cfg, side)?;
        let link = std::sync::Arc::new(Link::new());
        let events = std::sync::Arc::clone(&link);
        let options = async_nats::ConnectOptions::new()
            .name(name)
            .custom_inbox_prefix(inbox)
            .event_callback(move |event| {
                match event {
                    async_nats::Event::Disconnected => {
                        tracing::warn!("lost the connection to NATS; reconnecting");
                        events.set(false);
                    }
                    async_nats::Event::Connected => events.set(true),
                    // A permissions violation: the account lacks a subject this side uses.
                    async_nats::Event::ServerError(e) => tracing::warn!(error = %e, "the NATS server refused a request"),
                    _ => {}
                }
                std::future::ready(())
            })
            .connection_timeout(Duration::from_secs(5));
        let (options, login, secrets) = log_in(cfg, options)?;
        let options = with_tls(cfg, options)?;
        let url = masked_url(cfg.nats_url.trim());
        let client = options.connect(cfg.nats_url.trim()).await.map_err(|e| {
            let mut reason = e.to_string();
            if e.kind() == async_nats::ConnectErrorKind::AuthorizationViolation {
                reason.push_str(
                    " (the server refused this login: check remote.user / password_env / token_env / nkey_seed_file / credentials_file)",
                );
            }
            // The client's messages carry no secret today; this keeps it so if one ever does.
            for secret in secrets.iter().chain(url_secrets(cfg.nats_url.trim()).iter()) {
                reason = reason.replace(secret.as_str(), "***");
            }
            BrokerError::Connect { url, login, reason }
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
            sealer,
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

/// The passwords and tokens written into `url`'s user info.
fn url_secrets(url: &str) -> Vec<String> {
    url.split(',')
        .filter_map(|one| one.split_once("://").map(|(_, rest)| rest))
        .filter_map(|rest| rest.split('/').next().and_then(|a| a.rsplit_once('@')).map(|(info, _)| info))
        .map(|info| info.split_once(':').map_or(info, |(_, secret)| secret).to_string())
        .filter(|s| !s.is_empty())
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_printed_without_their_secrets() {
        for (url, shown) in [
            ("nats://127.0.0.1:4222", "nats://127.0.0.1:4222"),
            ("nats://app:s3cret@nats.local:4222", "nats://app:***@nats.local:4222"),
            ("tls://t0ken@a:4222,nats://b:4222", "tls://***@a:4222,nats://b:4222"),
        ] {
            assert_eq!(masked_url(url), shown);
        }
        assert_eq!(url_secrets("nats://app:s3cret@a,tls://t0ken@b,nats://c"), ["s3cret", "t0ken"]);
    }
}
