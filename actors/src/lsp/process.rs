//! Ending a language server with everything it started.

/// Kills the process group `pid` leads (a server started with `process_group(0)`).
pub fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid
        && let Ok(pid) = i32::try_from(pid)
        && pid > 0
    {
        // SAFETY: killpg only sends a signal; the group id is the server's pid, which
        // `process_group(0)` made a group leader.
        unsafe {
            libc::killpg(pid, libc::SIGKILL);
        }
    }
}
