//! The project's policy folder (`.toolslot` in the workspace) stays as it was, whatever a
//! program cleared to write the workspace does.
//!
//! bubblewrap binds it read-only over the writable workspace (or, when there is none, an empty
//! read-only folder in its place, so none can be made). Landlock cannot take a folder out of a
//! writable one, and no sandbox at all protects nothing, so for every backend the policy file is
//! also read before the program starts and put back as it was when it ends
//! ([`Protected`]'s drop): a change survives only while the program runs.
//!
//! Calls cleared to write one workspace at once, in this process or another, share the folder
//! bubblewrap made as their mount point. Removing a mount point on the host detaches its mounts
//! in every sandbox (Linux 3.18 and later), so the call that ended first would take the stand-in
//! away from those still running (and bubblewrap, between making and sealing it, fails). Each
//! call therefore holds a shared `flock` on the workspace folder itself from before it looks at
//! the policy folder until its program has ended, and a folder no one had before is removed only
//! by a call that then gets the lock alone: the last one out. The workspace folder is the lock
//! because every process that can reach the workspace can open it, and it leaves nothing behind.

use std::collections::HashMap;
use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::PolicyConfig;
use crate::policy::trust::{self, TrustState, TrustStore};
use crate::policy::{PROJECT_FILE, PolicyFolder, read_project_file};

/// What toolslot itself last wrote to each project's policy file in this process (an approval
/// for the project), numbered in the order written: a program that ends puts back what toolslot
/// wrote while it ran, not what was there before, or a rule the user approved meanwhile would
/// silently be undone.
static OWN_WRITES: Mutex<OwnWrites> = Mutex::new(OwnWrites { count: 0, last: None });

/// See [`OWN_WRITES`].
struct OwnWrites {
    /// Writes made so far, to any policy file.
    count: u64,
    /// Per policy file, the number of the last write to it and its bytes.
    last: Option<HashMap<PathBuf, (u64, Vec<u8>)>>,
}

/// Tells the programs running in `workspace` that toolslot wrote `bytes` to its policy file, so
/// that their end keeps them. Call it right after the write.
pub fn written_by_toolslot(workspace: &Path, bytes: &[u8]) {
    let file = policy_file(workspace);
    let mut own = OWN_WRITES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    own.count += 1;
    let number = own.count;
    own.last.get_or_insert_with(HashMap::new).insert(file, (number, bytes.to_vec()));
}

/// `workspace`'s policy file, named as [`Protected`] names it (the workspace resolved).
fn policy_file(workspace: &Path) -> PathBuf {
    workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf())
        .join(PROJECT_FILE)
}

/// How many writes toolslot has made to policy files so far.
fn own_writes_count() -> u64 {
    OWN_WRITES.lock().unwrap_or_else(std::sync::PoisonError::into_inner).count
}

/// What toolslot last wrote to `file`, if it wrote it after its write number `since`.
fn own_write_since(file: &Path, since: u64) -> Option<Vec<u8>> {
    let own = OWN_WRITES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    own.last.as_ref()?.get(file).filter(|(n, _)| *n > since).map(|(_, b)| b.clone())
}

/// The project's policy file and its folder, as they were before a program ran.
#[derive(Debug)]
pub struct Protected {
    file: PathBuf,
    /// Its bytes (`None`: there was none); `Err`: it could not be read as the workspace's own
    /// (a link out, not a regular file, too large), so nothing is put back over it.
    before: Result<Option<Vec<u8>>, String>,
    /// Its permission bits then, which a file put back gets (not whatever mode the program
    /// gave it: `000` would leave the workspace's policy unreadable).
    before_mode: u32,
    /// The most of it read (`policy.project_file_max_bytes`).
    max_bytes: u64,
    /// toolslot's own writes counted before `before` was read.
    own_writes_seen: u64,
    /// The trust store whose trusted bytes are kept.
    trust_store: Option<PathBuf>,
    folder: PathBuf,
    /// Whether the folder was not there before the calls that have it now began: the last of
    /// them removes it.
    made_for_calls: bool,
    /// Whether the folder held anything: an empty one may be another call's mount point, so it
    /// is never bound itself (a read-only stand-in is mounted).
    folder_filled: bool,
    /// The workspace folder, locked shared until the program has ended.
    lock: Option<File>,
}

/// Another program held the workspace locked alone for longer than the call may wait.
#[derive(Debug, thiserror::Error)]
#[error(
    "the workspace {path} stayed locked (flock) by another program for {waited_ms} ms (shell.policy_lock_wait_ms), so its policy folder could not be kept read-only; nothing ran"
)]
pub struct Locked {
    /// The workspace.
    pub path: PathBuf,
    /// How long the call waited.
    pub waited_ms: u64,
}

impl Protected {
    /// Locks `workspace` shared and reads what must be put back: its policy file, and whether its
    /// folder exists. With `policy`, a policy file its trust store trusts is kept as it is.
    ///
    /// # Errors
    /// [`Locked`] when another program held the workspace locked alone for `wait` (toolslot's
    /// own calls hold it so only while they remove an empty folder).
    pub fn snapshot(workspace: &Path, wait: Duration, policy: Option<&PolicyConfig>) -> Result<Self, Locked> {
        /// What this call saw of the other calls cleared to write the workspace.
        enum Seen {
            /// None runs: the folder, as it is now, is what the user left.
            Alone { absent: bool },
            /// Some run: an empty folder is one of theirs (a mount point, or one a program made
            /// and its call has not removed yet), not one the user made.
            AmongOthers,
            /// The lock could not be had: the folder is never removed, left behind empty rather
            /// than pulled from under another call.
            Unlocked,
        }
        let file = policy_file(workspace);
        let folder = file.parent().map(Path::to_path_buf).unwrap_or_else(|| workspace.to_path_buf());
        // A workspace that cannot be opened or locked: no read permission, a file system
        // without flock.
        let mut lock = File::open(workspace).ok();
        let seen = match lock.as_ref().map(File::try_lock) {
            Some(Ok(())) => {
                let absent = !folder.is_dir();
                // Converting keeps the folder as seen: a call that removes one needs the lock
                // alone, which this shared lock now denies.
                match lock.as_ref().map(File::lock_shared) {
                    Some(Ok(())) => Seen::Alone { absent },
                    _ => Seen::Unlocked,
                }
            }
            Some(Err(TryLockError::WouldBlock)) => match lock.as_ref().map(|l| lock_shared_within(l, wait)) {
                Some(Ok(true)) => Seen::AmongOthers,
                Some(Ok(false)) => {
                    return Err(Locked {
                        path: workspace.to_path_buf(),
                        waited_ms: wait.as_millis() as u64,
                    });
                }
                _ => Seen::Unlocked,
            },
            Some(Err(TryLockError::Error(_))) | None => Seen::Unlocked,
        };
        let folder_filled = std::fs::read_dir(&folder).is_ok_and(|mut entries| entries.next().is_some());
        let made_for_calls = match seen {
            Seen::Alone { absent } => absent,
            Seen::AmongOthers => !folder_filled,
            Seen::Unlocked => {
                lock = None;
                false
            }
        };
        let own_writes_seen = own_writes_count();
        // Without the session's settings (a program granted nothing), no cap: nothing it runs
        // may write the workspace anyway.
        let max_bytes = policy.map_or(u64::MAX, |p| p.project_file_max_bytes);
        let before_mode = std::fs::symlink_metadata(&file)
            .ok()
            .filter(std::fs::Metadata::is_file)
            .map_or(0o644, |m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777);
        Ok(Self {
            before: read_project_file(folder.parent().unwrap_or(&folder), max_bytes),
            before_mode,
            max_bytes,
            own_writes_seen,
            trust_store: policy.and_then(|p| trust::store_path(p, Some(workspace)).ok()),
            folder_filled,
            made_for_calls,
            file,
            folder,
            lock,
        })
    }

    /// The workspace, resolved: the policy folder's parent.
    fn workspace(&self) -> &Path {
        self.folder.parent().unwrap_or(&self.folder)
    }

    /// The folder bubblewrap keeps read-only, and whether to bind it as it is: a folder with
    /// something in it is bound; where there is none, or an empty one, an empty read-only folder
    /// is mounted in its place while the program runs (bubblewrap makes the mount point).
    pub fn folder(&self) -> (&Path, bool) {
        (&self.folder, self.folder_filled)
    }
}

impl Protected {
    /// Whether the trust store holds `bytes` as the content of this workspace's policy file.
    fn trusted(&self, bytes: Option<&[u8]>) -> bool {
        let (Some(store), Some(bytes)) = (&self.trust_store, bytes) else {
            return false;
        };
        let Ok(key) = trust::trust_key(self.workspace()) else {
            return false;
        };
        TrustStore::read(store).is_ok_and(|s| s.state(&key, &trust::sha256_hex(bytes)) == TrustState::Trusted)
    }
}

/// Takes `lock` shared, waiting up to `wait` for a holder of it alone: `Ok(false)` when the
/// wait ran out, `Err` when the file system refuses locks.
fn lock_shared_within(lock: &File, wait: Duration) -> std::io::Result<bool> {
    let start = Instant::now();
    let mut pause = Duration::from_micros(100);
    loop {
        match lock.try_lock_shared() {
            Ok(()) => return Ok(true),
            Err(TryLockError::WouldBlock) if start.elapsed() < wait => {
                // Toolslot's own holders let go within microseconds; a foreign one may not.
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(10));
            }
            Err(TryLockError::WouldBlock) => return Ok(false),
            Err(TryLockError::Error(e)) => return Err(e),
        }
    }
}

impl Drop for Protected {
    fn drop(&mut self) {
        let before = self.before.as_ref().ok().cloned();
        let want = own_write_since(&self.file, self.own_writes_seen).or(before.clone().flatten());
        // A file in place now that is not the workspace's own readable file (a link out, a
        // FIFO) is a change too.
        let now = read_project_file(self.workspace(), self.max_bytes);
        let changed = now.as_ref().map_or(true, |now| *now != want);
        // Bytes the user trusts are the user's: toolslot in another process wrote them for an
        // approval, or the user trusted them (`toolslot trust`); a program cannot forge trust.
        let trusted = now.as_ref().is_ok_and(|now| self.trusted(now.as_deref()));
        // What could not be read before cannot be put back: it is left as the program left it.
        if before.is_some() && changed && !trusted {
            tracing::warn!(file = %self.file.display(), "a sandboxed program changed the project's policy file; it is put back");
            match &want {
                Some(bytes) => {
                    // Whatever now stands at the folder's place (a file, a link) goes first.
                    if !self.folder.is_dir() || self.folder.is_symlink() {
                        let _ = std::fs::remove_file(&self.folder);
                    }
                    // Through a handle on the folder, so a process of the program still running
                    // cannot have it written through a link swapped in meanwhile.
                    if let Ok(folder) = PolicyFolder::open(self.workspace(), true)
                        && let Err(e) = folder.replace(bytes, Some(self.before_mode))
                        && e.raw_os_error() == Some(libc::EISDIR)
                        && folder.remove_file().is_ok()
                    {
                        // A folder stood in the file's place: gone now, so the file fits.
                        let _ = folder.replace(bytes, Some(self.before_mode));
                    }
                }
                // A folder the program replaced by a link goes itself: removing the file
                // beneath it would delete whatever policy file the link leads to (the user's own).
                None if self.folder.is_symlink() => {
                    let _ = std::fs::remove_file(&self.folder);
                }
                None => {
                    if let Ok(folder) = PolicyFolder::open(self.workspace(), false)
                        && folder.remove_file().unwrap_or(false)
                    {
                        tracing::warn!(file = %self.file.display(), "a folder in the policy file's place was removed");
                    }
                }
            }
        }
        if let Some(lock) = self.lock.take()
            && self.made_for_calls
        {
            // The empty folder bubblewrap made as a mount point, or one the program made: removed
            // only while no other call holds the lock (has it mounted); else the last one does.
            let _ = lock.unlock();
            if lock.try_lock().is_ok() {
                let _ = std::fs::remove_dir(&self.folder);
            }
        }
    }
}
