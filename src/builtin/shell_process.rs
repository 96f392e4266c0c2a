//! The process every shell command runs as (exec_shell's, and background tasks'): `sh -c` in
//! the workspace, in its own process group, so whatever ends it ends everything it started.
//! Shared by both shell tools so that neither imports the other.

use crate::tool::ToolContext;

/// `sh -c command` in the workspace, as every shell the model drives runs: the host's
/// environment less its secrets, no stdin, its own process group (so a timeout or a kill
/// reaches everything it started), killed if its handle is dropped.
pub(crate) fn shell_command(command: &str, ctx: &ToolContext) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("sh");
    crate::child_env::apply(&mut cmd, &ctx.config.shell.env_exclude, &[]);
    cmd.arg("-c")
        .arg(command)
        .current_dir(&ctx.workspace)
        .stdin(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    cmd
}

/// Kills the process group `pid` leads (a command started by [`shell_command`]).
pub(crate) fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid
        && let Ok(pid) = i32::try_from(pid)
    {
        // SAFETY: killpg only sends a signal; the group id is the child's pid, which
        // `process_group(0)` made a group leader.
        unsafe {
            libc::killpg(pid, libc::SIGKILL);
        }
    }
}

/// Kills the command's process group when dropped, unless the command finished.
pub(crate) struct GroupGuard(pub(crate) Option<u32>);

impl GroupGuard {
    pub(crate) fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}
