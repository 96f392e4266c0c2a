//! Opening a file that must be a regular one, without waiting on anything that is not.
//!
//! Paths toolslot reads on its own account (a git pointer, a program it compares with a denied
//! one, a checkout's policy file) may lie in a checkout nobody vetted, and a process running
//! there can swap a file between the check and the open. A plain `open` of a FIFO waits for a
//! writer, and one of `/dev/stdin` reads toolslot's own input: so the open never blocks, and
//! what it opened is checked to be a regular file before a byte is read.

use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Whether the last component of a path may be a symlink that is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastLink {
    /// Followed, as a plain `open` does.
    Follow,
    /// Refused (`ELOOP`): the path must name the file itself.
    Refuse,
}

/// `path` opened for reading, when it is a regular file.
///
/// # Errors
/// The system's error; [`io::ErrorKind::InvalidInput`] ("not a regular file") for a folder, a
/// FIFO, a device or a socket.
pub fn open(path: &Path, last_link: LastLink) -> io::Result<File> {
    let no_follow = match last_link {
        LastLink::Follow => 0,
        LastLink::Refuse => libc::O_NOFOLLOW,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | no_follow)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
    }
    Ok(file)
}

/// At most `max` bytes of `file`: `None` when it holds more (whatever its size claims; a
/// file that grows while read is cut off at `max + 1` bytes all the same).
///
/// # Errors
/// The read's IO error.
pub fn read_bounded(file: File, max: u64) -> io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= max).then_some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_open_and_nothing_waits() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);

        assert!(open(&file, LastLink::Refuse).is_ok());
        assert!(open(&link, LastLink::Follow).is_ok());
        assert_eq!(open(&link, LastLink::Refuse).unwrap_err().raw_os_error(), Some(libc::ELOOP));
        // A FIFO with no writer: a blocking open would never return.
        for path in [fifo.as_path(), dir.path(), Path::new("/dev/null")] {
            let e = open(path, LastLink::Follow).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{}: {e}", path.display());
        }
    }
}
