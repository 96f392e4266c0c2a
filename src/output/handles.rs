//! Structured results too large to read whole: a structural summary the model reads, and the
//! handle under which the value is kept.
//!
//! A byte cut of JSON leaves the model an unbalanced prefix that says neither how big the value
//! is nor where things are. The summary gives the shape instead (the top-level keys, each
//! value's type, array lengths, the first items), and the handle lets a later call pass a
//! part of the value as an argument (`{"$handle": "h3", "path": "/items/0/id"}`) without the
//! model copying it, or read it back with `retrieve_tool_result`.

use serde_json::Value;

/// How a summary is bounded.
#[derive(Debug, Clone, Copy)]
pub struct SummaryLimits {
    /// Longest summary, in bytes.
    pub max_bytes: usize,
    /// Items of an array (and keys of a nested object) shown.
    pub preview_items: usize,
}

/// A JSON pointer token: `~` and `/` escaped (RFC 6901).
pub fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `text` cut to `max` bytes on a character boundary, with `…` when cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The shape of a value in a few words: `object {id: number, name: string, +3 keys}`,
/// `array of 12 × object {…}`, `string (40 chars)`.
fn shape(v: &Value, limits: SummaryLimits, depth: usize) -> String {
    match v {
        Value::Array(items) => match items.first() {
            None => "empty array".to_string(),
            Some(first) if depth > 0 => {
                let same = items.iter().all(|i| type_name(i) == type_name(first));
                if same {
                    format!("array of {} × {}", items.len(), shape(first, limits, depth - 1))
                } else {
                    format!("array of {} (mixed types)", items.len())
                }
            }
            Some(_) => format!("array of {}", items.len()),
        },
        Value::Object(map) if depth > 0 => {
            let mut keys: Vec<String> = map
                .iter()
                .take(limits.preview_items.max(1) * 2)
                .map(|(k, v)| format!("{k}: {}", type_name(v)))
                .collect();
            let more = map.len().saturating_sub(keys.len());
            if more > 0 {
                keys.push(format!("+{more} keys"));
            }
            format!("object {{{}}}", keys.join(", "))
        }
        Value::Object(map) => format!("object with {} keys", map.len()),
        Value::String(s) if s.chars().count() > 60 => format!("string ({} chars)", s.chars().count()),
        other => other.to_string(),
    }
}

/// One value on one line: its shape, and for arrays its first items, compact and cut.
fn line_for(v: &Value, limits: SummaryLimits) -> String {
    let preview = |v: &Value| cut(&v.to_string(), 160);
    match v {
        Value::Array(items) if !items.is_empty() => {
            let first: Vec<String> = items.iter().take(limits.preview_items).map(preview).collect();
            format!("{}; first {}: {}", shape(v, limits, 2), first.len(), first.join(", "))
        }
        Value::Object(_) => format!("{}: {}", shape(v, limits, 1), preview(v)),
        Value::String(s) if s.chars().count() > 60 => format!("{} {}", shape(v, limits, 0), preview(v)),
        other => shape(other, limits, 0),
    }
}

/// A human-readable size: `812 bytes`, `14.2 KB`, `2.4 MB`.
pub fn size_text(bytes: usize) -> String {
    match bytes {
        b if b < 1024 => format!("{b} bytes"),
        b if b < 1024 * 1024 => format!("{:.1} KB", b as f64 / 1024.0),
        b => format!("{:.1} MB", b as f64 / (1024.0 * 1024.0)),
    }
}

/// The structural summary of `value` (whose JSON text is `bytes` long): its top-level shape,
/// then one line per top-level key (or the first items of a top-level array), within
/// `limits.max_bytes`.
pub fn summarize(value: &Value, bytes: usize, limits: SummaryLimits) -> String {
    let mut out = format!("[JSON {}, {}]", shape(value, limits, 2), size_text(bytes));
    let lines: Vec<String> = match value {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| format!("  {}: {}", Value::String(k.clone()), line_for(v, limits)))
            .collect(),
        Value::Array(items) => items
            .iter()
            .take(limits.preview_items)
            .enumerate()
            .map(|(i, v)| format!("  [{i}]: {}", line_for(v, limits)))
            .collect(),
        _ => Vec::new(),
    };
    let total = lines.len();
    for (shown, line) in lines.into_iter().enumerate() {
        let rest = total - shown;
        let tail = format!("\n  … {rest} more");
        if out.len() + 1 + line.len() + tail.len() > limits.max_bytes {
            out.push_str(&tail);
            return out;
        }
        out.push('\n');
        out.push_str(&line);
    }
    out
}

/// A pointer to the first scalar inside `value` (following the first key or item at each
/// level), as an example that works: `/items/0/id`.
pub fn example_pointer(value: &Value) -> String {
    let mut pointer = String::new();
    let mut v = value;
    for _ in 0..6 {
        match v {
            Value::Object(map) => match map.iter().next() {
                Some((k, next)) => {
                    pointer.push('/');
                    pointer.push_str(&pointer_token(k));
                    v = next;
                }
                None => break,
            },
            Value::Array(items) => match items.first() {
                Some(next) => {
                    pointer.push_str("/0");
                    v = next;
                }
                None => break,
            },
            _ => break,
        }
    }
    pointer
}

/// The line that tells the model what the handle is and how to use it.
pub fn handle_marker(handle: &str, bytes: usize, example: &str) -> String {
    format!(
        "[handle {handle}: {} JSON; pass {{\"$handle\": \"{handle}\", \"path\": \"{example}\"}} as an argument to use a part of it, or retrieve it with retrieve_tool_result ref={handle} (path, lines or bytes)]",
        size_text(bytes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limits() -> SummaryLimits {
        SummaryLimits {
            max_bytes: 2000,
            preview_items: 2,
        }
    }

    #[test]
    fn an_object_is_summarized_by_its_keys() {
        let items: Vec<Value> = (0..500)
            .map(|i| json!({"id": i, "name": format!("item {i}"), "tags": ["a", "b"]}))
            .collect();
        let v = json!({"items": items, "total": 500, "cursor": "x".repeat(100), "meta": {"page": 1, "of": 9}});
        let text = v.to_string();
        let s = summarize(&v, text.len(), limits());
        assert!(s.starts_with("[JSON object {"), "{s}");
        assert!(s.contains(&size_text(text.len())), "{s}");
        assert!(
            s.contains("\"items\": array of 500 × object {id: number, name: string, tags: array}; first 2: {\"id\":0,"),
            "{s}"
        );
        assert!(s.contains("\"total\": 500"), "{s}");
        assert!(s.contains("\"cursor\": string (100 chars) \"xxx"), "{s}");
        assert!(s.contains("\"meta\": object {of: number, page: number}"), "{s}");
        assert!(s.len() < 2000);
        assert_eq!(example_pointer(&v), "/cursor");
    }

    #[test]
    fn a_top_level_array_shows_its_first_items_and_the_summary_stays_bounded() {
        let v = Value::Array((0..10_000).map(|i| json!([i, i + 1])).collect());
        let s = summarize(&v, 123_456, limits());
        assert!(s.starts_with("[JSON array of 10000 × array of 2 × 0, 120.6 KB]"), "{s}");
        assert!(s.contains("  [0]: array of 2 × 0; first 2: 0, 1") && s.contains("  [1]:"), "{s}");
        let keys: serde_json::Map<String, Value> = (0..1000).map(|i| (format!("key{i}"), json!(i))).collect();
        let s = summarize(
            &Value::Object(keys),
            9000,
            SummaryLimits {
                max_bytes: 300,
                preview_items: 3,
            },
        );
        assert!(s.len() <= 300 + 20, "{}", s.len());
        assert!(s.ends_with("more"), "{s}");
    }

    #[test]
    fn pointers_escape_and_markers_name_the_handle() {
        let v = json!({"a/b": [{"~c": true}]});
        assert_eq!(example_pointer(&v), "/a~1b/0/~0c");
        assert_eq!(v.pointer(&example_pointer(&v)), Some(&json!(true)));
        let m = handle_marker("h3", 2_500_000, "/items/0/id");
        assert!(
            m.starts_with("[handle h3: 2.4 MB JSON; pass {\"$handle\": \"h3\", \"path\": \"/items/0/id\"}"),
            "{m}"
        );
        assert!(m.contains("retrieve_tool_result ref=h3"), "{m}");
    }
}
