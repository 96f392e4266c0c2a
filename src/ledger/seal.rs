//! What makes the ledger's chain keyed and its end sealed: toolslot's key, and the head of each
//! session's ledger, both kept apart from the ledger (and from the workspace).
//!
//! The key (`audit.key_file`: 32 random bytes as 64 hex digits, made on first use with mode 0600
//! in a folder of mode 0700) MACs every record: a record's `mac` is HMAC-SHA-256 under the key
//! of its canonical JSON without `mac`, which holds `prev`, the previous record's MAC. Whoever can
//! write the ledger but cannot read the key can therefore neither change, insert, append nor
//! recompute a record: a plain SHA-256 (or any MAC under another key) does not match.
//!
//! A MAC chain alone does not show that records were cut from its end: every prefix of a chain
//! is a chain. So each session's head (`<key's folder>/heads/<ledger's name>.json`: the session,
//! how many records its ledger holds, the last one's MAC, and whether the session closed) is
//! written and synced after every record (in place, `head.rs`); a ledger that ends before its
//! head, or an emptied or deleted one, is found by [`super::verify`].
//!
//! What neither protects against: whoever can read the key can forge any chain, and whoever can
//! write the heads can cut the tail back to a head of their choosing (one they copied, or one
//! they wrote from the MACs in the ledger). Keep the key's folder where the agent's user and the
//! programs the model runs cannot reach.

use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use hmac::{KeyInit, Mac};
use serde::{Deserialize, Serialize};

use super::LedgerError;
use crate::hex::hex;

/// HMAC-SHA-256, the ledger's MAC.
type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// How many random bytes a new key holds.
const KEY_BYTES: usize = 32;

/// What a key's id is the MAC of: an id names the key in records and heads, without revealing
/// it, so that a ledger checked under another key says so instead of "changed".
const KEY_ID_LABEL: &[u8] = b"toolslot ledger key id";

/// The folder of the heads, beside the key.
const HEADS_DIR: &str = "heads";

/// toolslot's ledger key.
#[derive(Clone)]
pub struct LedgerKey {
    hmac: HmacSha256,
    id: String,
}

impl std::fmt::Debug for LedgerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key itself.
        write!(f, "LedgerKey({})", self.id)
    }
}

impl LedgerKey {
    /// A key of these bytes.
    ///
    /// # Errors
    /// When there are none (HMAC takes a key of any other length).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        if bytes.is_empty() {
            return Err("an empty key".into());
        }
        let hmac = HmacSha256::new_from_slice(bytes).map_err(|e| e.to_string())?;
        let mut id = hmac.clone();
        id.update(KEY_ID_LABEL);
        let id = hex(&id.finalize().into_bytes()[..8]);
        Ok(Self { hmac, id })
    }

    /// The key's id: 16 hex digits of a MAC under it, the same for every use of the key.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The MAC (hex) of `message`.
    pub(crate) fn mac(&self, message: &[u8]) -> String {
        let mut mac = self.hmac.clone();
        mac.update(message);
        hex(&mac.finalize().into_bytes())
    }

    /// Whether `mac_hex` is the MAC of `message` (compared in constant time).
    pub(crate) fn holds(&self, message: &[u8], mac_hex: &str) -> bool {
        let Some(bytes) = unhex(mac_hex) else {
            return false;
        };
        let mut mac = self.hmac.clone();
        mac.update(message);
        mac.verify_slice(&bytes).is_ok()
    }
}

/// A session ledger's head: where its sealed end is, kept apart from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Head {
    /// The session.
    pub session: String,
    /// How many records its ledger holds.
    pub records: u64,
    /// The last record's MAC.
    pub mac: String,
    /// Whether a closing record was written (the session closed).
    pub closed: bool,
    /// The id of the key the records are MACed under.
    pub key_id: String,
}

/// toolslot's key and the folder of the heads: what the ledger is written and checked under.
#[derive(Debug, Clone)]
pub struct Seal {
    key: LedgerKey,
    key_file: PathBuf,
    heads: PathBuf,
}

impl Seal {
    /// The folder of the heads that go with the key `key_file`: `heads/` beside it.
    pub fn heads_dir(key_file: &Path) -> PathBuf {
        key_file.parent().unwrap_or_else(|| Path::new("")).join(HEADS_DIR)
    }

    /// The key `key_file` to write a ledger under, made (mode 0600, its folder 0700) when there
    /// is none yet. Neither the key nor the heads may lie inside any of `keep_out_of` (the
    /// ledger's folder, the workspace): whoever can write there must not reach them.
    ///
    /// # Errors
    /// [`LedgerError`] naming the key file when it lies inside one of `keep_out_of`, cannot be
    /// made or read, is not a key, or can be read by others than its owner.
    pub fn open_or_create(key_file: &Path, keep_out_of: &[&Path]) -> Result<Self, LedgerError> {
        let err = |reason: String| LedgerError {
            path: key_file.to_path_buf(),
            reason,
        };
        let heads = Self::heads_dir(key_file);
        for dir in keep_out_of {
            for (what, path) in [("the ledger key", key_file), ("the ledger heads", heads.as_path())] {
                if inside(path, dir) {
                    return Err(err(format!(
                        "{what} must not lie inside {} (audit.key_file): whoever can write there could forge the ledger",
                        dir.display()
                    )));
                }
            }
        }
        match std::fs::metadata(key_file) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => create_key(key_file).map_err(|e| err(format!("cannot make it: {e}")))?,
            Err(e) => return Err(err(e.to_string())),
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(key_file).map_err(|e| err(e.to_string()))?.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(err(format!(
                    "others than its owner may read it (mode {mode:04o}); `chmod 600` it, or better, make a new one"
                )));
            }
        }
        Self::open(key_file)
    }

    /// The key `key_file` to check a ledger under; never made.
    ///
    /// # Errors
    /// [`LedgerError`] when it cannot be read or is not a key.
    pub fn open(key_file: &Path) -> Result<Self, LedgerError> {
        let err = |reason: String| LedgerError {
            path: key_file.to_path_buf(),
            reason,
        };
        let text = std::fs::read_to_string(key_file).map_err(|e| err(e.to_string()))?;
        let bytes = unhex(&text.trim().to_ascii_lowercase())
            .filter(|b| b.len() == KEY_BYTES)
            .ok_or_else(|| err(format!("not a ledger key ({} hex digits)", KEY_BYTES * 2)))?;
        let key = LedgerKey::from_bytes(&bytes).map_err(err)?;
        Ok(Self {
            key,
            key_file: key_file.to_path_buf(),
            heads: Self::heads_dir(key_file),
        })
    }

    /// A seal of `key` with its heads in `heads` (tests).
    pub fn with_key(key: LedgerKey, heads: PathBuf) -> Self {
        Self {
            key,
            key_file: PathBuf::new(),
            heads,
        }
    }

    /// The key.
    pub fn key(&self) -> &LedgerKey {
        &self.key
    }

    /// The key's file.
    pub fn key_file(&self) -> &Path {
        &self.key_file
    }

    /// The folder of the heads.
    pub fn heads(&self) -> &Path {
        &self.heads
    }
}

/// Where the head of the ledger named `name` (its file's name without `.jsonl`) is kept.
pub fn head_path(heads: &Path, name: &str) -> PathBuf {
    heads.join(format!("{name}.json"))
}

/// The head of the ledger named `name`, if one was written.
///
/// # Errors
/// [`LedgerError`] naming the head when it exists but cannot be read or is not a head.
pub fn read_head(heads: &Path, name: &str) -> Result<Option<Head>, LedgerError> {
    let path = head_path(heads, name);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(LedgerError {
                path,
                reason: e.to_string(),
            });
        }
    };
    super::head::parse(text.as_bytes()).map(Some).map_err(|e| LedgerError {
        path,
        reason: format!("not a ledger head: {e}"),
    })
}

/// Makes a new key at `path`: written whole to a file of its own first, then linked into place,
/// so that two sessions making it at once both end up reading the one that won, never half of
/// one.
fn create_key(path: &Path) -> std::io::Result<()> {
    let dir = parent_of(path);
    create_private_dir(dir)?;
    let mut bytes = [0u8; KEY_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(format!("no randomness for a key: {e}")))?;
    let tmp = temp_beside(path);
    let written = (|| {
        let mut file = private_options().create_new(true).open(&tmp)?;
        file.write_all(format!("{}\n", hex(&bytes)).as_bytes())?;
        file.sync_all()?;
        match std::fs::hard_link(&tmp, path) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
            _ => Ok(()),
        }
    })();
    let _ = std::fs::remove_file(&tmp);
    written?;
    sync_dir(dir)
}

/// Writes `bytes` to `path` in `dir` atomically: a synced file of its own, renamed over it.
pub(crate) fn write_atomic(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    create_private_dir(dir)?;
    let tmp = temp_beside(path);
    let written = (|| {
        let mut file = private_options().create(true).truncate(true).open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    // The rename itself is on disk only once its folder is.
    sync_dir(dir)
}

/// A name beside `path` no other writer of this process or another uses.
fn temp_beside(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    parent_of(path).join(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Options for a file only its owner may read.
fn private_options() -> std::fs::OpenOptions {
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// Makes `dir` (and what is missing above it) readable by its owner only.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    std::fs::File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Whether `path` lies inside `dir` (or is it), both resolved as far as they exist.
fn inside(path: &Path, dir: &Path) -> bool {
    real(path).starts_with(real(dir))
}

/// `path` made absolute, `.` and `..` taken out, and its longest existing part resolved through
/// symlinks.
fn real(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut clean = PathBuf::new();
    for part in absolute.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                clean.pop();
            }
            other => clean.push(other),
        }
    }
    let mut rest = Vec::new();
    let mut existing = clean.as_path();
    loop {
        if let Ok(resolved) = existing.canonicalize() {
            let mut out = resolved;
            out.extend(rest.iter().rev());
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return clean,
        }
    }
}

/// The bytes of a hex string, if it is one.
/// Only lowercase digits, as [`hex`] writes them: one MAC has one spelling.
pub(crate) fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| text.get(i..i + 2).and_then(|pair| u8::from_str_radix(pair, 16).ok()))
        .collect()
}
