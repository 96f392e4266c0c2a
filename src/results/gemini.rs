//! Gemini: one user turn whose parts are a `functionResponse` per call.

use serde_json::{Map, Value, json};

use super::{SentNames, media};
use crate::event::ToolResult;

/// The user turn answering a round's calls.
pub(super) fn user_turn(results: &[ToolResult], names: &SentNames) -> Value {
    json!({"role": "user", "parts": results.iter().map(|r| part(r, names)).collect::<Vec<_>>()})
}

/// One `functionResponse` part: the result under `output`, or under `error` for an error (the
/// keys Gemini's documentation gives), named as the model wrote the call.
fn part(r: &ToolResult, names: &SentNames) -> Value {
    let mut response = Map::new();
    response.insert("name".into(), names.get(r.index, &r.tool_use_id).unwrap_or(&r.name).into());
    // Gemini gives most calls no id; toolslot then names them `call_<n>` and must not send
    // that invented id back as if the model had written it.
    if !invented_id(&r.tool_use_id) {
        response.insert("id".into(), r.tool_use_id.clone().into());
    }
    let key = if r.is_error { "error" } else { "output" };
    response.insert("response".into(), json!({ key: r.content }));
    let images = media::images(r);
    if !images.is_empty() {
        // Gemini 3 reads media returned by a function as inline parts of its response.
        let parts = images
            .iter()
            .map(|m| json!({"inlineData": {"mimeType": m.mime, "data": m.data}}))
            .collect();
        response.insert("parts".into(), Value::Array(parts));
    }
    json!({ "functionResponse": response })
}

/// Whether the id is one toolslot gave a call that came without one (`call_<n>`).
fn invented_id(id: &str) -> bool {
    id.strip_prefix("call_")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}
