//! Writing a file of the workspace atomically through handles on its folders.
//!
//! `confine` resolves a path once; a command cleared to write and running meanwhile (in the
//! background, or a repository's own program) can swap a folder on the way for a link to
//! anywhere before the write happens. A write by path (`create_dir_all`, a temporary file,
//! `rename`) follows that link, as toolslot, outside every sandbox. Here the folder is reached
//! from the workspace one name at a time without following a link (`workspace::walk_down`),
//! and the temporary file is made, synced, given the old file's mode and renamed over the file
//! through that one handle (`openat`, `fchmod`, `renameat`), so a swap makes the write fail and
//! never lands it elsewhere; a failed write removes its temporary file from the same folder.

use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::FromRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::SystemTime;

use super::workspace::{Dir, swapped, walk_down};
use crate::paths::c_name;
use crate::tool::ToolError;

/// Writes `content` to `path` (a confined path inside `workspace`) through a temporary file in
/// the same folder and a rename, making missing folders on the way; the new modification time.
///
/// # Errors
/// An `invalid_input` error on `path` when a folder on the way changed into a link or a file
/// since the path was resolved; a `tool_error` naming the path when a step fails. Nothing is
/// left behind either way.
pub fn write_atomic_beneath(workspace: &Path, path: &Path, content: &[u8], shown: &str) -> Result<SystemTime, ToolError> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(ToolError::tool(format!("`{shown}` has no parent folder")));
    };
    let dir = walk_down(workspace, parent, true).map_err(|e| {
        swapped("path", shown, &e).unwrap_or_else(|| ToolError::tool(format!("cannot create the folder of `{shown}`: {e}")))
    })?;
    let mut tmp_name = b".".to_vec();
    tmp_name.extend_from_slice(name.as_bytes());
    tmp_name.extend_from_slice(format!(".toolslot-{}.tmp", crate::output::random_hex(6)).as_bytes());
    let tmp_name = OsStr::from_bytes(&tmp_name);
    let failed = |e: std::io::Error| swapped("path", shown, &e).unwrap_or_else(|| ToolError::tool(format!("cannot write `{shown}`: {e}")));
    let (tmp, name) = (c_name(tmp_name).map_err(failed)?, c_name(name).map_err(failed)?);
    // Made readable by its owner alone, and given its mode only once its content is written:
    // the new content of a file kept private is never readable by others on the way.
    // SAFETY: valid folder fd and NUL-terminated name; the fd returned (checked) is owned below.
    let fd = unsafe {
        libc::openat(
            dir.raw(),
            tmp.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600 as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(failed(std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    let written = (|| -> std::io::Result<SystemTime> {
        file.write_all(content)?;
        file.sync_all()?;
        // The old file's permissions (an executable script stays executable); a new file's,
        // what creating it would have given (0666 less the umask).
        let mode = regular_mode(&dir, &name).unwrap_or_else(|| 0o666 & !umask());
        // SAFETY: fchmod on a descriptor this function owns.
        if unsafe { libc::fchmod(std::os::fd::AsRawFd::as_raw_fd(&file), mode) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the same valid folder fd on both sides, NUL-terminated names.
        if unsafe { libc::renameat(dir.raw(), tmp.as_ptr(), dir.raw(), name.as_ptr()) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        file.metadata()?.modified()
    })();
    written.map_err(|e| {
        // SAFETY: valid folder fd and NUL-terminated name; only the temporary file is removed.
        unsafe {
            libc::unlinkat(dir.raw(), tmp.as_ptr(), 0);
        }
        failed(e)
    })
}

/// The process's umask, read where reading it changes nothing (`/proc/self/status`); the usual
/// 022 where it cannot be read (setting it to read it back would race other threads' creates).
fn umask() -> libc::mode_t {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| libc::mode_t::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// The permission bits of the regular file `name` in `dir`, when there is one.
fn regular_mode(dir: &Dir, name: &std::ffi::CStr) -> Option<libc::mode_t> {
    // SAFETY: zeroed `stat` is a valid out-parameter; fstatat fills it on success.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd, NUL-terminated name, valid pointer to `st`.
    let rc = unsafe { libc::fstatat(dir.raw(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    (rc == 0 && st.st_mode & libc::S_IFMT == libc::S_IFREG).then_some(st.st_mode & 0o7777)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// Swaps `a` and `b` (a folder and a link) back and forth until `stop`, as a program
    /// running beside the tools can (`renameat2` with `RENAME_EXCHANGE`).
    fn swapping(a: &Path, b: &Path, stop: Arc<AtomicBool>, swaps: Arc<AtomicUsize>) -> std::thread::JoinHandle<()> {
        let (a, b) = (c_name(a.as_os_str()).unwrap(), c_name(b.as_os_str()).unwrap());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: two NUL-terminated paths.
                let rc = unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE) };
                assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        })
    }

    #[test]
    fn a_folder_swapped_for_a_link_meanwhile_never_takes_a_write_or_a_read_elsewhere() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        // `d` is a folder when the path is resolved; a program keeps swapping it with a link
        // out of the workspace, and `x` (a folder holding a decoy) with a link to `secrets`.
        std::fs::create_dir(ws.join("d")).unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.join("alt")).unwrap();
        std::fs::create_dir_all(ws.join("secrets")).unwrap();
        std::fs::write(ws.join("secrets/key"), "SECRET").unwrap();
        std::fs::create_dir(ws.join("x")).unwrap();
        std::fs::write(ws.join("x/key"), "decoy").unwrap();
        std::os::unix::fs::symlink(ws.join("secrets"), ws.join("to-secrets")).unwrap();
        let (stop, swaps) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
        let swappers = [
            swapping(&ws.join("d"), &ws.join("alt"), Arc::clone(&stop), Arc::clone(&swaps)),
            swapping(&ws.join("x"), &ws.join("to-secrets"), Arc::clone(&stop), Arc::clone(&swaps)),
        ];
        let mut read = 0;
        // At least 1,500 tries, and on until the folders were swapped 1,000 times (a loaded
        // machine may give the swapping threads little time), within 20 s.
        let began = std::time::Instant::now();
        for i in 0.. {
            if (i >= 1500 && swaps.load(Ordering::Relaxed) >= 1000) || began.elapsed() > std::time::Duration::from_secs(20) {
                break;
            }
            let _ = write_atomic_beneath(&ws, &ws.join(format!("d/f{i}.txt")), b"x", "d/f.txt");
            if let Ok(file) = super::super::workspace::open_regular(&ws, &ws.join("x/key"), "path") {
                let bytes = super::super::workspace::read_bounded(file, 100).unwrap().unwrap();
                assert_eq!(bytes, b"decoy", "a read through a swapped folder reached another file");
                read += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        for s in swappers {
            s.join().unwrap();
        }
        let swaps = swaps.load(Ordering::Relaxed);
        assert!(swaps >= 1000, "the folders were swapped {swaps} times");
        assert!(read > 0, "some reads found the folder in place");
        let escaped: Vec<_> = std::fs::read_dir(outside.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(escaped.is_empty(), "written outside the workspace: {escaped:?}");
    }

    #[test]
    fn a_file_is_written_through_its_folders_never_through_a_link_put_on_the_way() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        // New folders are made; an existing file keeps its mode.
        let path = ws.join("a/b/new.sh");
        write_atomic_beneath(&ws, &path, b"one", "a/b/new.sh").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o751)).unwrap();
        write_atomic_beneath(&ws, &path, b"two", "a/b/new.sh").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777, 0o751);
        // A new file gets what creating it gives: 0666 less the umask.
        write_atomic_beneath(&ws, &ws.join("plain.txt"), b"x", "plain.txt").unwrap();
        std::fs::write(ws.join("made.txt"), b"x").unwrap();
        let mode = |p: &str| std::fs::metadata(ws.join(p)).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode("plain.txt"), mode("made.txt"));
        // `d` resolved as a folder, then swapped for a link out: the write is refused and
        // nothing lands outside, not even the temporary file.
        let d = ws.join("d");
        std::fs::create_dir(&d).unwrap();
        let target = d.join("x.txt");
        std::fs::remove_dir(&d).unwrap();
        std::os::unix::fs::symlink(outside.path(), &d).unwrap();
        let e = write_atomic_beneath(&ws, &target, b"evil", "d/x.txt").unwrap_err();
        assert!(e.message.contains("changed while it was opened"), "{}", e.message);
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        // A path not inside the workspace at all is refused as such.
        assert!(write_atomic_beneath(&ws, &outside.path().join("y"), b"x", "y").is_err());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}
