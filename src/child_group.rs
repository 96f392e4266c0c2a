//! The process group of a child toolslot starts (a shell command, an extension program, an MCP
//! server): a child started as the leader of its own group takes everything it starts with it
//! when the group is signalled, so nothing a call started outlives the call.
//!
//! A process that leaves the group (`setsid`) escapes this; only a pid namespace (the OS
//! sandbox) holds those.

/// Sends `signal` to the process group `pid` leads (a child started with `process_group(0)`).
pub fn signal_group(pid: Option<u32>, signal: libc::c_int) {
    if let Some(pid) = pid
        && let Ok(pid) = i32::try_from(pid)
        && pid > 0
    {
        // SAFETY: killpg only sends a signal; the group id is the child's pid, which
        // `process_group(0)` made a group leader.
        unsafe {
            libc::killpg(pid, signal);
        }
    }
}

/// Kills the process group `pid` leads.
pub fn kill_group(pid: Option<u32>) {
    signal_group(pid, libc::SIGKILL);
}

/// Kills a child's process group when dropped, unless disarmed.
#[derive(Debug)]
pub struct GroupGuard(pub Option<u32>);

impl GroupGuard {
    /// Leaves the group alone from now on (the command finished, and its group with it).
    pub fn disarm(mut self) {
        self.0 = None;
    }

    /// Kills the group now (the call ended; whatever it left running goes).
    pub fn kill(mut self) {
        kill_group(self.0.take());
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}
