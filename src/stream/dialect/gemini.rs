//! Gemini / Vertex `streamGenerateContent?alt=sse`.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{Decoder, bad_frame};
use crate::stream::event::{StopReason, StreamEvent};
use crate::stream::sse::SseEvent;

/// Decodes Gemini chunks. A `functionCall` part with a `name` starts a call; its `args` come
/// whole, or (Vertex streamed arguments) as `partialArgs` pieces addressed by JSON path,
/// string pieces appended to each other. An empty `functionCall: {}` ends the call; a stream
/// that omits it ends the call at `finishReason`. Gemini gives no ids: calls get positional
/// ids (`call_<n>`), unique within the response.
#[derive(Debug, Default)]
pub struct GeminiDecoder {
    started: bool,
    next_slot: usize,
    /// The call being built: slot and arguments so far.
    open: Option<(usize, Value)>,
    any_call: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk {
    #[serde(default)]
    candidates: Vec<Candidate>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Content {
    #[serde(default)]
    parts: Vec<Part>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thought: bool,
    #[serde(default)]
    function_call: Option<FunctionCall>,
    #[serde(default)]
    thought_signature: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FunctionCall {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    args: Option<Value>,
    #[serde(default)]
    partial_args: Vec<PartialArg>,
    #[serde(default)]
    will_continue: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PartialArg {
    json_path: String,
    #[serde(default)]
    string_value: Option<String>,
    #[serde(default)]
    number_value: Option<serde_json::Number>,
    #[serde(default)]
    bool_value: Option<bool>,
    #[serde(default)]
    null_value: Option<Value>,
}

fn stop_reason(s: &str, any_call: bool) -> StopReason {
    match s {
        "STOP" if any_call => StopReason::ToolUse,
        "STOP" => StopReason::EndTurn,
        "MAX_TOKENS" => StopReason::MaxTokens,
        _ => StopReason::Other,
    }
}

impl GeminiDecoder {
    fn close(&mut self, out: &mut Vec<StreamEvent>) {
        if let Some((slot, args)) = self.open.take() {
            out.push(StreamEvent::CallArgsFull {
                slot,
                arguments: args.to_string(),
            });
            out.push(StreamEvent::CallEnd { slot });
        }
    }

    fn function_call(&mut self, call: FunctionCall, signature: Option<String>, out: &mut Vec<StreamEvent>) {
        if let Some(name) = call.name {
            self.close(out);
            let slot = self.next_slot;
            self.next_slot += 1;
            self.any_call = true;
            let id = call.id.filter(|i| !i.is_empty()).unwrap_or_else(|| format!("call_{slot}"));
            out.push(StreamEvent::CallStart {
                slot,
                id,
                name,
                thought_signature: signature,
            });
            self.open = Some((slot, call.args.unwrap_or_else(|| Value::Object(Map::new()))));
        }
        let Some((_, args)) = self.open.as_mut() else {
            return;
        };
        for piece in call.partial_args {
            let value = if let Some(s) = piece.string_value {
                PieceValue::Str(s)
            } else if let Some(n) = piece.number_value {
                PieceValue::Set(Value::Number(n))
            } else if let Some(b) = piece.bool_value {
                PieceValue::Set(Value::Bool(b))
            } else if piece.null_value.is_some() {
                PieceValue::Set(Value::Null)
            } else {
                continue;
            };
            if let Err(why) = apply_path(args, &piece.json_path, value) {
                out.push(StreamEvent::Error(format!(
                    "partial argument at `{}` ignored: {why}",
                    piece.json_path
                )));
            }
        }
    }
}

enum PieceValue {
    Str(String),
    Set(Value),
}

/// How deep a path may reach: serde_json's own nesting limit, so the arguments built here can
/// be printed and parsed again (a deeper value would also overflow the stack when dropped).
const MAX_PATH_DEPTH: usize = 128;

/// Applies one partial argument at a JSONPath like `$.recipe.ingredients[0].name`,
/// creating objects and arrays on the way; string pieces append to the string there.
///
/// An index may run past an array's end by at most the path's own length, so the elements a
/// piece creates are bounded by the bytes it took to send it (`[4000000000]` would otherwise
/// allocate gigabytes).
fn apply_path(root: &mut Value, path: &str, value: PieceValue) -> Result<(), String> {
    let mut cur = root;
    let rest = path.strip_prefix('$').unwrap_or(path);
    let mut segments = Vec::new();
    let mut i = 0;
    let bytes = rest.as_bytes();
    while i < bytes.len() {
        match bytes[i] {
            b'.' => {
                let start = i + 1;
                let mut end = start;
                while end < bytes.len() && bytes[end] != b'.' && bytes[end] != b'[' {
                    end += 1;
                }
                segments.push(Seg::Key(rest[start..end].to_string()));
                i = end;
            }
            b'[' => {
                let close = rest[i..].find(']').map(|c| i + c).unwrap_or(bytes.len());
                let inner = &rest[i + 1..close];
                match inner.parse::<usize>() {
                    Ok(n) => segments.push(Seg::Index(n)),
                    Err(_) => segments.push(Seg::Key(inner.trim_matches(|c| c == '\'' || c == '"').to_string())),
                }
                i = close + 1;
            }
            _ => i += 1,
        }
    }
    if segments.len() > MAX_PATH_DEPTH {
        return Err(format!("deeper than {MAX_PATH_DEPTH} levels"));
    }
    for seg in segments {
        cur = match seg {
            Seg::Key(k) => {
                if !cur.is_object() {
                    *cur = Value::Object(Map::new());
                }
                let Value::Object(map) = cur else {
                    return Err("not an object".into());
                };
                map.entry(k).or_insert(Value::Null)
            }
            Seg::Index(n) => {
                if !cur.is_array() {
                    *cur = Value::Array(Vec::new());
                }
                let Value::Array(items) = cur else {
                    return Err("not an array".into());
                };
                if n > items.len().saturating_add(path.len()) {
                    return Err(format!("index {n} is far past the end of its array ({} items)", items.len()));
                }
                if items.len() <= n {
                    items.resize(n + 1, Value::Null);
                }
                &mut items[n]
            }
        };
    }
    match value {
        PieceValue::Str(s) => match cur {
            Value::String(existing) => existing.push_str(&s),
            other => *other = Value::String(s),
        },
        PieceValue::Set(v) => *cur = v,
    }
    Ok(())
}

enum Seg {
    Key(String),
    Index(usize),
}

impl Decoder for GeminiDecoder {
    fn decode(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) {
        if !self.started {
            self.started = true;
            out.push(StreamEvent::MessageStart);
        }
        let chunk: Chunk = match serde_json::from_str(&event.data) {
            Ok(c) => c,
            Err(e) => return out.push(bad_frame("gemini", event, &e)),
        };
        if let Some(err) = chunk.error {
            out.push(StreamEvent::Error(format!("provider error: {err}")));
            return;
        }
        for candidate in chunk.candidates.into_iter().take(1) {
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                if let Some(call) = part.function_call {
                    let is_empty_marker = call.name.is_none() && call.partial_args.is_empty() && call.args.is_none();
                    let continues = call.will_continue;
                    let whole = call.name.is_some() && !continues;
                    self.function_call(call, part.thought_signature, out);
                    if (is_empty_marker && !continues) || whole {
                        self.close(out);
                    }
                } else if let Some(text) = part.text
                    && !part.thought
                    && !text.is_empty()
                {
                    out.push(StreamEvent::Text(text));
                }
            }
            if let Some(reason) = candidate.finish_reason {
                self.close(out);
                out.push(StreamEvent::Stop(stop_reason(&reason, self.any_call)));
            }
        }
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        self.close(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_build_nested_values() {
        let mut v = json!({});
        apply_path(&mut v, "$.recipe.ingredients[1].name", PieceValue::Str("Beef".into())).unwrap();
        apply_path(&mut v, "$.recipe.ingredients[1].name", PieceValue::Str(" mince".into())).unwrap();
        apply_path(&mut v, "$.recipe.ingredients[0].amount", PieceValue::Set(json!(2))).unwrap();
        apply_path(&mut v, "$.ok", PieceValue::Set(json!(true))).unwrap();
        assert_eq!(
            v,
            json!({"ok": true, "recipe": {"ingredients": [{"amount": 2}, {"name": "Beef mince"}]}})
        );
    }

    #[test]
    fn hostile_paths_are_refused_not_allocated() {
        let mut v = json!({});
        assert!(apply_path(&mut v, "$.a[4000000000]", PieceValue::Set(json!(1))).is_err());
        let deep = format!("${}", ".a".repeat(100_000));
        assert!(apply_path(&mut v, &deep, PieceValue::Set(json!(1))).is_err());
        assert_eq!(v, json!({"a": []}));
    }
}
