//! bubblewrap: the program runs in its own mount, process, IPC and (unless cleared for the
//! network) network namespaces, with every capability dropped.
//!
//! Its process namespace is why it comes first: toolslot's processes (and their `environ`) are
//! not there to read or signal, and when the command's first process ends, or toolslot dies
//! (`--die-with-parent`), the kernel ends every process the command started.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{Grant, View};

/// What a command cleared to write may change besides the workspace, and what stays as it is.
pub(super) struct Writes<'a> {
    /// Folders writable besides the workspace (`shell.writable_paths`).
    pub writable: &'a [PathBuf],
    /// The project's policy folder, kept read-only (and whether it exists).
    pub protected: Option<(&'a Path, bool)>,
    /// Writable folders on the way to a masked path ([`super::mask::pins`]).
    pub pinned: &'a [PathBuf],
}

/// The options that wrap a command (the program and its arguments follow `--`).
pub(super) fn args(
    workspace: &Path,
    grant: Grant,
    view: View,
    writes: &Writes<'_>,
    confined: &[PathBuf],
    own: &[PathBuf],
) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |parts: &[&dyn AsRef<std::ffi::OsStr>]| {
        for p in parts {
            a.push(p.as_ref().to_os_string());
        }
    };
    push(&[
        &"--die-with-parent",
        // A new session: the command cannot push keystrokes into the host's terminal (TIOCSTI).
        &"--new-session",
        &"--unshare-pid",
        &"--unshare-ipc",
        &"--unshare-uts",
        &"--unshare-cgroup-try",
        // Run as root, bubblewrap would keep every capability, and CAP_SYS_ADMIN remounts a
        // read-only bind read-write: drop them all, whoever runs toolslot.
        &"--cap-drop",
        &"ALL",
    ]);
    if !grant.network {
        push(&[&"--unshare-net"]);
    }
    match view {
        View::Full => {
            push(&[&"--ro-bind", &"/", &"/", &"--dev", &"/dev", &"--proc", &"/proc"]);
            if grant.write {
                push(&[&"--tmpfs", &"/tmp", &"--tmpfs", &"/dev/shm"]);
                // The private /tmp must not hide the program's own files (a script kept under
                // the temp folder, a checkout there): they come back, read-only.
                for path in own {
                    push(&[&"--ro-bind-try", path, path]);
                }
            }
        }
        View::Confined => {
            for dir in confined {
                match std::fs::read_link(dir) {
                    // `/bin -> usr/bin` on a merged /usr: the same link inside.
                    Ok(target) => push(&[&"--symlink", &target, dir]),
                    Err(_) if dir.is_dir() => push(&[&"--ro-bind", dir, dir]),
                    Err(_) => {}
                }
            }
            push(&[&"--dev", &"/dev", &"--proc", &"/proc"]);
        }
    }
    if grant.write {
        push(&[&"--bind", &workspace, &workspace]);
        for w in writes.writable {
            push(&[&"--bind-try", w, w]);
        }
        // Each a mount point of its own, which no rename or removal moves (`EBUSY`): a folder
        // holding a masked path, renamed, would give the file tools, which judge paths by
        // their names, the hidden file under a name no rule names. Before the policy folder's
        // read-only bind, which must cover a pin of its own.
        for p in writes.pinned {
            push(&[&"--bind", p, p]);
        }
        // The project's policy folder stays read-only inside the writable workspace; where
        // there is none, an empty read-only one stands in its place so that none can be made.
        match writes.protected {
            Some((folder, true)) => push(&[&"--ro-bind", &folder, &folder]),
            Some((folder, false)) => push(&[&"--tmpfs", &folder, &"--remount-ro", &folder]),
            None => {}
        }
    } else {
        push(&[&"--ro-bind", &workspace, &workspace]);
    }
    if view == View::Confined {
        // The root bubblewrap builds is a tmpfs: make it read-only too, so nothing at all is
        // writable in a confined view.
        push(&[&"--remount-ro", &"/"]);
    }
    push(&[&"--chdir", &workspace]);
    a
}

/// The `bwrap` in an absolute folder of the host's PATH, if running it with the namespaces the
/// sandbox uses works.
pub(super) fn find_working() -> Option<PathBuf> {
    // Absolute folders only, and none inside the folder toolslot runs in: a relative one, or
    // an activated virtual environment's `bin` in the checkout, would let the checkout supply
    // the sandbox itself.
    // (Started in `/`, as desktop clients start their servers, every folder is inside it.)
    let here = std::env::current_dir()
        .ok()
        .and_then(|d| d.canonicalize().ok())
        .filter(|d| d.parent().is_some());
    let bwrap = crate::child_env::host_path_dirs()
        .into_iter()
        .filter(|d| match (&here, d.canonicalize()) {
            (Some(here), Ok(real)) => !real.starts_with(here),
            _ => true,
        })
        .map(|d| d.join("bwrap"))
        .find(|p| p.is_file())?;
    let probe = std::process::Command::new(&bwrap)
        .args([
            "--die-with-parent",
            "--unshare-pid",
            "--unshare-net",
            "--cap-drop",
            "ALL",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--",
            "true",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    match probe {
        Ok(s) if s.success() => Some(bwrap),
        other => {
            tracing::info!(bwrap = %bwrap.display(), ?other, "bubblewrap is installed but cannot create its namespaces here");
            None
        }
    }
}
