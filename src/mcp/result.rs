//! MCP results as tool outputs, as the server sent them: text kept, `structuredContent` given
//! once (checked against the tool's `outputSchema`), images and audio passed on as blocks,
//! resources described, links listed with how to read them. Nothing is dropped.

use serde_json::Value;

use crate::tool::{ErrorCategory, ToolError, ToolOutput};

/// Maps a `tools/call` result (as JSON, the wire shape) of `tool` at `server` onto a tool
/// output: text blocks in order (less the one that only repeats the structured content),
/// `structuredContent` as the output's structured value, image and audio blocks as media
/// blocks, other blocks described, `isError` kept. With an `outputSchema`, a successful
/// result's structured content must match it.
///
/// # Errors
/// A `tool_error` naming the path (in `field`) where the structured content breaks the tool's
/// output schema, or saying it is missing.
pub fn map_call_result(
    result: &Value,
    server: &str,
    tool: &str,
    output_schema: Option<&jsonschema::Validator>,
) -> Result<ToolOutput, ToolError> {
    let is_error = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
    let structured = result.get("structuredContent").filter(|v| !v.is_null()).cloned();
    if let Some(validator) = output_schema
        && !is_error
    {
        let Some(value) = &structured else {
            return Err(mismatch(
                server,
                tool,
                "",
                "it has an outputSchema but sent no structuredContent".into(),
            ));
        };
        if let Err(e) = validator.validate(value) {
            let path = e.instance_path().to_string();
            return Err(mismatch(server, tool, &path, e.to_string()));
        }
    }
    let mut parts: Vec<String> = Vec::new();
    let mut blocks = Vec::new();
    for block in result.get("content").and_then(Value::as_array).into_iter().flatten() {
        match block.get("type").and_then(Value::as_str) {
            // Servers send the structured content again as text for older clients: the model
            // gets it once, as the structured value.
            Some("text") if structured.as_ref().is_some_and(|s| repeats(block, s)) => {}
            Some("image" | "audio") if block.get("data").is_some_and(Value::is_string) => blocks.push(block.clone()),
            _ => parts.push(describe_content(block, server)),
        }
    }
    let content = if parts.is_empty() && structured.is_none() && blocks.is_empty() {
        "(the tool returned no content)".to_string()
    } else {
        parts.join("\n")
    };
    Ok(ToolOutput {
        is_error,
        structured,
        blocks,
        ..ToolOutput::text(content)
    })
}

/// Whether a text block only holds `structured` serialized (in any formatting).
fn repeats(block: &Value, structured: &Value) -> bool {
    block
        .get("text")
        .and_then(Value::as_str)
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
        .is_some_and(|v| &v == structured)
}

fn mismatch(server: &str, tool: &str, path: &str, why: String) -> ToolError {
    let at = if path.is_empty() { String::new() } else { format!(" at `{path}`") };
    // The schema's complaint quotes the server's value: its words, wrapped as they are in
    // any other answer.
    ToolError {
        category: ErrorCategory::ToolError,
        message: format!(
            "MCP server `{server}` answered `{tool}` with structured content that does not match the tool's outputSchema{at}. The call ran; its result was not used. What the check found:\n{}",
            crate::output::wrap_external(&format!("mcp:{server}"), &why)
        ),
        field: Some(if path.is_empty() {
            "structuredContent".into()
        } else {
            path.trim_start_matches('/').to_string()
        }),
        started: true,
    }
}

/// One content block as text: text as it is; images, audio, resources described, resource
/// links listed with the call that reads them from `server`.
pub fn describe_content(block: &Value, server: &str) -> String {
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
            "[resource link: {} {}{}; read it with read_mcp_resource {}]",
            field("uri"),
            field("name"),
            if field("description").is_empty() {
                String::new()
            } else {
                format!(" — {}", field("description"))
            },
            serde_json::json!({"server": server, "uri": field("uri")})
        ),
        other => format!("[{} content block]", if other.is_empty() { "unknown" } else { other }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_block_kind_is_kept_passed_on_or_described() {
        let r = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "mimeType": "application/zip", "blob": "UEsDBA=="}},
            {"type": "resource_link", "uri": "file:///c", "name": "c", "description": "a file"}
        ], "structuredContent": {"n": 1}, "isError": true});
        let out = map_call_result(&r, "srv", "t", None).unwrap();
        assert!(out.is_error);
        assert_eq!(
            out.content,
            "hello\n[resource file:///a.txt]\ninside\n\
             [resource file:///b.bin: application/zip, about 6 bytes of binary data; not shown as text]\n\
             [resource link: file:///c c — a file; read it with read_mcp_resource {\"server\":\"srv\",\"uri\":\"file:///c\"}]"
        );
        assert_eq!(out.structured, Some(json!({"n": 1})));
        assert_eq!(
            out.blocks,
            vec![json!({"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="})]
        );
    }

    #[test]
    fn structured_content_is_given_once() {
        let out = map_call_result(
            &json!({"content": [{"type": "text", "text": "{\n  \"a\": 1\n}"}, {"type": "text", "text": "done"}], "structuredContent": {"a": 1}}),
            "srv",
            "t",
            None,
        )
        .unwrap();
        assert_eq!(out.content, "done");
        assert_eq!(out.structured, Some(json!({"a": 1})));
        assert!(!out.is_error);
    }

    #[test]
    fn the_output_schema_is_enforced_naming_the_path() {
        let schema = jsonschema::validator_for(
            &json!({"type": "object", "properties": {"temperature": {"type": "number"}}, "required": ["temperature"]}),
        )
        .unwrap();
        let ok = map_call_result(
            &json!({"content": [], "structuredContent": {"temperature": 3}}),
            "w",
            "weather",
            Some(&schema),
        );
        assert!(ok.is_ok());
        let e = map_call_result(
            &json!({"content": [], "structuredContent": {"temperature": "hot"}}),
            "w",
            "weather",
            Some(&schema),
        )
        .unwrap_err();
        assert_eq!(e.category, ErrorCategory::ToolError);
        assert_eq!(e.field.as_deref(), Some("temperature"));
        assert!(
            e.message.contains("does not match the tool's outputSchema at `/temperature`"),
            "{}",
            e.message
        );
        let e = map_call_result(&json!({"content": [{"type": "text", "text": "hi"}]}), "w", "weather", Some(&schema)).unwrap_err();
        assert!(e.message.contains("sent no structuredContent"), "{}", e.message);
        // An error result need not match.
        assert!(map_call_result(&json!({"content": [], "isError": true}), "w", "weather", Some(&schema)).is_ok());
    }
}
