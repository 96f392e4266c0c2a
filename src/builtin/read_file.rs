//! `read_file`: numbered lines of a text file in the workspace.

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use super::{parse_input, workspace};
use crate::tool::{Capability, ErrorCategory, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};

/// Reads a text file, with optional line offset and limit.
#[derive(Debug, Default)]
pub struct ReadFile;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    path: String,
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    limit: Option<usize>,
}

impl Tool for ReadFile {
    fn name(&self) -> &str {
        "read_file"
    }
    fn description(&self) -> &str {
        "Read a text file in the workspace. Returns numbered lines. Use offset and limit (in lines) for long files."
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace root"},
                "offset": {"type": "integer", "minimum": 0, "description": "First line to return, from 0"},
                "limit": {"type": "integer", "minimum": 1, "description": "Lines to return"}
            },
            "required": ["path"],
            "additionalProperties": false
        })
    }
    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let input: Input = parse_input(input)?;
            let path = workspace::confine_input(ctx, &input.path, "path")?;
            let shown = workspace::display(&ctx.workspace, &path);
            // The rules judged the path as written and where it leads; this is the file that
            // would be opened, whatever spelling reached it.
            let screen = ctx.screen("read_file");
            if screen.as_ref().is_some_and(|hides| hides(&path)) {
                return Err(ToolError {
                    field: Some("path".into()),
                    ..ToolError::refused(
                        ErrorCategory::NotApproved,
                        format!("`{shown}` is denied by the policy (a deny rule names its path); read_file was not run."),
                    )
                });
            }
            let cfg = &ctx.config.read_file;
            let file = workspace::open_regular(&ctx.workspace, &path, "path")?;
            // And where the opened file really is: a folder swapped since the path was judged
            // must not bring a hidden file in under another name.
            if let (Some(hides), Some(real)) = (screen.as_ref(), workspace::opened_path(&file))
                && hides(&real)
            {
                let real = workspace::display(&ctx.workspace, &real);
                return Err(ToolError {
                    field: Some("path".into()),
                    ..ToolError::refused(
                        ErrorCategory::NotApproved,
                        format!("`{shown}` led to `{real}`, which is denied by the policy (a deny rule names its path); nothing was read."),
                    )
                });
            }
            // What is read is bounded by the limit, not by what the file's size says: a file
            // can grow while it is read, and some report no size at all.
            let mut bytes = Vec::new();
            tokio::fs::File::from_std(file)
                .take(cfg.max_file_bytes.saturating_add(1))
                .read_to_end(&mut bytes)
                .await
                .map_err(|e| ToolError::tool(format!("cannot read `{shown}`: {e}")))?;
            let bytes = (bytes.len() as u64 <= cfg.max_file_bytes).then_some(bytes).ok_or_else(|| {
                ToolError::invalid(
                    "path",
                    format!(
                        "`{shown}` is over the {}-byte limit; use grep_files to find the part you need",
                        cfg.max_file_bytes
                    ),
                )
            })?;
            if bytes[..bytes.len().min(8192)].contains(&0) {
                return Err(ToolError::invalid(
                    "path",
                    format!("`{shown}` is a binary file ({} bytes); read_file reads text only", bytes.len()),
                ));
            }
            let text = String::from_utf8_lossy(&bytes);
            let offset = input.offset.unwrap_or(0);
            let limit = input.limit.unwrap_or(cfg.default_line_limit);
            let total = text.lines().count();
            let mut out = String::with_capacity(text.len().min(1 << 20));
            for (i, line) in text.lines().enumerate().skip(offset).take(limit) {
                out.push_str(&format!("{:>6}\t{line}\n", i + 1));
            }
            if total == 0 {
                out.push_str("(empty file)\n");
            } else if offset >= total {
                return Err(ToolError::invalid(
                    "offset",
                    format!("`{shown}` has {total} lines; offset {offset} is past the end"),
                ));
            } else if offset + limit < total {
                out.push_str(&format!(
                    "[{} more lines; read on with offset={}]\n",
                    total - offset - limit,
                    offset + limit
                ));
            }
            Ok(ToolOutput::text(out))
        })
    }
}

impl ToolSpec for ReadFile {
    fn capabilities(&self) -> &[Capability] {
        &[Capability::ReadOnly]
    }
    fn supports_parallel(&self) -> bool {
        true
    }
    fn field_aliases(&self) -> &[(&'static str, &'static str)] {
        &[("file_path", "path"), ("start_line", "offset"), ("lines", "limit")]
    }
}
