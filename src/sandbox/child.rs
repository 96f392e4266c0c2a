//! A sandboxed program once spawned: the process `tokio` started, or, in a session's sandbox,
//! the program the entering process started as toolslot's own child and left (`warm/enter.rs`),
//! which toolslot waits for through a pidfd.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Output};
use std::sync::{Arc, Mutex};

use tokio::io::AsyncReadExt;
use tokio::io::unix::AsyncFd;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};

/// A spawned sandboxed program: its pipes, its pid, its end.
#[derive(Debug)]
pub struct Child {
    /// Its stdin, when piped.
    pub stdin: Option<ChildStdin>,
    /// Its stdout, when piped.
    pub stdout: Option<ChildStdout>,
    /// Its stderr, when piped.
    pub stderr: Option<ChildStderr>,
    process: Process,
}

#[derive(Debug)]
enum Process {
    Spawned(tokio::process::Child),
    Entered(Entered),
}

impl Child {
    /// The process `tokio` spawned.
    pub(super) fn spawned(mut child: tokio::process::Child) -> Child {
        Child {
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            process: Process::Spawned(child),
        }
    }

    /// The program whose pid the entering process `middle` reported on `report`, with
    /// `middle`'s pipes (the program has them). Waits for `middle` to be gone.
    pub(super) async fn entered(mut middle: tokio::process::Child, report: OwnedFd) -> io::Result<Child> {
        let mut pid = [0u8; 4];
        // The entering process wrote the pid before it exited, and spawn returned only once it
        // had: the bytes are there, or it failed before starting the program.
        let read = read_report(&report, &mut pid);
        // Taken first: waiting for a `tokio` child closes its stdin.
        let (stdin, stdout, stderr) = (middle.stdin.take(), middle.stdout.take(), middle.stderr.take());
        let status = middle.wait().await?;
        if read != pid.len() || !status.success() {
            return Err(io::Error::other(format!(
                "the sandbox's command did not start (entering it ended with {status})"
            )));
        }
        let pid = i32::from_ne_bytes(pid);
        Ok(Child {
            stdin,
            stdout,
            stderr,
            process: Process::Entered(Entered::new(pid)),
        })
    }

    /// The program's pid (the leader of its process group), until it was waited for.
    pub fn id(&self) -> Option<u32> {
        match &self.process {
            Process::Spawned(c) => c.id(),
            Process::Entered(e) => (!e.reaped).then_some(e.pid as u32),
        }
    }

    /// Waits for the program to end. A program in a session's sandbox ends with what is left of
    /// its process group, and a death by a signal reads as exit status 128 + the signal, as
    /// bubblewrap reports it.
    ///
    /// # Cancel safety
    /// Dropping the future leaves the program running; dropping the [`Child`] ends it.
    ///
    /// # Errors
    /// As the system's wait.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        match &mut self.process {
            Process::Spawned(c) => c.wait().await,
            Process::Entered(e) => e.wait().await,
        }
    }

    /// Reads stdout and stderr to their ends and waits for the program.
    ///
    /// # Errors
    /// As [`Child::wait`], or a read that failed.
    pub async fn wait_with_output(mut self) -> io::Result<Output> {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let (stdout, stderr) = (self.stdout.take(), self.stderr.take());
        let read_out = async {
            match stdout {
                Some(mut s) => s.read_to_end(&mut out).await.map(drop),
                None => Ok(()),
            }
        };
        let read_err = async {
            match stderr {
                Some(mut s) => s.read_to_end(&mut err).await.map(drop),
                None => Ok(()),
            }
        };
        let (o, e) = futures::join!(read_out, read_err);
        o?;
        e?;
        let status = self.wait().await?;
        Ok(Output {
            status,
            stdout: out,
            stderr: err,
        })
    }
}

/// Reads what is in the pipe (never blocks long: the writer is gone).
fn read_report(fd: &OwnedFd, buf: &mut [u8]) -> usize {
    // SAFETY: a read into a live buffer of its own length.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    usize::try_from(n).unwrap_or(0)
}

/// A program that is toolslot's child but not `tokio`'s. When it ends, what is left of its
/// process group is ended at once by a thread that watches it, whether anyone waits yet or not
/// (its output ends then, as it does when bubblewrap's first process ends with its command); it
/// is collected by [`Entered::wait`], or by a thread if it is dropped first.
#[derive(Debug)]
struct Entered {
    pid: libc::pid_t,
    ended: Arc<Ended>,
    reaped: bool,
}

/// What the watcher and the waiter share.
#[derive(Debug)]
struct Ended {
    pid: libc::pid_t,
    /// Readable once the program has ended; `None` where the kernel has no pidfds (then a
    /// thread of the blocking pool waits).
    pidfd: Option<AsyncFd<OwnedFd>>,
    /// Set once collected: from then on its pid may be another process's, never signalled.
    reaped: Mutex<bool>,
}

impl Ended {
    /// Returns once the program has ended (it is left uncollected).
    async fn wait(&self) -> io::Result<()> {
        match &self.pidfd {
            Some(fd) => fd.readable().await.map(drop),
            None => {
                let pid = self.pid;
                tokio::task::spawn_blocking(move || wait_exited(pid, libc::WNOWAIT).map(drop))
                    .await
                    .map_err(io::Error::other)?
            }
        }
    }

    /// Ends the program's group, unless it was collected (its ids free for reuse).
    fn kill_group(&self) {
        let reaped = self.reaped.lock().unwrap_or_else(|p| p.into_inner());
        if !*reaped {
            // SAFETY: not collected, so the group id is still the program's.
            unsafe {
                libc::kill(-self.pid, libc::SIGKILL);
            }
        }
    }

    /// Ends what is left of the group and collects the program (waiting for it to die).
    fn reap(&self) -> io::Result<ExitStatus> {
        let mut reaped = self.reaped.lock().unwrap_or_else(|p| p.into_inner());
        if *reaped {
            return Err(io::Error::other("the program was already waited for"));
        }
        // SAFETY: not collected, so the ids are still the program's.
        unsafe {
            libc::kill(-self.pid, libc::SIGKILL);
        }
        let info = wait_exited(self.pid, 0)?;
        *reaped = true;
        Ok(status_of(&info))
    }
}

impl Entered {
    fn new(pid: libc::pid_t) -> Entered {
        // SAFETY: pidfd_open on a pid that is this process's child, not yet waited for, so it
        // names that process.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        let pidfd = i32::try_from(fd)
            .ok()
            .filter(|fd| *fd >= 0)
            // SAFETY: a descriptor the kernel just gave this process.
            .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
            // SAFETY: the descriptor is owned by the `OwnedFd` the `AsyncFd` owns, so it stays
            // open and the same for the `AsyncFd`'s whole life.
            .and_then(|fd| unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }.ok());
        let ended = Arc::new(Ended {
            pid,
            pidfd,
            reaped: Mutex::new(false),
        });
        if !watch(&ended) {
            // No pidfd (or no watching thread): a thread of its own waits for this one.
            let watching = Arc::clone(&ended);
            let watcher = std::thread::Builder::new()
                .name("toolslot-watch".into())
                .stack_size(64 * 1024)
                .spawn(move || {
                    if wait_exited(watching.pid, libc::WNOWAIT).is_ok() {
                        watching.kill_group();
                    }
                });
            if let Err(e) = watcher {
                // Its group then ends when toolslot waits for it, after its output has ended.
                tracing::warn!(error = %e, "no thread to watch a sandboxed command");
            }
        }
        Entered { pid, ended, reaped: false }
    }

    async fn wait(&mut self) -> io::Result<ExitStatus> {
        if self.reaped {
            return Err(io::Error::other("the program was already waited for"));
        }
        self.ended.wait().await?;
        let status = self.ended.reap()?;
        self.reaped = true;
        Ok(status)
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        // Dropped running (a timeout, a cancelled round): it and its group end, and a thread
        // collects it so no zombie is left.
        // SAFETY: not collected (the flag is checked under the lock in `reap`), so the ids are
        // still the program's.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
        }
        let ended = Arc::clone(&self.ended);
        let _ = std::thread::Builder::new()
            .name("toolslot-reap".into())
            .spawn(move || ended.reap().map(drop));
    }
}

/// The one thread that watches every entered command's pidfd (epoll) and ends each one's group
/// the moment it ends. A thread, not a task: the slot spawns no tasks; one for all, since a
/// thread per command cost more than the command's own spawn (its stack mapped and unmapped in a
/// process of many threads).
struct Watcher {
    epoll: OwnedFd,
    watched: Mutex<std::collections::HashMap<u64, Arc<Ended>>>,
    next: std::sync::atomic::AtomicU64,
}

/// The watcher, started on first use; `None` when it could not be.
static WATCHER: std::sync::OnceLock<Option<Watcher>> = std::sync::OnceLock::new();

/// Has the watcher end `ended`'s group when it ends; false when it cannot (no pidfd, no
/// thread).
fn watch(ended: &Arc<Ended>) -> bool {
    let Some(fd) = ended.pidfd.as_ref().map(AsRawFd::as_raw_fd) else {
        return false;
    };
    let Some(watcher) = WATCHER.get_or_init(start_watcher) else {
        return false;
    };
    let token = watcher.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // Listed before it is registered: an event can come the moment it is.
    lock(&watcher.watched).insert(token, Arc::clone(ended));
    let mut event = libc::epoll_event {
        events: (libc::EPOLLIN | libc::EPOLLONESHOT) as u32,
        u64: token,
    };
    // SAFETY: a live epoll descriptor, a live pidfd (kept by the `Ended` listed above) and an
    // event the call only reads.
    if unsafe { libc::epoll_ctl(watcher.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) } != 0 {
        lock(&watcher.watched).remove(&token);
        return false;
    }
    true
}

fn start_watcher() -> Option<Watcher> {
    // SAFETY: epoll_create1 returns a new descriptor or -1.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: a descriptor the kernel just gave this process.
    let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
    let raw = epoll.as_raw_fd();
    let watcher = Watcher {
        epoll,
        watched: Mutex::new(std::collections::HashMap::new()),
        next: std::sync::atomic::AtomicU64::new(0),
    };
    std::thread::Builder::new()
        .name("toolslot-watch".into())
        .spawn(move || watch_loop(raw))
        .ok()?;
    Some(watcher)
}

/// The watcher's loop: each command that ended is taken off the list and its group ended.
fn watch_loop(epoll: std::os::fd::RawFd) {
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; 64];
    loop {
        // SAFETY: the epoll descriptor lives as long as the process (a static's); the buffer
        // is the length given.
        let n = unsafe { libc::epoll_wait(epoll, events.as_mut_ptr(), events.len() as i32, -1) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        // Set before anything was registered, so before any event.
        let Some(watcher) = WATCHER.get().and_then(Option::as_ref) else {
            continue;
        };
        for event in &events[..n as usize] {
            let token = event.u64;
            if let Some(ended) = lock(&watcher.watched).remove(&token) {
                ended.kill_group();
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `waitid` on `pid` until it has exited (`extra`: `WNOWAIT` to leave it uncollected).
fn wait_exited(pid: libc::pid_t, extra: libc::c_int) -> io::Result<libc::siginfo_t> {
    loop {
        // SAFETY: waitid writes into the zeroed siginfo it is given.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | extra) };
        if r == 0 {
            return Ok(info);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The exit status `info` tells, a signal's death as 128 + the signal.
fn status_of(info: &libc::siginfo_t) -> ExitStatus {
    // SAFETY: `info` was filled by a successful waitid for an exited child.
    let (code, status) = unsafe { (info.si_code, info.si_status()) };
    let exit = match code {
        libc::CLD_EXITED => status,
        _ => 128 + status,
    };
    ExitStatus::from_raw((exit & 0xff) << 8)
}
