//! MCP results as tool outputs: text kept, everything else described, nothing dropped.

use serde_json::Value;

use crate::tool::ToolOutput;

/// Maps a `tools/call` result (as JSON, the wire shape) onto a tool output: text blocks in
/// order, other blocks described, `structuredContent` appended, `isError` kept.
pub fn map_call_result(result: &Value) -> ToolOutput {
    let mut parts: Vec<String> = result
        .get("content")
        .and_then(Value::as_array)
        .map(|c| c.iter().map(describe_content).collect())
        .unwrap_or_default();
    if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
        let text = structured.to_string();
        // Servers often send the same JSON as a text block too; say it once.
        if !parts.iter().any(|p| p.trim() == text) {
            parts.push(format!("[structured content]\n{text}"));
        }
    }
    let content = if parts.is_empty() {
        "(the tool returned no content)".to_string()
    } else {
        parts.join("\n")
    };
    let is_error = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
    ToolOutput {
        is_error,
        ..ToolOutput::text(content)
    }
}

/// One content block as text: text as it is; images, audio, resources and links described.
pub fn describe_content(block: &Value) -> String {
    let field = |k: &str| block.get(k).and_then(Value::as_str).unwrap_or("");
    let b64_len = |k: &str| block.get(k).and_then(Value::as_str).map(|s| s.len() * 3 / 4).unwrap_or(0);
    match field("type") {
        "text" => field("text").to_string(),
        "image" => format!("[image: {}, about {} bytes; not shown as text]", field("mimeType"), b64_len("data")),
        "audio" => format!("[audio: {}, about {} bytes; not shown as text]", field("mimeType"), b64_len("data")),
        "resource" => {
            let r = block.get("resource").cloned().unwrap_or(Value::Null);
            let uri = r.get("uri").and_then(Value::as_str).unwrap_or("");
            match r.get("text").and_then(Value::as_str) {
                Some(text) => format!("[resource {uri}]\n{text}"),
                None => {
                    let mime = r.get("mimeType").and_then(Value::as_str).unwrap_or("application/octet-stream");
                    let len = r.get("blob").and_then(Value::as_str).map(|s| s.len() * 3 / 4).unwrap_or(0);
                    format!("[resource {uri}: {mime}, about {len} bytes of binary data; not shown as text]")
                }
            }
        }
        "resource_link" => format!(
            "[resource link: {} {}{}]",
            field("uri"),
            field("name"),
            if field("description").is_empty() {
                String::new()
            } else {
                format!(" — {}", field("description"))
            }
        ),
        other => format!("[{} content block]", if other.is_empty() { "unknown" } else { other }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_block_kind_is_kept_or_described() {
        let r = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "mimeType": "application/zip", "blob": "UEsDBA=="}},
            {"type": "resource_link", "uri": "file:///c", "name": "c", "description": "a file"}
        ], "structuredContent": {"n": 1}, "isError": true});
        let out = map_call_result(&r);
        assert!(out.is_error);
        assert_eq!(
            out.content,
            "hello\n[image: image/png, about 9 bytes; not shown as text]\n[resource file:///a.txt]\ninside\n\
             [resource file:///b.bin: application/zip, about 6 bytes of binary data; not shown as text]\n\
             [resource link: file:///c c — a file]\n[structured content]\n{\"n\":1}"
        );
    }

    #[test]
    fn duplicate_structured_content_is_said_once() {
        let out = map_call_result(&json!({"content": [{"type": "text", "text": "{\"a\":1}"}], "structuredContent": {"a": 1}}));
        assert_eq!(out.content, "{\"a\":1}");
        assert!(!out.is_error);
    }
}
