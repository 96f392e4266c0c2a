//! Extension tools: out-of-process programs declared in config, governed like any tool.
//!
//! A call runs the command with the JSON arguments on stdin and reads the result from stdout:
//! either `{"content": "...", "is_error": bool}` or plain text. This is how users add tools to
//! the standalone binary without writing Rust.

use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::config::{Config, ExtensionConfig};
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
        let capabilities = cfg
            .capabilities
            .iter()
            .map(|c| c.parse::<Capability>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("capabilities: {e}"))?;
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
            let (program, args) = self
                .cfg
                .command
                .split_first()
                .ok_or_else(|| ToolError::refused(ErrorCategory::Unavailable, "no command"))?;
            let mut cmd = tokio::process::Command::new(program);
            crate::child_env::apply(&mut cmd, &ctx.config.shell.env_exclude, &self.cfg.env_passthrough);
            let mut child = cmd
                .args(args)
                .current_dir(&ctx.workspace)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                // Dropped (timeout, cancelled round): the process goes too.
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| {
                    ToolError::refused(
                        ErrorCategory::Unavailable,
                        format!("extension `{}` cannot start `{program}`: {e}", self.cfg.name),
                    )
                })?;
            if let Some(mut stdin) = child.stdin.take() {
                let body = serde_json::to_vec(&input).unwrap_or_default();
                // A program that does not read its input is allowed; its answer still counts.
                let _ = stdin.write_all(&body).await;
            }
            let mut out = Vec::new();
            let mut err = Vec::new();
            let (mut so, mut se) = (child.stdout.take(), child.stderr.take());
            let _ = tokio::join!(
                async {
                    if let Some(s) = so.as_mut() {
                        let _ = s.read_to_end(&mut out).await;
                    }
                },
                async {
                    if let Some(s) = se.as_mut() {
                        let _ = s.read_to_end(&mut err).await;
                    }
                }
            );
            let status = child
                .wait()
                .await
                .map_err(|e| ToolError::tool(format!("extension `{}`: {e}", self.cfg.name)))?;
            let stdout = String::from_utf8_lossy(&out).into_owned();
            if !status.success() {
                let stderr = String::from_utf8_lossy(&err);
                return Ok(ToolOutput::error_text(format!(
                    "extension `{}` exited with {status}\n{stdout}{stderr}",
                    self.cfg.name
                )));
            }
            // `{"content", "is_error"}` when the program speaks JSON; its text otherwise. JSON
            // data (an object or array as `content`, or as the whole answer) is a structured
            // result: shown whole when small, summarized under a handle when large.
            if let Ok(v) = serde_json::from_str::<Value>(stdout.trim()) {
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
            Ok(ToolOutput::text(stdout))
        })
    }
}

impl ToolSpec for ExtensionTool {
    fn capabilities(&self) -> &[Capability] {
        &self.capabilities
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
