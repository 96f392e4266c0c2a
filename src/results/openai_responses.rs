//! OpenAI Responses: one `function_call_output` input item per call.

use serde_json::{Value, json};

use super::media;
use crate::event::ToolResult;

/// The item answering one call; with images, its output is an `input_text` part then an
/// `input_image` part (a data URL) per image. Responses has no error flag: the text says it.
pub(super) fn output_item(r: &ToolResult) -> Value {
    let images = media::images(r);
    let output = if images.is_empty() {
        Value::String(r.content.clone())
    } else {
        let mut parts = vec![json!({"type": "input_text", "text": r.content})];
        parts.extend(
            images
                .iter()
                .map(|m| json!({"type": "input_image", "image_url": format!("data:{};base64,{}", m.mime, m.data)})),
        );
        Value::Array(parts)
    };
    json!({"type": "function_call_output", "call_id": r.tool_use_id, "output": output})
}
