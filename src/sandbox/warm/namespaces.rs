//! Finding a made sandbox's namespaces and init: what bubblewrap says on its info
//! descriptor, and the user namespaces between toolslot's and the sandbox's.

use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// The user namespaces between toolslot's and the sandbox's init's, outermost first (none when
/// they are the same: bubblewrap run by root makes none).
pub(super) fn user_namespaces(init: i32) -> io::Result<Vec<OwnedFd>> {
    use std::os::unix::fs::MetadataExt;
    let ours = std::fs::metadata("/proc/self/ns/user")?;
    let is_ours = |fd: &OwnedFd| {
        std::fs::File::from(fd.try_clone()?)
            .metadata()
            .map(|m| m.dev() == ours.dev() && m.ino() == ours.ino())
    };
    let theirs = PathBuf::from(format!("/proc/{init}/ns/user"));
    let mut fd = OwnedFd::from(std::fs::File::open(&theirs).map_err(|e| io::Error::other(format!("{}: {e}", theirs.display())))?);
    let mut chain = Vec::new();
    // A sandbox nests a few deep at most; the bound keeps a loop from being endless.
    for _ in 0..8 {
        if is_ours(&fd)? {
            chain.reverse();
            return Ok(chain);
        }
        // NS_GET_PARENT: _IO(0xb7, 0x2).
        // SAFETY: an ioctl on a namespace descriptor this function owns; it returns a new one.
        let parent = unsafe { libc::ioctl(fd.as_raw_fd(), 0xb702 as _) };
        if parent < 0 {
            return Err(io::Error::other(format!(
                "the sandbox's user namespace: {}",
                io::Error::last_os_error()
            )));
        }
        chain.push(fd);
        // SAFETY: the ioctl just returned this descriptor, owned by nothing else.
        fd = unsafe { OwnedFd::from_raw_fd(parent) };
    }
    Err(io::Error::other("the sandbox's user namespace is nested too deep"))
}

/// The `child-pid` bubblewrap writes to its info descriptor (`{"child-pid": N, …}`).
pub(super) fn read_child_pid(from: OwnedFd) -> io::Result<i32> {
    let mut file = std::fs::File::from(from);
    let mut text = Vec::new();
    let mut byte = [0u8; 256];
    // Up to the closing brace: the descriptor may stay open in the sandbox.
    while !text.contains(&b'}') {
        let n = file.read(&mut byte)?;
        if n == 0 {
            break;
        }
        text.extend_from_slice(&byte[..n]);
    }
    let info: serde_json::Value = serde_json::from_slice(&text).map_err(|e| io::Error::other(e.to_string()))?;
    info.get("child-pid")
        .and_then(serde_json::Value::as_i64)
        .and_then(|p| i32::try_from(p).ok())
        .filter(|p| *p > 0)
        .ok_or_else(|| io::Error::other("no child-pid"))
}

pub(super) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just made and are owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

pub(super) fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}
