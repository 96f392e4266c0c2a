//! `exec_shell`: run a command in the workspace, with a timeout that kills its whole group.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::parse_input;
use super::shell_process::{GroupGuard, shell_command};
use crate::config::NetworkPolicy;
use crate::output::{Capture, CaptureLimits, read_both};
use crate::tool::{
    ApprovalRequirement, Approvals, Capability, ErrorCategory, OutputKind, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec,
};

/// Runs a shell command; stdout is the result, exit code and stderr are reported apart.
///
/// The default has no sandbox, and so no Auto: every command asks.
#[derive(Debug, Default)]
pub struct ExecShell {
    /// Commands run in an OS sandbox here, so a command judged read-only may run unasked.
    sandboxed: bool,
    /// Why not, told once per session.
    notice: Option<String>,
}

impl ExecShell {
    /// exec_shell under `config`'s sandbox (detected once per process).
    pub fn new(config: &crate::config::Config) -> Self {
        let mode = config.shell.sandbox;
        Self {
            sandboxed: crate::sandbox::backend(mode) != crate::sandbox::Backend::None,
            notice: crate::sandbox::unavailable_notice(mode),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    command: String,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    background: bool,
}

impl Tool for ExecShell {
    fn name(&self) -> &str {
        "exec_shell"
    }
    fn description(&self) -> &str {
        "Run a shell command (sh -c) in the workspace root, in a sandbox: a plain command that only reads runs at once but sees only the workspace, read-only, without network; anything else needs approval and may then write the workspace. Returns stdout, then the exit code and stderr. Long output is cut in the middle; the full output can be retrieved."
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "minLength": 1, "description": "The command line"},
                "timeout_ms": {"type": "integer", "minimum": 1, "description": "Timeout in milliseconds (capped by the configured one)"},
                "background": {"type": "boolean", "description": "Start it and return at once with a task id, for servers, watchers and long builds; read its output with shell_output, stop it with kill_shell"}
            },
            "required": ["command"],
            "additionalProperties": false
        })
    }
    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let input: Input = parse_input(input)?;
            if input.background {
                let id = super::background::tasks_of(ctx)?.start(&input.command, ctx, &super::background::task_folder(ctx))?;
                return Ok(ToolOutput::text(format!(
                    "Started background task `{id}`: `{}`. Read its output with shell_output {{\"task_id\": \"{id}\"}}; stop it with kill_shell.",
                    input.command
                )));
            }
            let limit = ctx.config.shell.timeout_ms;
            let timeout = Duration::from_millis(input.timeout_ms.map_or(limit, |t| t.min(limit)));
            let mut sandboxed = shell_command(&input.command, ctx, true)?;
            let cmd = &mut sandboxed.command;
            cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
            let mut child = sandboxed
                .spawn()
                .await
                .map_err(|e| ToolError::tool(format!("cannot start the shell: {e}")))?;
            sandboxed.guard.spawned();
            let group = GroupGuard(child.id());
            // Output is read as it streams: head, tail and rescued lines in memory, the
            // whole saved up to shell.max_saved_bytes, however much the command writes.
            let mut out = Capture::new(CaptureLimits::shell(&ctx.config), ctx.services.output_file());
            let mut err = Capture::new(CaptureLimits::stderr(&ctx.config), None);
            let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
            let run = async {
                read_both(stdout, stderr, &mut out, &mut err).await;
                child.wait().await
            };
            let status = match tokio::time::timeout(timeout, run).await {
                Ok(r) => r,
                Err(_) => {
                    drop(group);
                    return Err(ToolError {
                        category: ErrorCategory::Timeout,
                        message: format!(
                            "`{}` was still running after {} ms and was killed (with everything it started)",
                            input.command,
                            timeout.as_millis()
                        ),
                        field: None,
                        started: true,
                    });
                }
            };
            group.disarm();
            let status = status.map_err(|e| ToolError::tool(format!("waiting for the shell failed: {e}")))?;
            let code = status.code();
            use std::os::unix::process::ExitStatusExt;
            // bubblewrap reports a signal death of the command as 128 + the signal.
            let signal = status.signal().or(code
                .filter(|c| *c > 128 && sandboxed.backend == crate::sandbox::Backend::Bwrap)
                .map(|c| c - 128));
            let mut trailer = match code {
                Some(c) => format!("[exit code: {c}]"),
                None => "[killed by a signal]".to_string(),
            };
            // The kept part of stderr (head, tail and rescued lines) is what the denial note
            // reads: a sandbox's refusal is an error line, which rescue keeps.
            let stderr = err.finish(None).text;
            if code != Some(0)
                && let Some(note) = crate::sandbox::denial_note(sandboxed.backend, ctx.grant, &stderr, signal)
            {
                trailer.push('\n');
                trailer.push_str(&note);
            }
            if !stderr.is_empty() {
                // stderr has its own small budget, tail-heavy: the error is at the end.
                trailer.push_str("\n[stderr]\n");
                trailer.push_str(&stderr);
            }
            let stdout = out.finish(Some(&trailer));
            Ok(ToolOutput {
                content: stdout.text,
                is_error: code != Some(0),
                kind: OutputKind::Shell,
                trailer: Some(trailer),
                partial: false,
                cut: stdout.cut,
                structured: None,
                blocks: Vec::new(),
            })
        })
    }
}

impl ToolSpec for ExecShell {
    fn capabilities(&self) -> &[Capability] {
        &[Capability::ExecutesCode]
    }
    fn approval_requirement_for_input(&self, input: &Value, policy: NetworkPolicy) -> ApprovalRequirement {
        // Without a sandbox nothing is Auto: a judgement that missed something would run
        // with the user's full rights.
        match input.get("command").and_then(Value::as_str) {
            Some(c) if self.sandboxed && crate::shell::judge_command(c).requirement == ApprovalRequirement::Auto => {
                ApprovalRequirement::Auto
            }
            _ => self.approval_requirement(policy),
        }
    }
    fn approval_key(&self, input: &Value) -> String {
        crate::shell::approval_key(input.get("command").and_then(Value::as_str).unwrap_or(""))
    }
    fn check_input(&self, input: &Value) -> Result<(), ToolError> {
        // A program's arguments cannot hold one: the shell would never start, and nobody
        // should be asked to approve a command that cannot run.
        if input.get("command").and_then(Value::as_str).is_some_and(|c| c.contains('\0')) {
            return Err(ToolError::invalid(
                "command",
                "`command` contains a NUL byte, which no command line can hold",
            ));
        }
        Ok(())
    }
    fn field_aliases(&self) -> &[(&'static str, &'static str)] {
        &[("cmd", "command"), ("timeout", "timeout_ms")]
    }
    fn session_notice(&self) -> Option<String> {
        self.notice.clone()
    }
}
