//! `write_file`: create or replace a file, atomically.

use serde::Deserialize;
use serde_json::{Value, json};

use super::write_beneath::write_atomic_beneath;
use super::{blocking, parse_input, workspace};
use crate::tool::{Capability, Tool, ToolContext, ToolFuture, ToolOutput, ToolSpec};

/// Writes a whole file (temp file + rename), creating parent folders.
#[derive(Debug, Default)]
pub struct WriteFile;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    path: String,
    content: String,
}

impl Tool for WriteFile {
    fn name(&self) -> &str {
        "write_file"
    }
    fn description(&self) -> &str {
        "Create a file or replace its whole content. Parent folders are created. Prefer edit_file to change part of an existing file."
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace root"},
                "content": {"type": "string", "description": "The complete new content"}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        })
    }
    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let input: Input = parse_input(input)?;
            // `sub/` names a folder: writing a file called `sub` is not what was asked.
            if input.path.ends_with('/') {
                return Err(crate::tool::ToolError::invalid(
                    "path",
                    format!("`{}` ends with `/`, so it names a folder; give the file's path", input.path),
                ));
            }
            let path = workspace::confine_input(ctx, &input.path, "path")?;
            super::protected::check(&ctx.workspace, &path, &ctx.config.tools.protected)?;
            let shown = workspace::display(&ctx.workspace, &path);
            workspace::refuse_hidden(ctx, "write_file", &path, &shown)?;
            if path.is_dir() {
                return Err(crate::tool::ToolError::invalid("path", format!("`{shown}` is a folder")));
            }
            let existed = path.exists();
            let (target, shown_in, content, ws) = (path.clone(), shown.clone(), input.content, ctx.workspace.clone());
            let (written, lines) = (content.len(), content.lines().count());
            let modified = blocking::run(move |_| write_atomic_beneath(&ws, &target, content.as_bytes(), &shown_in)).await?;
            ctx.services.record_file_state(&path, modified);
            let verb = if existed { "Replaced" } else { "Created" };
            Ok(ToolOutput::text(format!("{verb} `{shown}` ({} bytes, {} lines).", written, lines)))
        })
    }
}

impl ToolSpec for WriteFile {
    fn capabilities(&self) -> &[Capability] {
        &[Capability::WritesFiles]
    }
    fn approval_key(&self, input: &Value) -> String {
        // Approval for the session covers later writes to the same path.
        format!("write_file:{}", input.get("path").and_then(Value::as_str).unwrap_or(""))
    }
    fn field_aliases(&self) -> &[(&'static str, &'static str)] {
        &[("file_path", "path"), ("text", "content"), ("contents", "content")]
    }
}
