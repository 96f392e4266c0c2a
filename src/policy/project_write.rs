//! Writing a workspace's own policy file (`.toolslot/policy.toml`) through a handle on its
//! folder, never by path.
//!
//! The folder lies in a checkout, where a program cleared to write may run while toolslot
//! writes (an approval made for the project meanwhile, or the file put back when the program
//! ends). Checking that `.toolslot` is no link and then writing by path leaves a window in
//! which the program swaps the folder for a link to `~/.toolslot`: the rule would land in the
//! user's own policy, which every workspace applies untrusted. So the folder is opened once,
//! refusing a link (`O_NOFOLLOW`), and the file is made, renamed and removed relative to that
//! handle: whatever the path names later, the write goes to the folder that was checked.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::paths::c_name;

/// Name of the policy file inside [`PolicyFolder`].
const FILE_NAME: &str = "policy.toml";

/// A workspace's `.toolslot` folder, held open.
#[derive(Debug)]
pub struct PolicyFolder(OwnedFd);

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(rc) }
}

/// The mode (type and permission bits) of `name` in the folder `dir`, the entry itself (a
/// link is not followed).
fn mode_at(dir: libc::c_int, name: &CString) -> Option<libc::mode_t> {
    // SAFETY: zeroed `stat` is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd, NUL-terminated name, valid pointer.
    let rc = unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    (rc == 0).then_some(st.st_mode)
}

impl PolicyFolder {
    /// `workspace`'s `.toolslot` folder, made (mode 0755) when `make` and it is missing.
    ///
    /// # Errors
    /// The folder is a link or not a folder (named in the message), or the system's error.
    pub fn open(workspace: &Path, make: bool) -> io::Result<Self> {
        let ws = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(workspace)?;
        let name = c_name(".toolslot")?;
        if make {
            // SAFETY: a valid directory fd and a NUL-terminated name.
            let made = unsafe { libc::mkdirat(ws.as_raw_fd(), name.as_ptr(), 0o755) };
            if made < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::AlreadyExists {
                    return Err(e);
                }
            }
        }
        // SAFETY: a valid directory fd and a NUL-terminated name; the fd returned (checked) is
        // owned from here on.
        let fd = check(unsafe {
            libc::openat(
                ws.as_raw_fd(),
                name.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        })
        .map_err(|e| match e.raw_os_error() {
            // A link gives either, as `O_DIRECTORY` and `O_NOFOLLOW` meet it.
            Some(libc::ELOOP | libc::ENOTDIR) if mode_at(ws.as_raw_fd(), &name).is_some_and(|m| m & libc::S_IFMT == libc::S_IFLNK) => {
                io::Error::other("its folder `.toolslot` is a link, not a folder of the workspace's own")
            }
            Some(libc::ENOTDIR) => io::Error::other("`.toolslot` is not a folder"),
            _ => e,
        })?;
        // SAFETY: `fd` is fresh and nobody else owns it.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    fn fd(&self) -> libc::c_int {
        self.0.as_raw_fd()
    }

    /// The mode of the policy file when it is a regular file.
    fn file_mode(&self) -> Option<libc::mode_t> {
        let mode = mode_at(self.fd(), &c_name(FILE_NAME).ok()?)?;
        (mode & libc::S_IFMT == libc::S_IFREG).then_some(mode & 0o7777)
    }

    /// Replaces the policy file with `bytes` whole: a file beside it, synced, renamed over it
    /// (a link in its place is replaced, not followed), the folder synced. Its permission bits
    /// are `mode`, else those of the regular file in its place, else `0644`.
    ///
    /// # Errors
    /// The system's error (`EISDIR` for a folder in its place); nothing is left half-written.
    pub fn replace(&self, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
        let mode = mode.unwrap_or_else(|| self.file_mode().unwrap_or(0o644)) & 0o777;
        // Unique to this process and write; `O_EXCL` refuses anything already there.
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp_name = format!(".{FILE_NAME}.toolslot-{}-{n}.tmp", std::process::id());
        let tmp = c_name(&tmp_name)?;
        // SAFETY: valid fd, NUL-terminated name; the fd returned (checked) is owned below.
        let fd = check(unsafe {
            libc::openat(
                self.fd(),
                tmp.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                libc::c_uint::from(mode),
            )
        })?;
        // SAFETY: `fd` is fresh and nobody else owns it.
        let mut file = unsafe { File::from_raw_fd(fd) };
        let written = (|| {
            file.write_all(bytes)?;
            // The mode asked at creation is cut by the umask; the old file's is kept whole.
            // SAFETY: a valid fd.
            check(unsafe { libc::fchmod(file.as_raw_fd(), mode) })?;
            file.sync_all()?;
            let name = c_name(FILE_NAME)?;
            // SAFETY: valid fds and NUL-terminated names.
            check(unsafe { libc::renameat(self.fd(), tmp.as_ptr(), self.fd(), name.as_ptr()) })?;
            // SAFETY: a valid fd.
            check(unsafe { libc::fsync(self.fd()) }).map(drop)
        })();
        if written.is_err() {
            // SAFETY: valid fd and NUL-terminated name.
            unsafe { libc::unlinkat(self.fd(), tmp.as_ptr(), 0) };
        }
        written
    }

    /// Removes whatever stands at the policy file's place: a file or a link (not what it leads
    /// to), or a folder with all it holds. Returns whether it was a folder.
    ///
    /// # Errors
    /// The system's error (`NotFound` for nothing there).
    pub fn remove_file(&self) -> io::Result<bool> {
        let name = c_name(FILE_NAME)?;
        // SAFETY: valid fd and NUL-terminated name.
        match check(unsafe { libc::unlinkat(self.fd(), name.as_ptr(), 0) }) {
            Ok(_) => Ok(false),
            Err(e) if e.raw_os_error() == Some(libc::EISDIR) => {
                // Through the held folder's own entry in /proc, so a link swapped in for
                // `.toolslot` meanwhile is not followed; std's removal follows no link below.
                std::fs::remove_dir_all(format!("/proc/self/fd/{}/{FILE_NAME}", self.fd()))?;
                Ok(true)
            }
            Err(e) => Err(e),
        }
    }
}

/// Writes `bytes` as `workspace`'s policy file, making `.toolslot` when missing, refusing one
/// that is a link or no folder.
///
/// # Errors
/// Why it was not written, in words.
pub fn write_project_file(workspace: &Path, bytes: &[u8]) -> Result<(), String> {
    PolicyFolder::open(workspace, true)
        .and_then(|folder| folder.replace(bytes, None))
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_file_is_written_into_the_folder_checked_never_through_a_link() {
        let ws = tempfile::tempdir().unwrap();
        write_project_file(ws.path(), b"# one\n").unwrap();
        let file = ws.path().join(".toolslot/policy.toml");
        assert_eq!(std::fs::read(&file).unwrap(), b"# one\n");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_project_file(ws.path(), b"# two\n").unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"# two\n");
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
        // No file beside it is left over.
        assert_eq!(std::fs::read_dir(ws.path().join(".toolslot")).unwrap().count(), 1);

        // The folder a link to the user's own: refused, and nothing lands there.
        let users = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(users.path(), ws.path().join(".toolslot")).unwrap();
        let err = write_project_file(ws.path(), b"allow everything\n").unwrap_err();
        assert!(err.contains("is a link"), "{err}");
        assert_eq!(std::fs::read_dir(users.path()).unwrap().count(), 0);

        // The folder swapped for a link after it was opened: the write still goes to the
        // folder that was opened (moved away here), not through the link.
        let ws = tempfile::tempdir().unwrap();
        let folder = PolicyFolder::open(ws.path(), true).unwrap();
        std::fs::rename(ws.path().join(".toolslot"), ws.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(users.path(), ws.path().join(".toolslot")).unwrap();
        folder.replace(b"# late\n", None).unwrap();
        assert_eq!(std::fs::read_dir(users.path()).unwrap().count(), 0);
        let moved = ws.path().join("moved/policy.toml");
        assert_eq!(std::fs::read(&moved).unwrap(), b"# late\n");
        // A mode asked for wins over the file's (a file put back is not left as a program
        // made it).
        std::fs::set_permissions(&moved, std::fs::Permissions::from_mode(0o000)).unwrap();
        folder.replace(b"# back\n", Some(0o640)).unwrap();
        assert_eq!(std::fs::metadata(&moved).unwrap().permissions().mode() & 0o777, 0o640);

        // A link in the file's place is replaced, and what it led to is left.
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join(".toolslot")).unwrap();
        let theirs = users.path().join("policy.toml");
        std::fs::write(&theirs, "# the user's\n").unwrap();
        std::os::unix::fs::symlink(&theirs, ws.path().join(".toolslot/policy.toml")).unwrap();
        write_project_file(ws.path(), b"# own\n").unwrap();
        assert_eq!(std::fs::read(&theirs).unwrap(), b"# the user's\n");
        assert!(!ws.path().join(".toolslot/policy.toml").is_symlink());
        let folder = PolicyFolder::open(ws.path(), false).unwrap();
        assert!(!folder.remove_file().unwrap());
        assert!(!ws.path().join(".toolslot/policy.toml").exists());
        // A folder in the file's place goes whole, through the folder held.
        std::fs::create_dir_all(ws.path().join(".toolslot/policy.toml/deep")).unwrap();
        std::fs::write(ws.path().join(".toolslot/policy.toml/deep/x"), "x").unwrap();
        std::fs::rename(ws.path().join(".toolslot"), ws.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(users.path(), ws.path().join(".toolslot")).unwrap();
        assert!(folder.remove_file().unwrap());
        assert!(!ws.path().join("moved/policy.toml").exists());
        assert_eq!(std::fs::read(&theirs).unwrap(), b"# the user's\n");

        // A file where the folder should be.
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join(".toolslot"), "").unwrap();
        assert!(write_project_file(ws.path(), b"x").unwrap_err().contains("not a folder"));
    }
}
