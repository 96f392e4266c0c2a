//! `retrieve_tool_result`: read back a slice of an output that was truncated, or a part of a
//! structured result kept under a handle.

use serde::Deserialize;
use serde_json::{Value, json};

use super::parse_input;
use crate::output::handles::{SummaryLimits, summarize};
use crate::output::{Slice, is_handle};
use crate::tool::{Capability, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};

/// Returns part of a saved full output, by lines, bytes, head, tail or pattern; of a handle,
/// also by JSON pointer.
#[derive(Debug, Default)]
pub struct RetrieveToolResult;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    #[serde(rename = "ref")]
    id: String,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    pattern: Option<String>,
    #[serde(default)]
    context: Option<usize>,
    #[serde(default)]
    path: Option<String>,
}

impl Tool for RetrieveToolResult {
    fn name(&self) -> &str {
        "retrieve_tool_result"
    }
    fn description(&self) -> &str {
        "Read part of a tool output that was cut for length, using the ref from its truncation marker, or of a structured result kept under a handle (ref=h1; path picks a part by JSON pointer, e.g. /items/0). Modes: head, tail, lines (offset/limit in lines), bytes (offset/limit in bytes), grep (pattern with context lines)."
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "ref": {"type": "string", "description": "The ref=<id> value from the truncation marker, or a handle (h1, h2, …)"},
                "path": {"type": "string", "description": "For a handle: a JSON pointer to the part to read (\"/items/0\"); a mode then slices that part"},
                "mode": {"type": "string", "enum": ["head", "tail", "lines", "bytes", "grep"]},
                "offset": {"type": "integer", "minimum": 0},
                "limit": {"type": "integer", "minimum": 1},
                "pattern": {"type": "string"},
                "context": {"type": "integer", "minimum": 0}
            },
            "required": ["ref"],
            "additionalProperties": false
        })
    }
    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let input: Input = parse_input(input)?;
            let max = ctx.config.overflow.retrieve_max_bytes;
            let text = ctx.services.load_overflow(&input.id)?;
            let text = match &input.path {
                None => text,
                Some(path) => {
                    let part = pointed(&input.id, &text, path)?;
                    let pretty = serde_json::to_string_pretty(&part).unwrap_or_else(|_| part.to_string());
                    if input.mode.is_none() {
                        if pretty.len() <= max {
                            return Ok(ToolOutput::text(pretty));
                        }
                        // Too large to read whole: its shape, and how to page through it.
                        let out = &ctx.config.output;
                        let limits = SummaryLimits {
                            max_bytes: out.handle_summary_bytes,
                            preview_items: out.handle_preview_items,
                        };
                        return Ok(ToolOutput::text(format!(
                            "{}\n[{} bytes as JSON; narrow the path, or read it with mode lines or bytes]",
                            summarize(&part, pretty.len(), limits),
                            pretty.len()
                        )));
                    }
                    pretty
                }
            };
            let lines = input.limit.unwrap_or(200);
            let slice = match input.mode.as_deref().unwrap_or("head") {
                "head" => Slice::Head(lines),
                "tail" => Slice::Tail(lines),
                "lines" => Slice::Lines {
                    offset: input.offset.unwrap_or(0),
                    limit: lines,
                },
                "bytes" => Slice::Bytes {
                    offset: input.offset.unwrap_or(0),
                    limit: input.limit.unwrap_or(max),
                },
                "grep" => {
                    let Some(pattern) = input.pattern else {
                        return Err(ToolError::invalid("pattern", "mode grep needs a pattern"));
                    };
                    Slice::Grep {
                        pattern,
                        context: input.context.unwrap_or(2),
                    }
                }
                other => {
                    return Err(ToolError::invalid("mode", format!("unknown mode `{other}`")));
                }
            };
            let out = slice.apply(&text, max).map_err(|e| ToolError::invalid("pattern", e.to_string()))?;
            Ok(ToolOutput::text(out))
        })
    }
}

/// The part of handle `id`'s JSON `text` at the JSON pointer `path`.
fn pointed(id: &str, text: &str, path: &str) -> Result<Value, ToolError> {
    if !is_handle(id) {
        return Err(ToolError::invalid(
            "path",
            format!("`path` reads a handle (h1, h2, …); `{id}` is a saved text output: use mode instead"),
        ));
    }
    if !path.is_empty() && !path.starts_with('/') {
        return Err(ToolError::invalid(
            "path",
            format!("`{path}` is not a JSON pointer: it starts with `/` (/items/0/id), or is \"\" for the whole value"),
        ));
    }
    let value: Value = serde_json::from_str(text).map_err(|e| ToolError::tool(format!("handle `{id}` does not hold JSON: {e}")))?;
    value
        .pointer(path)
        .cloned()
        .ok_or_else(|| ToolError::invalid("path", format!("handle `{id}` has nothing at `{path}`")))
}

impl ToolSpec for RetrieveToolResult {
    fn capabilities(&self) -> &[Capability] {
        &[Capability::ReadOnly]
    }
    fn supports_parallel(&self) -> bool {
        true
    }
}
