//! Signatures on what crosses the bus: a job is signed by the dispatcher that queued it, and a
//! call record, an answer, a progress report and an announcement by the worker that wrote it,
//! each with its own key.
//!
//! NATS permissions decide who may publish where, but a subject cannot be scoped to one call:
//! whoever may answer some calls of a pool may publish on the subject of any of them. So what
//! is published carries an ed25519 signature, and the receiving side drops what does not
//! verify under a key it trusts for the one the message speaks for:
//! - the dispatcher signs with `remote.dispatcher_key_file`; workers trust only
//!   `remote.dispatcher_public_key` for jobs (and for the `abandoned` records it writes);
//! - each worker signs with its own `remote.worker_key_file`; `remote.trusted_workers` lists, as
//!   `"<worker id or glob> = <public key>"`, which key may speak for which workers. A record
//!   naming worker `W` counts only when signed by a key trusted for `W`, and the dispatcher
//!   takes a `done` only from the key that signed the call's `started` (see
//!   `actors/src/sources/remote/hub.rs`), so one worker's machine cannot answer for another.
//!
//! No secret is shared: a dispatcher holds one seed, each worker its own, and the others hold
//! public keys only. The keys are NATS nkeys (`nk -gen user -pubout`: a seed `SU…` in the key
//! file, a public key `U…` in the configuration), made and read by the `nkeys` crate (ed25519
//! via `ed25519-dalek`), the tooling and text forms NATS operators already use, with a checksum
//! in each so that a mistyped key is refused rather than trusted.
//!
//! A signed message is one line, `toolslot-signed ed25519 <public key> <128 hex digits>`, then
//! the body exactly as it was signed (JSON). The signature covers a label of what the message
//! is ([`Domain`]), the context it belongs to (the subject a job was published on, a record's
//! call key, an announcement's worker), and the body's bytes: the bytes themselves, not a
//! re-serialization. A signed job cannot pass for a record, a record of one call for another's,
//! nor a job queued for writing for one on the read queue.
//!
//! What it does not do: a key listed for a glob (`shell.*`) speaks for every worker the glob
//! names (list a key per worker id to keep them apart); and a signed job published again is
//! signed still (the call record and the job's deadline keep it from running twice, see
//! docs/ARCHITECTURE.md, "Distributed").
//!
//! # Example
//! ```
//! use toolslot::remote::seal::{Domain, Sealer, Speaker};
//!
//! let dispatcher = nkeys::KeyPair::new_user();
//! let public = dispatcher.public_key();
//! let seed = dispatcher.seed().unwrap();
//! let sealer = Sealer::new(Some(&seed), &public, &[]).unwrap();
//! let sealed = sealer.seal(Domain::Job, "toolslot.call.shell.write", br#"{"key":"k"}"#);
//! let open = |subject: &str, m: &[u8]| sealer.open(Domain::Job, subject, m, Speaker::Dispatcher).map(<[u8]>::to_vec);
//! assert_eq!(open("toolslot.call.shell.write", &sealed).unwrap(), br#"{"key":"k"}"#);
//! assert!(open("toolslot.call.shell.read", &sealed).is_err());
//! assert!(open("toolslot.call.shell.write", br#"{"key":"k"}"#).is_err());
//! ```

use std::path::Path;
use std::sync::Arc;

use sha2::Digest;

use crate::config::RemoteConfig;
use crate::hex::hex;

/// What opens a signed message's first line.
const PREFIX: &[u8] = b"toolslot-signed ed25519 ";

/// What a signed message is, bound into its signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    /// A call for a worker, signed by its dispatcher; the context is the subject it was
    /// published on.
    Job,
    /// A call record (`started`, `done`, `abandoned`) as stored and as sent as an answer; the
    /// context is the call's key.
    Record,
    /// A progress report of a running call; the context is the call's key.
    Progress,
    /// A worker's announcement; the context is the worker's id (its key in the bucket).
    Announcement,
    /// A session's lease, naming its dispatcher; the context is the session's id.
    Lease,
}

impl Domain {
    fn label(self) -> &'static [u8] {
        match self {
            Domain::Job => b"toolslot job v2",
            Domain::Record => b"toolslot record v2",
            Domain::Progress => b"toolslot progress v2",
            Domain::Announcement => b"toolslot announcement v2",
            Domain::Lease => b"toolslot lease v2",
        }
    }
}

/// Whom a message speaks for: whose key must have signed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaker<'a> {
    /// The dispatcher (`remote.dispatcher_public_key`).
    Dispatcher,
    /// The worker with this id (a key `remote.trusted_workers` lists for it).
    Worker(&'a str),
    /// The dispatcher or any trusted worker (an `abandoned` record: the dispatcher gives calls
    /// up, and a worker gives up one it found past its deadline; either way nothing runs).
    Anyone,
}

/// Which side this process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `toolslot serve`, `replay`, `catalog`: queues jobs, takes answers.
    Dispatcher,
    /// `toolslot worker`: runs jobs, writes records.
    Worker,
}

/// Why a message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// Signing is on and the message carries no signature.
    #[error("it is not signed (signing is on: unsigned messages are refused)")]
    Unsigned,
    /// The signature is there but does not verify under the key it names.
    #[error("its signature does not match (altered, or not signed by the key it names)")]
    Forged,
    /// The signature verifies, but its key is not trusted for whom the message speaks for.
    #[error("it is signed by {key}, which is not trusted for {speaker}")]
    Untrusted {
        /// The signing key (public).
        key: String,
        /// Whom the message speaks for.
        speaker: String,
    },
}

/// Why a key could not be loaded.
#[derive(Debug, Clone, thiserror::Error)]
#[error("remote.{setting} `{value}`: {reason}")]
pub struct KeyError {
    /// The setting, without `remote.`.
    pub setting: &'static str,
    /// Its value (a file, or a public key: never a seed).
    pub value: String,
    /// Why.
    pub reason: String,
}

/// A message's body and the public key that signed it (`None` when signing is off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened<'a> {
    /// The body, as signed.
    pub body: &'a [u8],
    /// The signing key, verified (but not yet checked against a speaker).
    pub signer: Option<String>,
}

struct Keys {
    /// This side's key pair, which signs what it writes.
    own: Option<nkeys::KeyPair>,
    /// The dispatcher's public key.
    dispatcher: String,
    /// `(glob, public key)` from `remote.trusted_workers`.
    workers: Vec<(globset::GlobMatcher, String)>,
}

/// Signs and opens messages, or passes them through when signing is off.
#[derive(Clone, Default)]
pub struct Sealer {
    keys: Option<Arc<Keys>>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the seed.
        write!(f, "Sealer({})", if self.keys.is_some() { "on" } else { "off" })
    }
}

/// A public key (`U…`) checked: its checksum and that it is an ed25519 nkey.
fn public_key(text: &str) -> Result<String, String> {
    let text = text.trim();
    nkeys::KeyPair::from_public_key(text)
        .map(|k| k.public_key())
        .map_err(|e| format!("is not an nkey public key ({e}); `nk -gen user -pubout` makes a pair"))
}

/// The seed in `path`, which must be private to its owner. Never made: the operator makes the
/// pair and lists its public key where it must be trusted.
fn load_seed(setting: &'static str, path: &Path) -> Result<nkeys::KeyPair, KeyError> {
    let err = |reason: String| KeyError {
        setting,
        value: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| {
        err(format!(
            "cannot be read ({e}); make one with `nk -gen user -pubout > FILE && chmod 600 FILE` (the seed on its first line) and list its public key where it must be trusted"
        ))
    })?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).map_err(|e| err(e.to_string()))?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(err(format!(
                "others than its owner may read it (mode {mode:04o}); `chmod 600` it, or better, make a new pair"
            )));
        }
    }
    // `nk -gen user -pubout` writes the seed, then the public key: the seed is the line that
    // starts with `S`.
    let seed = text.lines().map(str::trim).find(|l| l.starts_with('S')).unwrap_or("");
    nkeys::KeyPair::from_seed(seed).map_err(|_| err("does not hold an nkey seed (a line `SU…`)".into()))
}

impl Sealer {
    /// Signing off: messages go out unsigned and are taken as they come (a signed one has its
    /// signature line stripped, unchecked).
    pub fn off() -> Self {
        Self::default()
    }

    /// Signing on: `seed` signs what this side writes (none: this side only reads),
    /// `dispatcher` is the dispatcher's public key and `trusted` the lines of
    /// `remote.trusted_workers` (`"<worker id or glob> = <public key>"`).
    ///
    /// # Errors
    /// A reason naming the value at fault (never the seed).
    pub fn new(seed: Option<&str>, dispatcher: &str, trusted: &[String]) -> Result<Self, String> {
        let own = seed
            .map(|s| nkeys::KeyPair::from_seed(s.trim()).map_err(|_| "the seed is not an nkey seed".to_string()))
            .transpose()?;
        let dispatcher = public_key(dispatcher).map_err(|e| format!("dispatcher_public_key {e}"))?;
        let workers = trusted
            .iter()
            .map(|line| {
                let (glob, key) = line
                    .split_once('=')
                    .ok_or_else(|| format!("trusted_workers `{line}`: write `\"<worker id or glob> = <public key>\"`"))?;
                let glob = globset::Glob::new(glob.trim())
                    .map_err(|e| format!("trusted_workers `{line}`: {e}"))?
                    .compile_matcher();
                Ok((glob, public_key(key).map_err(|e| format!("trusted_workers `{line}`: the key {e}"))?))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Self {
            keys: Some(Arc::new(Keys { own, dispatcher, workers })),
        })
    }

    /// The sealer `[remote]` makes for `side`: off when none of `dispatcher_key_file`,
    /// `worker_key_file`, `dispatcher_public_key` and `trusted_workers` is set; otherwise on,
    /// with this side's own key file, the dispatcher's public key (a dispatcher takes it from
    /// its own key when it is not given) and the trusted workers all required.
    ///
    /// # Errors
    /// [`KeyError`] naming the setting missing or at fault.
    pub fn from_config(cfg: &RemoteConfig, side: Side) -> Result<Self, KeyError> {
        let set = |v: &str| !v.trim().is_empty();
        if !set(&cfg.dispatcher_key_file)
            && !set(&cfg.worker_key_file)
            && !set(&cfg.dispatcher_public_key)
            && cfg.trusted_workers.is_empty()
        {
            return Ok(Self::off());
        }
        let missing = |setting: &'static str, why: &str| KeyError {
            setting,
            value: String::new(),
            reason: format!("is not set, and signing is on (another of the signing settings is set): {why}"),
        };
        let (setting, file) = match side {
            Side::Dispatcher => ("dispatcher_key_file", &cfg.dispatcher_key_file),
            Side::Worker => ("worker_key_file", &cfg.worker_key_file),
        };
        if !set(file) {
            return Err(missing(setting, "this side signs what it publishes with its own key"));
        }
        let own = load_seed(setting, &crate::config::expand_home(file.trim()))?;
        let dispatcher = match side {
            Side::Dispatcher if !set(&cfg.dispatcher_public_key) => own.public_key(),
            _ if !set(&cfg.dispatcher_public_key) => {
                return Err(missing(
                    "dispatcher_public_key",
                    "a worker runs only jobs signed by the dispatcher's key",
                ));
            }
            _ => cfg.dispatcher_public_key.trim().to_string(),
        };
        if side == Side::Dispatcher && public_key(&dispatcher).ok() != Some(own.public_key()) {
            return Err(KeyError {
                setting: "dispatcher_public_key",
                value: dispatcher,
                reason: "is not the public key of remote.dispatcher_key_file".into(),
            });
        }
        if cfg.trusted_workers.is_empty() {
            return Err(missing("trusted_workers", "only answers signed by a listed worker key are taken"));
        }
        let mut sealer = Self::new(None, &dispatcher, &cfg.trusted_workers).map_err(|reason| KeyError {
            setting: if reason.starts_with("dispatcher") {
                "dispatcher_public_key"
            } else {
                "trusted_workers"
            },
            value: String::new(),
            reason,
        })?;
        if let Some(keys) = sealer.keys.as_mut().and_then(Arc::get_mut) {
            keys.own = Some(own);
        }
        Ok(sealer)
    }

    /// Whether messages are signed and checked.
    pub fn is_on(&self) -> bool {
        self.keys.is_some()
    }

    /// This side's public key, when it signs.
    pub fn public_key(&self) -> Option<String> {
        self.keys.as_ref()?.own.as_ref().map(nkeys::KeyPair::public_key)
    }

    fn signed(domain: Domain, context: &str, body: &[u8]) -> Vec<u8> {
        [domain.label(), &[0], context.as_bytes(), &[0], body].concat()
    }

    /// `body` signed as a `domain` message of `context` (unchanged when signing is off, or
    /// when this side has no key of its own).
    pub fn seal(&self, domain: Domain, context: &str, body: &[u8]) -> Vec<u8> {
        let Some(own) = self.keys.as_ref().and_then(|k| k.own.as_ref()) else {
            return body.to_vec();
        };
        // Signing with a valid ed25519 seed does not fail.
        let signature = own.sign(&Self::signed(domain, context, body)).unwrap_or_default();
        let mut out = Vec::with_capacity(PREFIX.len() + 190 + body.len());
        out.extend_from_slice(PREFIX);
        out.extend_from_slice(own.public_key().as_bytes());
        out.push(b' ');
        out.extend_from_slice(hex(&signature).as_bytes());
        out.push(b'\n');
        out.extend_from_slice(body);
        out
    }

    /// The body of a signed `domain` message of `context` and the key that signed it, its
    /// signature verified (when signing is on) and its key trusted for someone (the
    /// dispatcher or a worker); whom it may speak for is [`Sealer::vouches`]'s question.
    ///
    /// # Errors
    /// [`SealError`] when signing is on and the message is unsigned, its signature does not
    /// verify, or its key is trusted for nobody.
    pub fn open_any<'a>(&self, domain: Domain, context: &str, message: &'a [u8]) -> Result<Opened<'a>, SealError> {
        let split = message
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.iter().position(|&b| b == b'\n').map(|at| (&rest[..at], &rest[at + 1..])));
        let (keys, (head, body)) = match (&self.keys, split) {
            (None, Some((_, body))) => return Ok(Opened { body, signer: None }),
            (None, None) => {
                return Ok(Opened {
                    body: message,
                    signer: None,
                });
            }
            (Some(_), None) => return Err(SealError::Unsigned),
            (Some(keys), Some(split)) => (keys, split),
        };
        let (key, signature) = std::str::from_utf8(head)
            .ok()
            .and_then(|h| h.split_once(' '))
            .ok_or(SealError::Forged)?;
        let signature = unhex(signature).ok_or(SealError::Forged)?;
        let pair = nkeys::KeyPair::from_public_key(key).map_err(|_| SealError::Forged)?;
        pair.verify(&Self::signed(domain, context, body), &signature)
            .map_err(|_| SealError::Forged)?;
        if key != keys.dispatcher && !keys.workers.iter().any(|(_, k)| k == key) {
            return Err(SealError::Untrusted {
                key: key.to_string(),
                speaker: "anyone".into(),
            });
        }
        Ok(Opened {
            body,
            signer: Some(key.to_string()),
        })
    }

    /// Whether `signer` (from [`Opened`]) may speak for `speaker`: always when signing is off.
    ///
    /// # Errors
    /// [`SealError::Untrusted`] when it may not.
    pub fn vouches(&self, signer: Option<&str>, speaker: Speaker<'_>) -> Result<(), SealError> {
        let Some(keys) = &self.keys else {
            return Ok(());
        };
        let key = signer.unwrap_or("");
        let is_worker = |id: Option<&str>| keys.workers.iter().any(|(g, k)| k == key && id.is_none_or(|id| g.is_match(id)));
        let ok = match speaker {
            Speaker::Dispatcher => key == keys.dispatcher,
            Speaker::Worker(id) => is_worker(Some(id)),
            Speaker::Anyone => key == keys.dispatcher || is_worker(None),
        };
        ok.then_some(()).ok_or_else(|| SealError::Untrusted {
            key: key.to_string(),
            speaker: match speaker {
                Speaker::Dispatcher => "the dispatcher".into(),
                Speaker::Worker(id) => format!("worker `{id}`"),
                Speaker::Anyone => "anyone".into(),
            },
        })
    }

    /// The body of a signed `domain` message of `context`, when it verifies and its key is
    /// trusted for `speaker` (anything goes when signing is off).
    ///
    /// # Errors
    /// [`SealError`] as [`Sealer::open_any`] and [`Sealer::vouches`] say.
    pub fn open<'a>(&self, domain: Domain, context: &str, message: &'a [u8], speaker: Speaker<'_>) -> Result<&'a [u8], SealError> {
        let opened = self.open_any(domain, context, message)?;
        self.vouches(opened.signer.as_deref(), speaker)?;
        Ok(opened.body)
    }
}

/// The SHA-256 of `bytes` as `sha256:<hex>`: how a record names the content it points to.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&sha2::Sha256::digest(bytes)))
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    let text = text.as_bytes();
    if text.is_empty() || !text.len().is_multiple_of(2) {
        return None;
    }
    text.chunks(2)
        .map(|pair| {
            let digit = |b: u8| (b as char).to_digit(16);
            Some((digit(pair[0])? * 16 + digit(pair[1])?) as u8)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (String, String) {
        let k = nkeys::KeyPair::new_user();
        (k.seed().unwrap(), k.public_key())
    }

    #[test]
    fn a_signed_message_opens_only_as_what_it_was_signed_and_from_whom() {
        let ((d_seed, d_pub), (a_seed, a_pub), (b_seed, b_pub)) = (pair(), pair(), pair());
        let trusted = vec![format!("shell.a = {a_pub}"), format!("shell.b* = {b_pub}")];
        let dispatcher = Sealer::new(Some(&d_seed), &d_pub, &trusted).unwrap();
        let a = Sealer::new(Some(&a_seed), &d_pub, &trusted).unwrap();
        let b = Sealer::new(Some(&b_seed), &d_pub, &trusted).unwrap();
        let sealed = a.seal(Domain::Record, "shell.s.1", b"{\"state\":\"done\"}");
        let open = |c: &str, d: Domain, s: Speaker<'_>| dispatcher.open(d, c, &sealed, s).map(<[u8]>::to_vec);
        assert_eq!(
            open("shell.s.1", Domain::Record, Speaker::Worker("shell.a")).unwrap(),
            b"{\"state\":\"done\"}"
        );
        // Another call's key, another kind of message: forged. Another worker, the dispatcher:
        // a good signature from the wrong key.
        assert_eq!(
            open("shell.s.2", Domain::Record, Speaker::Worker("shell.a")),
            Err(SealError::Forged)
        );
        assert_eq!(open("shell.s.1", Domain::Job, Speaker::Worker("shell.a")), Err(SealError::Forged));
        assert!(matches!(
            open("shell.s.1", Domain::Record, Speaker::Worker("shell.b1")),
            Err(SealError::Untrusted { .. })
        ));
        assert!(matches!(
            open("shell.s.1", Domain::Record, Speaker::Dispatcher),
            Err(SealError::Untrusted { .. })
        ));
        // B's key speaks for what its glob names, and for nobody else.
        let by_b = b.seal(Domain::Announcement, "shell.b1", b"{}");
        assert!(
            dispatcher
                .open(Domain::Announcement, "shell.b1", &by_b, Speaker::Worker("shell.b1"))
                .is_ok()
        );
        let as_a = b.seal(Domain::Announcement, "shell.a", b"{}");
        assert!(
            dispatcher
                .open(Domain::Announcement, "shell.a", &as_a, Speaker::Worker("shell.a"))
                .is_err()
        );
        // A key trusted for nobody is refused before anyone asks whom it speaks for.
        let (x_seed, _) = pair();
        let stranger = Sealer::new(Some(&x_seed), &d_pub, &trusted).unwrap();
        let job = stranger.seal(Domain::Job, "toolslot.call.shell.write", b"{}");
        assert!(matches!(
            a.open_any(Domain::Job, "toolslot.call.shell.write", &job),
            Err(SealError::Untrusted { .. })
        ));
        let job = dispatcher.seal(Domain::Job, "toolslot.call.shell.write", b"{}");
        assert!(a.open(Domain::Job, "toolslot.call.shell.write", &job, Speaker::Dispatcher).is_ok());
    }

    #[test]
    fn an_altered_body_or_signature_is_refused() {
        let (seed, public) = pair();
        let s = Sealer::new(Some(&seed), &public, &[]).unwrap();
        let mut sealed = s.seal(Domain::Job, "toolslot.call.p.write", b"{\"command\":\"ls\"}");
        let last = sealed.len() - 3;
        sealed[last] = b'X';
        let open = |m: &[u8]| s.open(Domain::Job, "toolslot.call.p.write", m, Speaker::Dispatcher).map(|_| ());
        assert_eq!(open(&sealed), Err(SealError::Forged));
        assert_eq!(open(&[PREFIX, public.as_bytes(), b" 00\n{}"].concat()), Err(SealError::Forged));
        assert_eq!(open(&[PREFIX, b"zz\n{}"].concat()), Err(SealError::Forged));
    }

    #[test]
    fn signing_on_refuses_plain_messages_and_off_takes_both() {
        let (seed, public) = pair();
        let on = Sealer::new(Some(&seed), &public, &[]).unwrap();
        let plain = b"{\"key\":\"k\"}";
        assert_eq!(on.open(Domain::Job, "s", plain, Speaker::Dispatcher), Err(SealError::Unsigned));
        let off = Sealer::off();
        assert_eq!(off.seal(Domain::Job, "s", plain), plain.to_vec());
        assert_eq!(off.open(Domain::Job, "s", plain, Speaker::Dispatcher), Ok(&plain[..]));
        assert_eq!(
            off.open(Domain::Job, "s", &on.seal(Domain::Job, "s", plain), Speaker::Worker("x")),
            Ok(&plain[..])
        );
    }

    #[test]
    fn key_files_must_be_private_seeds_and_each_side_needs_its_settings() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("worker.nk");
        let write = |text: &str, mode: u32| {
            std::fs::write(&file, text).unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        let ((seed, public), (_, d_pub)) = (pair(), pair());
        let defaults = crate::config::Config::load_with_env(None, std::iter::empty()).unwrap().remote;
        assert!(!Sealer::from_config(&defaults, Side::Worker).unwrap().is_on());
        let mut cfg = RemoteConfig {
            worker_key_file: file.display().to_string(),
            dispatcher_public_key: d_pub,
            trusted_workers: vec![format!("shell.* = {public}")],
            ..defaults
        };
        write(&format!("{seed}\n{public}\n"), 0o600);
        let s = Sealer::from_config(&cfg, Side::Worker).unwrap();
        assert_eq!(s.public_key(), Some(public.clone()));
        for (text, mode, says) in [
            (seed.as_str(), 0o644, "others than its owner"),
            ("not a seed", 0o600, "does not hold an nkey seed"),
        ] {
            write(text, mode);
            let e = Sealer::from_config(&cfg, Side::Worker).unwrap_err().to_string();
            assert!(e.contains("remote.worker_key_file") && e.contains(says), "{e}");
            assert!(!e.contains(&seed), "never the seed: {e}");
        }
        write(&seed, 0o600);
        // The dispatcher's side needs its own key file.
        let e = Sealer::from_config(&cfg, Side::Dispatcher).unwrap_err().to_string();
        assert!(e.contains("remote.dispatcher_key_file") && e.contains("is not set"), "{e}");
        cfg.trusted_workers = vec!["shell.* = not-a-key".into()];
        let e = Sealer::from_config(&cfg, Side::Worker).unwrap_err().to_string();
        assert!(e.contains("trusted_workers") && e.contains("not-a-key"), "{e}");
    }

    #[test]
    fn digests_name_the_content() {
        assert_eq!(
            digest(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
