//! Anthropic Messages: one user message whose content is a `tool_result` block per call.

use serde_json::{Value, json};

use super::media;
use crate::event::ToolResult;

/// The user message that answers a round's calls.
pub(super) fn user_message(results: &[ToolResult]) -> Value {
    json!({"role": "user", "content": results.iter().map(block).collect::<Vec<_>>()})
}

/// One `tool_result` block; with images, its content is a text block then an image block per
/// image (audio has no place in a tool result: the text names it).
fn block(r: &ToolResult) -> Value {
    let images = media::images(r);
    let content = if images.is_empty() {
        Value::String(r.content.clone())
    } else {
        let mut parts = vec![json!({"type": "text", "text": r.content})];
        parts.extend(
            images
                .iter()
                .map(|m| json!({"type": "image", "source": {"type": "base64", "media_type": m.mime, "data": m.data}})),
        );
        Value::Array(parts)
    };
    json!({"type": "tool_result", "tool_use_id": r.tool_use_id, "content": content, "is_error": r.is_error})
}
