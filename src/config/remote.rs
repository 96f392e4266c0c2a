//! `[remote]`: tools run on worker processes over NATS JetStream.

use serde::Deserialize;

use super::expand_home;

/// `[remote]`: tools that run on worker processes, reached through NATS JetStream.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteConfig {
    /// The NATS server ("" = every tool runs in-process).
    pub nats_url: String,
    /// Tool-name globs → the pool of workers that runs them.
    pub routes: std::collections::BTreeMap<String, String>,
    /// How long a worker may stay silent on a call before its delivery counts as lost (ms).
    pub ack_wait_ms: u64,
    /// Deliveries of a read-only call at most (a lost worker's read-only call goes to another).
    pub read_only_max_deliveries: i64,
    /// How long a read-only call runs on its first delivery before its worker claims it (ms;
    /// 0: at once). One that ends sooner records its `done` as its claim, in one write.
    pub read_only_claim_after_ms: u64,
    /// A worker not heard from for this long is gone (ms).
    pub announce_ttl_ms: u64,
    /// How often the dispatcher's watchdog looks at each remote call in flight (ms).
    pub watchdog_interval_ms: u64,
    /// Results larger than this travel through the object store (bytes).
    pub inline_result_max_bytes: usize,
    /// How long call records and stored results are kept (s).
    pub record_ttl_secs: u64,
    /// Window in which a repeated publish of the same call is dropped as a duplicate (s).
    pub dedup_window_secs: u64,
    /// A queued call nobody took within this long is dropped (s).
    pub job_max_age_secs: u64,
    /// Calls one worker runs at once, unless `--slots` says otherwise.
    pub worker_slots: usize,
    /// How often an idle worker looks at its queues when no publish woke it (ms).
    pub worker_poll_ms: u64,
    /// How long a stopping worker lets its running calls finish (s).
    pub worker_shutdown_grace_secs: u64,
    /// How long a dispatcher's lease on a session lasts unless renewed (ms).
    pub session_lease_ttl_ms: u64,
    /// This dispatcher's name in session leases ("" = a new random one per process): a
    /// dispatcher started again under the same name takes its own sessions back at once.
    pub dispatcher_id: String,
    /// How long a session's record is kept after its last write (s).
    pub session_ttl_secs: u64,
    /// How many saved outputs a durable session keeps in the object store for a dispatcher
    /// that takes it over (the newest; 0: none).
    pub session_saved_max: usize,
    /// The NATS user to log in as ("" = none); its password is read from `password_env`.
    pub user: String,
    /// The name of the environment variable holding `user`'s password (never the password).
    pub password_env: String,
    /// The name of the environment variable holding a NATS token ("" = none).
    pub token_env: String,
    /// A file holding a user nkey seed (`SU…`) to log in with ("" = none).
    pub nkey_seed_file: String,
    /// A NATS credentials file (user JWT and nkey seed, decentralized auth) ("" = none).
    pub credentials_file: String,
    /// Certificates (PEM) that verify the server, beside the system's roots ("" = none).
    pub tls_ca_file: String,
    /// This client's certificate (PEM), for servers that verify clients ("" = none).
    pub tls_cert_file: String,
    /// The private key (PEM) of `tls_cert_file`.
    pub tls_key_file: String,
    /// Refuse to talk to the server without TLS.
    pub tls_required: bool,
    /// The dispatcher's nkey seed (mode 0600), which signs each job it queues and each
    /// `abandoned` it writes ("" = this dispatcher signs nothing; see `toolslot::remote::seal`).
    pub dispatcher_key_file: String,
    /// This worker's own nkey seed (mode 0600), which signs its records, answers, progress
    /// reports and announcements.
    pub worker_key_file: String,
    /// The dispatcher's public key (`U…`): the only key a worker runs jobs signed by.
    pub dispatcher_public_key: String,
    /// `"<worker id or glob> = <public key>"`: the keys trusted to speak for which workers.
    pub trusted_workers: Vec<String>,
}

/// How a client logs in to NATS, from `[remote]`: at most one form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NatsLogin {
    /// No credentials (or those in `nats_url`).
    Anonymous,
    /// `user`, with the password in the variable `password_env`.
    UserPassword {
        /// `remote.user`.
        user: String,
        /// `remote.password_env`.
        password_env: String,
    },
    /// A token in the variable `token_env`.
    Token {
        /// `remote.token_env`.
        token_env: String,
    },
    /// A user nkey seed in a file.
    Nkey {
        /// `remote.nkey_seed_file`, `~` expanded.
        seed_file: std::path::PathBuf,
    },
    /// A credentials file (JWT and seed).
    Credentials {
        /// `remote.credentials_file`, `~` expanded.
        file: std::path::PathBuf,
    },
}

impl RemoteConfig {
    /// Whether remote execution is on.
    pub fn enabled(&self) -> bool {
        !self.nats_url.trim().is_empty()
    }

    /// How to log in, or which keys contradict each other (named, with the rule).
    ///
    /// # Errors
    /// `(keys, reason)` when more than one form is set, or a form is set by half.
    pub fn login(&self) -> Result<NatsLogin, (String, String)> {
        let set = |v: &str| !v.trim().is_empty();
        let forms: Vec<&str> = [
            ("user", set(&self.user) || set(&self.password_env)),
            ("token_env", set(&self.token_env)),
            ("nkey_seed_file", set(&self.nkey_seed_file)),
            ("credentials_file", set(&self.credentials_file)),
        ]
        .into_iter()
        .filter_map(|(k, on)| on.then_some(k))
        .collect();
        if forms.len() > 1 {
            return Err((
                forms.iter().map(|k| format!("remote.{k}")).collect::<Vec<_>>().join(" / "),
                "name one way to log in to NATS, not several".into(),
            ));
        }
        if set(&self.user) != set(&self.password_env) {
            return Err((
                "remote.user / remote.password_env".into(),
                "a user needs the name of the variable holding its password, and a password a user".into(),
            ));
        }
        Ok(match forms.first() {
            None => NatsLogin::Anonymous,
            Some(&"user") => NatsLogin::UserPassword {
                user: self.user.trim().to_string(),
                password_env: self.password_env.trim().to_string(),
            },
            Some(&"token_env") => NatsLogin::Token {
                token_env: self.token_env.trim().to_string(),
            },
            Some(&"nkey_seed_file") => NatsLogin::Nkey {
                seed_file: expand_home(self.nkey_seed_file.trim()),
            },
            Some(_) => NatsLogin::Credentials {
                file: expand_home(self.credentials_file.trim()),
            },
        })
    }

    /// The TLS files: CA, and the client's certificate with its key, `~` expanded.
    ///
    /// # Errors
    /// `(keys, reason)` when a certificate comes without its key or a key without its
    /// certificate.
    pub fn tls_files(&self) -> Result<TlsFiles, (String, String)> {
        let path = |v: &str| (!v.trim().is_empty()).then(|| expand_home(v.trim()));
        let client = match (path(&self.tls_cert_file), path(&self.tls_key_file)) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            _ => {
                return Err((
                    "remote.tls_cert_file / remote.tls_key_file".into(),
                    "a client certificate needs its private key, and a key its certificate".into(),
                ));
            }
        };
        Ok(TlsFiles {
            ca: path(&self.tls_ca_file),
            client,
        })
    }
}

/// The TLS files of `[remote]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// `remote.tls_ca_file`.
    pub ca: Option<std::path::PathBuf>,
    /// `remote.tls_cert_file` and `remote.tls_key_file`.
    pub client: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// The `[remote]` table of `lines` (besides a NATS URL), or the config error's text.
    fn check(lines: &str) -> Result<RemoteConfig, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let file = dir.path().join("c.toml");
        std::fs::write(&file, format!("[remote]\nnats_url = \"nats://127.0.0.1:4222\"\n{lines}\n")).map_err(|e| e.to_string())?;
        Config::load_with_env(Some(&file), std::iter::empty())
            .map(|c| c.remote)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn one_login_form_is_taken_whole() {
        let c = check("user = \"w\"\npassword_env = \"PW\"").unwrap();
        assert_eq!(
            c.login(),
            Ok(NatsLogin::UserPassword {
                user: "w".into(),
                password_env: "PW".into()
            })
        );
        assert_eq!(check("").unwrap().login(), Ok(NatsLogin::Anonymous));
        assert_eq!(
            check("token_env = \"T\"").unwrap().login(),
            Ok(NatsLogin::Token { token_env: "T".into() })
        );
        for (lines, keys) in [
            ("user = \"w\"\ntoken_env = \"T\"", "remote.user / remote.token_env"),
            (
                "nkey_seed_file = \"a\"\ncredentials_file = \"b\"",
                "remote.nkey_seed_file / remote.credentials_file",
            ),
            ("user = \"w\"", "remote.user / remote.password_env"),
            ("password_env = \"PW\"", "remote.user / remote.password_env"),
            ("tls_cert_file = \"c.pem\"", "remote.tls_cert_file / remote.tls_key_file"),
        ] {
            let err = check(lines).unwrap_err();
            assert!(err.contains(keys), "{lines}: {err}");
        }
    }

    #[test]
    fn a_record_must_outlive_its_jobs_deadline() {
        // Calls time out after two minutes by default: a record kept one minute would let a job
        // published again after it expired run again.
        let err = check("record_ttl_secs = 60").unwrap_err();
        assert!(err.contains("remote.record_ttl_secs"), "{err}");
        assert!(check("record_ttl_secs = 120").is_ok());
    }
}
