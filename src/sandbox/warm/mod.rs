//! A bubblewrap sandbox made once per session and view, that each command of the session
//! enters instead of starting bubblewrap again.
//!
//! Starting bubblewrap costs far more than the command it wraps (a second program, and each
//! namespace created anew: BENCHMARKS.md, "Shell judgement and the OS sandbox"). Here the
//! sandbox is made once: bubblewrap with the options a per-call sandbox would get, running a
//! placeholder (`cat` on a pipe toolslot holds, so the sandbox ends with toolslot whatever
//! thread made it). A command enters it between fork and exec ([`enter`]): `setns` into its
//! namespaces (user where it has one, IPC, UTS, network, cgroup, process, mount), then starts
//! the command as its own child, since a process namespace takes only the children of whoever
//! enters it (a clone that shares its memory until the exec, as `posix_spawn` makes one). The
//! entering process waits for the command, kills what is left of the command's process group,
//! and exits with the command's status (128 + the signal for a command killed by one, as
//! bubblewrap reports it); the command drops every capability, and dies with that process.
//!
//! What bubblewrap's per-call sandbox guaranteed and how it is kept:
//! - the same view, network and masks: the placeholder is made with the same options, and a
//!   sandbox is reused only for the same options (the workspace's and the masked paths'
//!   identities included, so a path replaced since is masked again);
//! - toolslot's processes out of sight and out of reach: the command is in the sandbox's
//!   process namespace and mount namespace (its `/proc`);
//! - everything a command started ends with it: after each command the sandbox's process
//!   namespace is counted, and one that holds anything but bubblewrap's init and the
//!   placeholder is killed whole (the kernel ends every process in it) and made anew for the
//!   next command; a sandbox is lent to one command at a time;
//! - no capabilities: the command drops its bounding set and every capability set before it
//!   runs, and cannot gain one (no new privileges).
//!
//! Used for programs cleared neither to write nor to reach the network: most of a session's
//! commands (those judged read-only, in the confined view) and read-only extension calls (in
//! the full view). There is nothing such a program can leave in the sandbox for the next one
//! but processes, which are counted, and files in the sandbox's own `/dev`, which only the same
//! session's programs of the same view see. Programs cleared to write keep a fresh sandbox
//! each (their private `/tmp` must start empty), and so do background tasks.

mod enter;
mod namespaces;

use std::ffi::OsString;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;

use enter::{Prepared, enter_child};
use namespaces::{pipe, read_child_pid, same_file, user_namespaces};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// What a sandbox is reused for: the same session, the same bubblewrap options, and the same
/// files behind the workspace and the masked paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Key {
    session: String,
    options: Vec<OsString>,
    identities: Vec<[u64; 4]>,
}

impl Key {
    /// The key of `options` (bubblewrap's, before `--`) for `session`, given the workspace and
    /// the masked paths, which must be the same files as when the sandbox was made.
    ///
    /// A mask is a mount on the file it covered: once the host removes that file, the mount is
    /// gone from the sandbox, and a file made at the same path would show. Such a file is
    /// another file even where the file system gives it the freed inode's number: its birth
    /// (or, where the file system keeps none, change) time differs, so the key does.
    pub(super) fn new(session: &str, options: Vec<OsString>, workspace: &Path, masked: &[&Path]) -> Key {
        let mut identities = vec![identity(workspace, false)];
        identities.extend(masked.iter().map(|p| identity(p, true)));
        Key {
            session: session.to_string(),
            options,
            identities,
        }
    }
}

/// Device, inode, birth time and, for a masked path, change time (the workspace's changes with
/// every file made in it, which must not make a new sandbox); all zero for a path that is not
/// there.
fn identity(path: &Path, changes: bool) -> [u64; 4] {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::symlink_metadata(path) else {
        return [0; 4];
    };
    let born = m
        .created()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64);
    let changed = if changes {
        (m.ctime() as u64).wrapping_mul(1_000_000_000).wrapping_add(m.ctime_nsec() as u64)
    } else {
        0
    };
    [m.dev(), m.ino(), born, changed]
}

/// How long an idle sandbox is kept, and how many idle ones at most.
#[derive(Debug, Clone, Copy)]
pub(super) struct Keep {
    pub idle: Duration,
    pub max: usize,
}

/// A sandbox made and waiting, or lent to a command.
#[derive(Debug)]
struct Warm {
    key: Key,
    /// bubblewrap; its stdin is the placeholder's, held open here.
    bwrap: Child,
    /// The sandbox's init (bubblewrap's process 1), as toolslot's namespace numbers it.
    init: i32,
    /// The namespaces to enter, in order, with the `CLONE_NEW*` flag of each.
    namespaces: Vec<(OwnedFd, libc::c_int)>,
    /// The sandbox's own `/proc`, where its processes are counted.
    procs: PathBuf,
    idle_since: Instant,
}

/// The processes of a sandbox with nothing running: bubblewrap's init and the placeholder.
const AT_REST: usize = 2;

impl Warm {
    /// Starts bubblewrap with `options` around the placeholder and opens its namespaces.
    fn make(
        bwrap: &Path,
        options: &[OsString],
        env: &[(String, String)],
        key: Key,
        setup: impl Fn(&mut std::process::Command),
    ) -> io::Result<Warm> {
        let (info_read, info_write) = pipe()?;
        let info_fd = info_write.as_raw_fd();
        let mut cmd = std::process::Command::new(bwrap);
        cmd.args(options)
            .arg("--info-fd")
            .arg(info_fd.to_string())
            .args(["--", "sh", "-c", "echo ready && exec cat"])
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        setup(&mut cmd);
        // SAFETY: fcntl on a descriptor this process owns, between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::fcntl(info_fd, libc::F_SETFD, 0) == -1 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn()?;
        drop(info_write);
        let ended = |child: &mut Child, why: String| {
            let _ = child.kill();
            let _ = child.wait();
            io::Error::other(why)
        };
        let init = match read_child_pid(info_read) {
            Ok(pid) => pid,
            Err(e) => return Err(ended(&mut child, format!("bubblewrap did not say its process: {e}"))),
        };
        // The placeholder prints once the sandbox is set up: entering earlier would find the
        // mounts half made.
        let mut ready = [0u8; 6];
        let said = child.stdout.take().map(|mut out| out.read_exact(&mut ready));
        if !matches!(said, Some(Ok(()))) || &ready != b"ready\n" {
            return Err(ended(&mut child, "the sandbox's placeholder did not start".into()));
        }
        let mut warm = Warm {
            key,
            bwrap: child,
            init,
            namespaces: Vec::new(),
            procs: PathBuf::from(format!("/proc/{init}/root/proc")),
            idle_since: Instant::now(),
        };
        // Unprivileged, bubblewrap makes the namespaces in a user namespace of its own and
        // runs the sandbox in a second one inside it, where the mounts are locked: the first is
        // entered first (its owner has every capability there, which entering the others
        // needs), the second last, so the command ends where bubblewrap's would.
        let users = user_namespaces(init)?;
        let mut users = users.into_iter();
        if let Some(outer) = users.next() {
            warm.namespaces.push((outer, libc::CLONE_NEWUSER));
        }
        for (name, flag) in [
            ("ipc", libc::CLONE_NEWIPC),
            ("uts", libc::CLONE_NEWUTS),
            ("net", libc::CLONE_NEWNET),
            ("cgroup", libc::CLONE_NEWCGROUP),
            ("pid", libc::CLONE_NEWPID),
            ("mnt", libc::CLONE_NEWNS),
        ] {
            let theirs = PathBuf::from(format!("/proc/{init}/ns/{name}"));
            // A namespace the sandbox shares with toolslot is not entered.
            if same_file(&theirs, Path::new(&format!("/proc/self/ns/{name}"))) {
                continue;
            }
            let fd = std::fs::File::open(&theirs).map_err(|e| io::Error::other(format!("{}: {e}", theirs.display())))?;
            warm.namespaces.push((OwnedFd::from(fd), flag));
        }
        warm.namespaces.extend(users.map(|fd| (fd, libc::CLONE_NEWUSER)));
        if warm.processes() != Some(AT_REST) {
            return Err(io::Error::other("the sandbox's processes cannot be counted"));
        }
        Ok(warm)
    }

    /// How many live processes the sandbox's process namespace holds (`None`: it cannot be
    /// read). A zombie is not counted: it runs nothing, and the sandbox's init reaps it.
    fn processes(&self) -> Option<usize> {
        let entries = std::fs::read_dir(&self.procs).ok()?;
        Some(
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().as_bytes().iter().all(u8::is_ascii_digit))
                .filter(|e| {
                    // `pid (comm) S …`: the state follows the last parenthesis.
                    let stat = std::fs::read(e.path().join("stat")).unwrap_or_default();
                    let state = stat.iter().rposition(|b| *b == b')').and_then(|i| stat.get(i + 2));
                    !matches!(state, Some(b'Z' | b'X') | None)
                })
                .count(),
        )
    }

    /// Whether nothing but the sandbox's own processes is left, allowing what a command's end
    /// killed a moment to finish dying.
    fn at_rest(&self) -> bool {
        for wait in [0, 1, 2, 4, 8] {
            std::thread::sleep(Duration::from_millis(wait));
            if self.processes() == Some(AT_REST) {
                return true;
            }
        }
        false
    }

    /// Whether bubblewrap still runs.
    fn alive(&mut self) -> bool {
        matches!(self.bwrap.try_wait(), Ok(None))
    }
}

impl Drop for Warm {
    fn drop(&mut self) {
        // Killing the init ends every process of the namespace; then bubblewrap, and it is
        // reaped here so no zombie is left.
        // SAFETY: kill only sends a signal.
        unsafe {
            libc::kill(self.init, libc::SIGKILL);
        }
        let _ = self.bwrap.kill();
        let _ = self.bwrap.wait();
    }
}

/// A sandbox lent to one command; given back when dropped (after the command ended), or
/// killed if the command left anything running in it.
#[derive(Debug)]
pub(super) struct Lease {
    warm: Option<Warm>,
    keep: Keep,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(mut warm) = self.warm.take() else { return };
        if !warm.alive() || !warm.at_rest() {
            // Dropped: killed whole, with whatever the command left behind.
            return;
        }
        warm.idle_since = Instant::now();
        let evicted = {
            let mut idle = pool();
            idle.push(warm);
            let over = idle.len().saturating_sub(self.keep.max);
            idle.drain(..over).collect::<Vec<_>>()
        };
        drop(evicted);
    }
}

impl Lease {
    /// Makes `cmd` enter the sandbox between fork and exec and run `program` with `args` and
    /// `env` there, in `workspace`. Register it after the other set-up (its own session, the
    /// limits, the socket filter), which the command then inherits: the process `cmd` starts
    /// never returns to it, so the program, arguments and environment given here are what runs.
    ///
    /// The process `cmd` starts exits as soon as the program is started, as a child of
    /// toolslot, and writes its pid to `report` first: what to wait for is that program
    /// ([`crate::sandbox::Child`]).
    pub(super) fn enter(
        &self,
        cmd: &mut std::process::Command,
        report: std::os::fd::RawFd,
        workspace: &Path,
        program: &str,
        args: &[String],
        env: &[(String, String)],
    ) -> io::Result<()> {
        let Some(warm) = &self.warm else {
            return Err(io::Error::other("the sandbox was given back"));
        };
        let mut prepared = Prepared::new(report, &warm.namespaces, workspace, program, args, env)?;
        let enter = move || -> io::Result<()> {
            // SAFETY: between fork and exec only async-signal-safe system calls run here, on
            // what was prepared before the fork; nothing is allocated.
            unsafe { enter_child(&mut prepared) }
        };
        // SAFETY: the closure makes only async-signal-safe system calls (see `enter_child`).
        unsafe {
            cmd.pre_exec(enter);
        }
        Ok(())
    }
}

/// The idle sandboxes.
fn pool() -> MutexGuard<'static, Vec<Warm>> {
    static POOL: OnceLock<Mutex<Vec<Warm>>> = OnceLock::new();
    // A panic while holding the lock leaves a list that is still whole.
    POOL.get_or_init(|| Mutex::new(Vec::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// A sandbox for `key`: an idle one made for it, or one made now by `make`. Idle sandboxes
/// past `keep.idle` are ended on the way.
pub(super) fn lease(
    key: Key,
    keep: Keep,
    bwrap: &Path,
    env: &[(String, String)],
    setup: impl Fn(&mut std::process::Command),
) -> io::Result<Lease> {
    start_sweeper(keep.idle);
    let (found, expired) = {
        let mut idle = pool();
        let expired: Vec<Warm> = extract(&mut idle, |w| w.idle_since.elapsed() >= keep.idle);
        let found = idle.iter().position(|w| w.key == key).map(|i| idle.swap_remove(i));
        (found, expired)
    };
    drop(expired);
    if let Some(mut warm) = found
        && warm.alive()
    {
        return Ok(Lease { warm: Some(warm), keep });
    }
    let options = key.options.clone();
    let warm = Warm::make(bwrap, &options, env, key, setup)?;
    Ok(Lease { warm: Some(warm), keep })
}

/// Removes and returns the sandboxes `pick` chooses.
fn extract(idle: &mut Vec<Warm>, pick: impl Fn(&Warm) -> bool) -> Vec<Warm> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < idle.len() {
        if pick(&idle[i]) {
            out.push(idle.swap_remove(i));
        } else {
            i += 1;
        }
    }
    out
}

/// Ends idle sandboxes past their time even when no command comes to do it (a session that
/// ended leaves its sandbox idle).
fn start_sweeper(idle: Duration) {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let every = (idle / 2).clamp(Duration::from_millis(100), Duration::from_secs(10));
        let _ = std::thread::Builder::new().name("sandbox-sweep".into()).spawn(move || {
            loop {
                std::thread::sleep(every);
                let expired = extract(&mut pool(), |w| w.idle_since.elapsed() >= idle);
                drop(expired);
            }
        });
    });
}

/// The init of each idle sandbox of `session`, for tests to tell a sandbox entered again from
/// one made anew.
#[cfg(test)]
pub(super) fn idle_inits(session: &str) -> Vec<i32> {
    pool().iter().filter(|w| w.key.session == session).map(|w| w.init).collect()
}

#[cfg(test)]
mod tests;
