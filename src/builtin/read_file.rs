//! `read_file`: numbered lines of a text file in the workspace.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{blocking, parse_input, workspace};
use crate::tool::{Capability, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};

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
            let path = workspace::confine(&ctx.workspace, &input.path, "path")?;
            let shown = workspace::display(&ctx.workspace, &path);
            let max = ctx.config.read_file.max_file_bytes;
            let (shown_in, path_in) = (shown.clone(), path.clone());
            // Off the async thread, and abandoned with the call: a FIFO or a device can block
            // or never end (see `blocking`).
            let bytes = blocking::run(move |abandon| {
                let shown = shown_in;
                let meta = std::fs::metadata(&path_in).map_err(|e| ToolError::tool(format!("cannot read `{shown}`: {e}")))?;
                if meta.is_dir() {
                    return Err(ToolError::invalid("path", format!("`{shown}` is a directory; use list_dir")));
                }
                let too_big = |size: String| {
                    ToolError::invalid(
                        "path",
                        format!("`{shown}` is {size}, over the {max}-byte limit; use grep_files to find the part you need"),
                    )
                };
                if meta.len() > max {
                    return Err(too_big(format!("{} bytes", meta.len())));
                }
                let file = std::fs::File::open(&path_in).map_err(|e| ToolError::tool(format!("cannot read `{shown}`: {e}")))?;
                match blocking::read_capped(file, max, abandon) {
                    Ok(Some(bytes)) => Ok(bytes),
                    // It grew while read, or is a device with no end.
                    Ok(None) => Err(too_big("larger than its size said (it grew, or has no end)".into())),
                    Err(_) if abandon.is_set() => Err(blocking::Abandon::stopped()),
                    Err(e) => Err(ToolError::tool(format!("cannot read `{shown}`: {e}"))),
                }
            })
            .await?;
            let cfg = &ctx.config.read_file;
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
