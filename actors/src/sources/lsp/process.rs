//! Ending a language server with everything it started.

/// Kills the process group `pid` leads (the sandbox starts every server as the leader of a
/// session and process group of its own).
pub fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid
        && let Ok(pid) = i32::try_from(pid)
        && pid > 0
    {
        // SAFETY: killpg only sends a signal; the group id is the server's pid, which the
        // sandbox's `setsid` made a group leader.
        unsafe {
            libc::killpg(pid, libc::SIGKILL);
        }
    }
}
