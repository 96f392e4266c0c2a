//! The process every shell command runs as (exec_shell's, and background tasks'): `bash -c`
//! (else `sh -c`) in the workspace, in the OS sandbox, in its own session and process group, so whatever ends it
//! ends everything it started. Shared by both shell tools so that neither imports the other.

use crate::sandbox::{Request, Sandboxed, View};
use crate::tool::{ErrorCategory, ToolContext, ToolError};

/// `sh -c command` in the workspace, as every shell the model drives runs: sandboxed to what
/// the call was cleared to do (a call that was not cleared to write sees only the workspace
/// and the system's folders, read-only; what the session's policy denies by path is masked),
/// the core of the host's environment, no stdin, its own
/// session (so a timeout or a kill reaches everything it started), killed if its handle is
/// dropped.
///
/// `in_session`: the command may run in the session's sandbox (`sandbox/warm/`), which a
/// foreground command does: its sandbox is counted and given back (or ended) as soon as it
/// ends. A background task gets one of its own, so that killing it ends all it started at once.
///
/// # Errors
/// An `unavailable` error, nothing started, when the sandbox cannot be set up or what the
/// policy hides could not all be found.
pub(crate) fn shell_command(command: &str, ctx: &ToolContext, in_session: bool) -> Result<Sandboxed, ToolError> {
    let args = ["-c".to_string(), command.to_string()];
    let view = if ctx.grant.write { View::Full } else { View::Confined };
    // What the session's policy denies by path is masked, whatever the command's words say.
    let hidden = ctx.hidden_paths("exec_shell")?;
    crate::sandbox::command(&Request {
        program: shell_program(),
        args: &args,
        workspace: &ctx.workspace,
        grant: ctx.grant,
        view,
        keep_env: &[],
        shell: &ctx.config.shell,
        hidden: &hidden,
        session: in_session.then_some(ctx.session_id.as_str()),
        policy: Some(&ctx.config.policy),
    })
    .map_err(|e| ToolError::refused(ErrorCategory::Unavailable, e.to_string()))
}

/// The shell commands run in: bash where the host has it, since bash's grammar is the one the
/// judgement reads (`src/shell`), and a shell that reads a command otherwise runs what was not
/// judged (dash reads `echo hi &>/dev/null rm x` as `echo hi &` and `>/dev/null rm x`, and has
/// no `$'…'` quoting); else `sh`.
fn shell_program() -> &'static str {
    static SHELL: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
    SHELL.get_or_init(|| {
        if crate::child_env::on_host_path("bash").is_some() {
            "bash"
        } else {
            "sh"
        }
    })
}

pub(crate) use crate::child_group::{GroupGuard, kill_group};
