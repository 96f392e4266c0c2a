//! Waking a host's event loop: a pipe per round that gets a byte whenever the round has
//! something to read, so an asyncio loop can watch it (`add_reader`) instead of parking a
//! thread per wait.

use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, Weak};

use crossbeam_channel::Sender;

use super::HostCall;

/// A non-blocking pipe, closed when the last holder drops it.
#[derive(Debug)]
pub struct WakePipe {
    read: RawFd,
    write: RawFd,
}

impl WakePipe {
    /// A new pipe, both ends non-blocking and closed on exec.
    ///
    /// # Errors
    /// When the process has no file descriptors left.
    pub fn new() -> std::io::Result<Arc<WakePipe>> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` is two writable ints, as pipe2 requires.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Arc::new(WakePipe {
            read: fds[0],
            write: fds[1],
        }))
    }

    /// The end to watch; valid while the pipe is held.
    pub fn read_fd(&self) -> RawFd {
        self.read
    }

    /// Writes a byte. A full pipe already wakes its reader, so a write that would block is
    /// dropped.
    pub fn wake(&self) {
        let byte = 1u8;
        // SAFETY: the fd is open while `self` lives; one byte from a valid pointer.
        let _ = unsafe { libc::write(self.write, (&byte as *const u8).cast(), 1) };
    }

    /// Reads every byte written so far (the reader then looks at the round again).
    pub fn drain(&self) {
        let mut buf = [0u8; 256];
        // SAFETY: the fd is open while `self` lives; the buffer is writable for its length.
        while unsafe { libc::read(self.read, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
    }
}

impl Drop for WakePipe {
    fn drop(&mut self) {
        // SAFETY: both fds are ours and closed only here.
        unsafe {
            libc::close(self.read);
            libc::close(self.write);
        }
    }
}

/// Where host tools send their calls: the shared channel, and the pipes of the rounds that
/// may be waiting for one (any round of the slot may run a host tool's call).
#[derive(Clone, Debug)]
pub(super) struct CallPort {
    sender: Sender<HostCall>,
    waiting: Arc<Mutex<Vec<Weak<WakePipe>>>>,
}

impl CallPort {
    pub(super) fn new(sender: Sender<HostCall>) -> Self {
        CallPort {
            sender,
            waiting: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Sends a call and wakes every round still open.
    pub(super) fn send(&self, call: HostCall) -> Result<(), ()> {
        self.sender.send(call).map_err(|_| ())?;
        let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        waiting.retain(|pipe| match pipe.upgrade() {
            Some(pipe) => {
                pipe.wake();
                true
            }
            None => false,
        });
        Ok(())
    }

    /// Wakes `pipe` on every later call, while it is held.
    pub(super) fn watch(&self, pipe: &Arc<WakePipe>) {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner()).push(Arc::downgrade(pipe));
    }
}
