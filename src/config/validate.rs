//! Relations between keys that serde cannot express, checked once every layer is in.

use super::{Config, ConfigError, HostPattern};

impl Config {
    /// Checks relations between keys that serde cannot express.
    pub(super) fn validated(self) -> Result<Config, ConfigError> {
        let o = &self.output;
        if o.shell_head_bytes + o.shell_tail_bytes > o.shell_max_bytes {
            return Err(ConfigError::Invalid {
                key: "output.shell_head_bytes + output.shell_tail_bytes".into(),
                reason: "must not exceed output.shell_max_bytes".into(),
            });
        }
        if o.other_head_bytes + o.other_tail_bytes > o.other_max_bytes {
            return Err(ConfigError::Invalid {
                key: "output.other_head_bytes + output.other_tail_bytes".into(),
                reason: "must not exceed output.other_max_bytes".into(),
            });
        }
        if o.rescue_percent > 100 {
            return Err(ConfigError::Invalid {
                key: "output.rescue_percent".into(),
                reason: format!("{} is not a percentage (0..=100)", o.rescue_percent),
            });
        }
        let a = &self.audit;
        if let Some(ledger) = a.ledger_path() {
            let key = a.key_path();
            if a.key_file.trim().is_empty() || key.starts_with(&ledger) {
                return Err(ConfigError::Invalid {
                    key: "audit.key_file".into(),
                    reason: format!(
                        "a kept ledger needs a key outside its folder ({}): whoever can write the ledger must not reach its key",
                        ledger.display()
                    ),
                });
            }
        }
        let mut names = std::collections::HashSet::new();
        for (i, server) in self.lsp.servers.iter().enumerate() {
            let key = format!("lsp.servers[{i}]");
            let refuse = |reason: String| ConfigError::Invalid { key: key.clone(), reason };
            if server.name.trim().is_empty() {
                return Err(refuse("has no name".into()));
            }
            if !names.insert(server.name.as_str()) {
                return Err(refuse(format!("repeats the name `{}`", server.name)));
            }
            if server.command.is_empty() {
                return Err(refuse(format!("`{}` has no command", server.name)));
            }
            if server.extensions.iter().all(|e| e.trim_start_matches('.').is_empty()) {
                return Err(refuse(format!("`{}` handles no file extension", server.name)));
            }
        }
        if self.hooks.iter().any(|h| h.command.is_empty()) {
            return Err(ConfigError::Invalid {
                key: "hooks.command".into(),
                reason: "a hook needs a program to run".into(),
            });
        }
        for (pattern, pool) in &self.remote.routes {
            if pool.is_empty() || !pool.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
                return Err(ConfigError::Invalid {
                    key: format!("remote.routes.\"{pattern}\""),
                    reason: format!("pool `{pool}` must be letters, digits, `_` or `-` (it names a NATS subject token)"),
                });
            }
        }
        let r = &self.remote;
        if let Err((key, reason)) = r.login().and_then(|_| r.tls_files()) {
            return Err(ConfigError::Invalid { key, reason });
        }
        // A call's record is what refuses its job when the job is published again; once the
        // record is gone only the job's deadline does. So the record must outlive the deadline.
        let deadline_ms = match self.execution.call_timeout_ms {
            0 => r.job_max_age_secs.saturating_mul(1000),
            t => t,
        };
        if r.enabled() && r.record_ttl_secs.saturating_mul(1000) < deadline_ms {
            return Err(ConfigError::Invalid {
                key: "remote.record_ttl_secs".into(),
                reason: format!(
                    "{} s ends before a job's deadline ({deadline_ms} ms: execution.call_timeout_ms, or remote.job_max_age_secs when calls have no timeout): a job published again after its record expired would run again",
                    r.record_ttl_secs
                ),
            });
        }
        if r.enabled()
            && (r.ack_wait_ms < 1000 || r.announce_ttl_ms < 1000 || r.watchdog_interval_ms == 0 || r.read_only_max_deliveries < 1)
        {
            return Err(ConfigError::Invalid {
                key: "remote.ack_wait_ms / announce_ttl_ms / watchdog_interval_ms / read_only_max_deliveries".into(),
                reason: "ack_wait_ms and announce_ttl_ms must be at least 1000 (JetStream counts in seconds and whole heartbeats), the watchdog interval above 0, and deliveries at least 1".into(),
            });
        }
        for (key, entries) in [
            ("network.allow_hosts", &self.network.allow_hosts),
            ("server.allowed_hosts", &self.server.allowed_hosts),
        ] {
            for entry in entries {
                HostPattern::parse(entry).map_err(|reason| ConfigError::Invalid { key: key.into(), reason })?;
            }
        }
        for origin in &self.server.allowed_origins {
            let ok = url::Url::parse(origin).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some() && u.path() == "/");
            if !ok {
                return Err(ConfigError::Invalid {
                    key: "server.allowed_origins".into(),
                    reason: format!("`{origin}` is not an origin (scheme://host[:port])"),
                });
            }
        }
        if self.server.cancel_on_disconnect && self.server.disconnect_grace_ms == 0 {
            return Err(ConfigError::Invalid {
                key: "server.disconnect_grace_ms".into(),
                reason: "must be at least 1 with server.cancel_on_disconnect (a round whose events are read is checked again every grace)"
                    .into(),
            });
        }
        if self.loop_guard.repeat_block < 2 {
            return Err(ConfigError::Invalid {
                key: "loop_guard.repeat_block".into(),
                reason: "must be at least 2, or every call would be blocked".into(),
            });
        }
        Ok(self)
    }
}
