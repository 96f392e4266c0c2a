//! OpenAI Chat Completions: one `role: "tool"` message per call.

use serde_json::{Value, json};

use crate::event::ToolResult;

/// The tool message answering one call. Chat has no error flag and no media in a tool
/// message: the content's text says both (it begins with the error, and names each media block).
pub(super) fn tool_message(r: &ToolResult) -> Value {
    json!({"role": "tool", "tool_call_id": r.tool_use_id, "content": r.content})
}
