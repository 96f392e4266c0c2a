//! Extension tools: out-of-process programs declared in config, governed like any tool.
//!
//! A call runs the command with the JSON arguments on stdin and reads the result from stdout:
//! either `{"content": "...", "is_error": bool}` or plain text. This is how users add tools to
//! the standalone binary without writing Rust.
//!
//! The program runs as the leader of its own process group, and the group is killed when the
//! call ends, however it ends: nothing it started (a child holding its stdout, a detached
//! helper) outlives the call. Its stdout and stderr are read with the bounds of shell output
//! ([`crate::output::Capture`]). A declaration without capabilities is read as unknown, not as
//! read-only: the tool needs approval, and its metadata says its capabilities are undeclared.

use std::os::fd::AsRawFd;
use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::child_group::GroupGuard;
use crate::config::{Config, ExtensionConfig};
use crate::output::{Capture, CaptureLimits, read_both};
use crate::registry::RegistryBuilder;
use crate::tool::{Capability, ErrorCategory, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSource, ToolSpec};

/// One `[[extensions]]` tool.
#[derive(Debug)]
pub struct ExtensionTool {
    cfg: ExtensionConfig,
    schema: Value,
    capabilities: Vec<Capability>,
}

impl ExtensionTool {
    /// Reads a declaration.
    ///
    /// # Errors
    /// A reason naming the bad field: an unknown capability, an input schema that is not
    /// JSON, or an empty command. The registry then lists the tool as fail-closed.
    pub fn from_config(cfg: &ExtensionConfig) -> Result<Self, String> {
        let mut capabilities = cfg
            .capabilities
            .iter()
            .map(|c| c.parse::<Capability>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("capabilities: {e}"))?;
        if capabilities.is_empty() {
            // Said nothing about what it does: it may do anything, so it asks first.
            capabilities.push(Capability::RequiresApproval);
        }
        let schema: Value = serde_json::from_str(&cfg.input_schema).map_err(|e| format!("input_schema is not JSON: {e}"))?;
        if cfg.command.is_empty() {
            return Err("command is empty".into());
        }
        Ok(Self {
            cfg: cfg.clone(),
            schema,
            capabilities,
        })
    }
}

/// Hands every `[[extensions]]` tool of `config` to `builder`; a bad declaration is listed
/// fail-closed under its name rather than left out.
pub fn add_declared(mut builder: RegistryBuilder, config: &Config) -> RegistryBuilder {
    for cfg in &config.extensions {
        builder = match ExtensionTool::from_config(cfg) {
            Ok(t) => builder.with_tool(std::sync::Arc::new(t)),
            Err(reason) => builder.with_failed(&cfg.name, reason, ToolSource::Extension),
        };
    }
    builder
}

impl Tool for ExtensionTool {
    fn name(&self) -> &str {
        &self.cfg.name
    }
    fn description(&self) -> &str {
        &self.cfg.description
    }
    fn input_schema(&self) -> Value {
        self.schema.clone()
    }
    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let mut sandboxed = self.command(ctx)?;
            let spawned = sandboxed.spawn().await;
            let crate::sandbox::Sandboxed { guard: mut sandbox, .. } = sandboxed;
            let mut child = spawned.map_err(|e| {
                ToolError::refused(
                    ErrorCategory::Unavailable,
                    format!("extension `{}` cannot start `{}`: {e}", self.cfg.name, self.cfg.command[0]),
                )
            })?;
            // Kept until the program ended: it holds the sandbox's private temporary folder.
            sandbox.spawned();
            // Dropped (timeout, cancelled round) or finished: the whole group goes.
            let group = GroupGuard(child.id());
            let mut out = Capture::new(CaptureLimits::program(&ctx.config), ctx.services.output_file());
            let mut err = Capture::new(CaptureLimits::stderr(&ctx.config), None);
            let (mut stdout, mut stderr) = (child.stdout.take(), child.stderr.take());
            let mut stdin = child.stdin.take();
            let body = serde_json::to_vec(&input).unwrap_or_default();
            // Written while the output is read: a program that answers before it reads all
            // of a large input must not block on a full pipe while we block on its stdin.
            let writing = async {
                if let Some(mut s) = stdin.take() {
                    // A program that does not read its input is allowed; its answer still counts.
                    let _ = s.write_all(&body).await;
                }
            };
            let status = {
                let reading = read_both(stdout.as_mut(), stderr.as_mut(), &mut out, &mut err);
                tokio::pin!(reading);
                let exit = async { futures::join!(child.wait(), writing).0 };
                tokio::pin!(exit);
                tokio::select! {
                    status = &mut exit => status,
                    () = &mut reading => exit.await,
                }
            };
            // The program is done; what it started is not kept alive by its pipes.
            group.kill();
            for (pipe, capture) in [
                (stdout.as_ref().map(AsRawFd::as_raw_fd), &mut out),
                (stderr.as_ref().map(AsRawFd::as_raw_fd), &mut err),
            ] {
                if let Some(fd) = pipe {
                    drain_ready(fd, capture);
                }
            }
            let status = status.map_err(|e| ToolError::tool(format!("extension `{}`: {e}", self.cfg.name)))?;
            let stderr = err.finish(None).text;
            if !status.success() {
                let stdout = out.finish(Some(&stderr));
                return Ok(ToolOutput {
                    cut: stdout.cut,
                    ..ToolOutput::error_text(format!(
                        "extension `{}` exited with {status}\n{}{stderr}",
                        self.cfg.name, stdout.text
                    ))
                });
            }
            let stdout = out.finish(None);
            if stdout.cut.is_some() {
                // Too long to be read whole: its text, cut, whatever shape it has.
                return Ok(ToolOutput {
                    cut: stdout.cut,
                    ..ToolOutput::text(stdout.text)
                });
            }
            // `{"content", "is_error"}` when the program speaks JSON; its text otherwise. JSON
            // data (an object or array as `content`, or as the whole answer) is a structured
            // result: shown whole when small, summarized under a handle when large.
            if let Ok(v) = serde_json::from_str::<Value>(stdout.text.trim()) {
                if let Some(content) = v.get("content") {
                    let is_error = v.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                    let out = match content {
                        Value::String(text) => ToolOutput::text(text.clone()),
                        Value::Object(_) | Value::Array(_) => ToolOutput::structured("", content.clone()),
                        other => ToolOutput::text(other.to_string()),
                    };
                    return Ok(ToolOutput { is_error, ..out });
                }
                if v.is_object() || v.is_array() {
                    return Ok(ToolOutput::structured("", v));
                }
            }
            Ok(ToolOutput::text(stdout.text))
        })
    }
}

impl ExtensionTool {
    /// The program's process: the one place an extension's process is made, wrapped in the
    /// sandbox. Its own session and process group, the child environment (the core set plus
    /// the extension's `env_passthrough`), stdin, stdout and stderr piped, killed if the call
    /// is dropped.
    ///
    /// # Errors
    /// `unavailable` when the declaration has no command or the sandbox cannot be set up.
    fn command(&self, ctx: &ToolContext) -> Result<crate::sandbox::Sandboxed, ToolError> {
        let (program, args) = self
            .cfg
            .command
            .split_first()
            .ok_or_else(|| ToolError::refused(ErrorCategory::Unavailable, "no command"))?;
        // What the session's policy denies this tool by path is masked from its program.
        let hidden = ctx.hidden_paths(&self.cfg.name)?;
        let mut sandboxed = crate::sandbox::command(&crate::sandbox::Request {
            program,
            args,
            workspace: &ctx.workspace,
            grant: ctx.grant,
            // The program is the user's, installed anywhere: it sees every folder (never
            // toolslot's processes), and writes only when the call was cleared to.
            view: crate::sandbox::View::Full,
            keep_env: &self.cfg.env_passthrough,
            shell: &ctx.config.shell,
            hidden: &hidden,
            // A read-only call runs in the session's sandbox, entered again (`sandbox/warm/`).
            session: Some(&ctx.session_id),
            policy: Some(&ctx.config.policy),
        })
        .map_err(|e| ToolError::refused(ErrorCategory::Unavailable, format!("extension `{}`: {e}", self.cfg.name)))?;
        sandboxed
            .command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Ok(sandboxed)
    }
}

/// Reads what is already in the pipe `fd` (non-blocking, as tokio left it) into `capture`,
/// stopping at its end or as soon as it is empty: after the group was killed, a writer still
/// holding it can only be one that left the group, and it is not waited for.
fn drain_ready(fd: std::os::fd::RawFd, capture: &mut Capture) {
    let mut buf = [0u8; 1 << 14];
    loop {
        // SAFETY: `fd` is an open pipe owned by the caller for the whole call; `buf` is
        // writable for its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        match usize::try_from(n) {
            Ok(0) | Err(_) => return,
            Ok(n) => capture.push(&buf[..n]),
        }
    }
}

impl ToolSpec for ExtensionTool {
    fn capabilities(&self) -> &[Capability] {
        &self.capabilities
    }
    fn capabilities_declared(&self) -> bool {
        !self.cfg.capabilities.is_empty()
    }
    fn source(&self) -> ToolSource {
        ToolSource::Extension
    }
    fn defer_loading(&self) -> bool {
        self.cfg.defer
    }
    fn supports_parallel(&self) -> bool {
        self.cfg.parallel
    }
}

/// A one-line JSON summary of a declaration, for notices.
pub fn describe(cfg: &ExtensionConfig) -> String {
    json!({"name": cfg.name, "command": cfg.command}).to_string()
}
