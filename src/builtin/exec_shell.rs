//! `exec_shell`: run a command in the workspace, with a timeout that kills its whole group.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use super::parse_input;
use super::shell_process::{GroupGuard, shell_command};
use crate::config::NetworkPolicy;
use crate::output::{Budget, truncate};
use crate::plan::arity::{has_shell_syntax, shell_approval_key, tokenize};
use crate::tool::{
    ApprovalRequirement, Approvals, Capability, ErrorCategory, OutputKind, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec,
};

/// Runs a shell command; stdout is the result, exit code and stderr are reported apart.
#[derive(Debug, Default)]
pub struct ExecShell;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    command: String,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    background: bool,
}

/// Commands that only read, run without approval when they hold no shell operators or
/// redirections. Each entry is a program, or a program and its subcommand.
pub const READ_ONLY_COMMANDS: &[&str] = &[
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "pwd",
    "echo",
    "grep",
    "rg",
    "tree",
    "stat",
    "file",
    "which",
    "du",
    "df",
    "date",
    "uname",
    "whoami",
    "env",
    "printenv",
    "git status",
    "git diff",
    "git log",
    "git show",
    "git blame",
    "git ls-files",
    "git rev-parse",
    "cargo metadata",
    "cargo tree",
    "find",
];

/// Arguments that make an otherwise read-only command write or execute.
const WRITING_ARGS: &[&str] = &[
    "-exec", "-execdir", "-delete", "-fprint", "-fprintf", "-fls", "-ok", "-okdir", "--output", "-o",
];

/// Whether `command` is on the read-only allow-list (and so runs without approval).
pub fn is_read_only_command(command: &str) -> bool {
    if has_shell_syntax(command) {
        return false;
    }
    let Some(words) = tokenize(command) else {
        return false;
    };
    let Some(first) = words.first() else {
        return false;
    };
    // `env` with arguments runs a program; only bare `env` reads.
    if first == "env" && words.len() > 1 {
        return false;
    }
    let plain: Vec<&str> = words.iter().map(String::as_str).filter(|w| !w.starts_with('-')).collect();
    let listed = READ_ONLY_COMMANDS.iter().any(|entry| {
        let parts: Vec<&str> = entry.split(' ').collect();
        parts.len() <= plain.len() && parts.iter().zip(&plain).all(|(a, b)| a == b)
    });
    listed && !words.iter().any(|w| WRITING_ARGS.contains(&w.as_str()))
}

impl Tool for ExecShell {
    fn name(&self) -> &str {
        "exec_shell"
    }
    fn description(&self) -> &str {
        "Run a shell command (sh -c) in the workspace root. Returns stdout, then the exit code and stderr. Long output is cut in the middle; the full output can be retrieved."
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
            let mut cmd = shell_command(&input.command, ctx);
            cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
            let mut child = cmd.spawn().map_err(|e| ToolError::tool(format!("cannot start the shell: {e}")))?;
            let group = GroupGuard(child.id());
            let mut stdout = child.stdout.take();
            let mut stderr = child.stderr.take();
            let read_all = async {
                let mut out = Vec::new();
                let mut err = Vec::new();
                let (a, b) = tokio::join!(
                    async {
                        if let Some(s) = stdout.as_mut() {
                            let _ = s.read_to_end(&mut out).await;
                        }
                    },
                    async {
                        if let Some(s) = stderr.as_mut() {
                            let _ = s.read_to_end(&mut err).await;
                        }
                    }
                );
                let _ = (a, b);
                let status = child.wait().await;
                (out, err, status)
            };
            let (out, err, status) = match tokio::time::timeout(timeout, read_all).await {
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
            let stdout = String::from_utf8_lossy(&out).into_owned();
            let stderr = String::from_utf8_lossy(&err).into_owned();
            let mut trailer = match code {
                Some(c) => format!("[exit code: {c}]"),
                None => "[killed by a signal]".to_string(),
            };
            if !stderr.is_empty() {
                // stderr gets its own small budget, tail-heavy: the error is at the end.
                let o = &ctx.config.output;
                let budget = Budget {
                    max: o.shell_tail_bytes,
                    head: o.shell_tail_bytes / 4,
                    tail: o.shell_tail_bytes / 2,
                    rescue_percent: o.rescue_percent,
                };
                let shown = truncate(&stderr, &budget, true, None).map_or(stderr, |t| t.text);
                trailer.push_str("\n[stderr]\n");
                trailer.push_str(&shown);
            }
            Ok(ToolOutput {
                content: stdout,
                is_error: code != Some(0),
                kind: OutputKind::Shell,
                trailer: Some(trailer),
                partial: false,
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
        match input.get("command").and_then(Value::as_str) {
            Some(c) if is_read_only_command(c) => ApprovalRequirement::Auto,
            _ => self.approval_requirement(policy),
        }
    }
    fn approval_key(&self, input: &Value) -> String {
        shell_approval_key(input.get("command").and_then(Value::as_str).unwrap_or(""))
    }
    fn field_aliases(&self) -> &[(&'static str, &'static str)] {
        &[("cmd", "command"), ("timeout", "timeout_ms")]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_only_allow_list() {
        for c in [
            "ls -la",
            "cat src/main.rs",
            "git status",
            "git diff HEAD~1",
            "grep -rn 'a|b' src",
            "find . -name '*.rs'",
            "env",
        ] {
            assert!(is_read_only_command(c), "{c}");
        }
        for c in [
            "rm -rf x",
            "ls > out",
            "cat a | sh",
            "git push",
            "git commit -m x",
            "find . -delete",
            "find . -exec rm {} ;",
            "echo $(rm -rf /)",
            "env rm -rf /",
            "ls; rm x",
            "cargo build",
        ] {
            assert!(!is_read_only_command(c), "{c}");
        }
    }
}
