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

pub(crate) use crate::child_group::{GroupGuard, kill_group};
