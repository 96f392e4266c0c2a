//! `retrieve_tool_result`: read back a slice of an output that was truncated.

use serde::Deserialize;
use serde_json::{Value, json};

use super::parse_input;
use crate::output::Slice;
use crate::tool::{Capability, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};

/// Returns part of a saved full output, by lines, bytes, head, tail or pattern.
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
}

impl Tool for RetrieveToolResult {
    fn name(&self) -> &str {
        "retrieve_tool_result"
    }
    fn description(&self) -> &str {
        "Read part of a tool output that was cut for length, using the ref from its truncation marker. Modes: head, tail, lines (offset/limit in lines), bytes (offset/limit in bytes), grep (pattern with context lines)."
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "ref": {"type": "string", "description": "The ref=<id> value from the truncation marker"},
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
            let text = ctx.services.load_overflow(&input.id)?;
            let out = slice.apply(&text, max).map_err(|e| ToolError::invalid("pattern", e.to_string()))?;
            Ok(ToolOutput::text(out))
        })
    }
}

impl ToolSpec for RetrieveToolResult {
    fn capabilities(&self) -> &[Capability] {
        &[Capability::ReadOnly]
    }
    fn supports_parallel(&self) -> bool {
        true
    }
}
