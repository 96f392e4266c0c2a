//! `$handle` arguments: a part of a structured result kept under a handle, passed to a later
//! call of the same session as `{"$handle": "h3", "path": "/items/0/id"}`.
//!
//! The value is put in place before validation and approval, so the tool's schema, the
//! approval rules and the host all see the real input, never the reference.

use serde_json::Value;

use crate::output::handles::pointer_token;
use crate::tool::{SessionServices, ToolError};

/// Whether `v` is a handle reference: an object with a string `$handle` and, besides it, at
/// most a string `path`.
fn reference(v: &Value) -> Option<(&str, &str)> {
    let map = v.as_object()?;
    let handle = map.get("$handle")?.as_str()?;
    let path = match map.get("path") {
        None => "",
        Some(p) => p.as_str()?,
    };
    let expected = 1 + usize::from(map.contains_key("path"));
    (map.len() == expected).then_some((handle, path))
}

/// Replaces every handle reference inside `input` by the value it points at, loading each
/// handle once. Returns whether anything was replaced.
///
/// # Errors
/// An `invalid_input` error naming the argument (as a JSON pointer into the arguments, without
/// the leading slash) when a handle is unknown, expired or another session's, when its path is
/// not a JSON pointer, or when the pointer finds nothing.
pub fn substitute_handles(input: &mut Value, services: &dyn SessionServices) -> Result<bool, ToolError> {
    let mut loaded: Vec<(String, Value)> = Vec::new();
    let mut replaced = false;
    walk(input, &mut String::new(), services, &mut loaded, &mut replaced)?;
    Ok(replaced)
}

fn walk(
    v: &mut Value,
    at: &mut String,
    services: &dyn SessionServices,
    loaded: &mut Vec<(String, Value)>,
    replaced: &mut bool,
) -> Result<(), ToolError> {
    if let Some((handle, path)) = reference(v) {
        let field = if at.is_empty() { "(arguments)".to_string() } else { at.clone() };
        let found = resolve(handle, path, &field, services, loaded)?;
        *v = found;
        *replaced = true;
        return Ok(());
    }
    let len = at.len();
    match v {
        Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                if !at.is_empty() {
                    at.push('/');
                }
                at.push_str(&pointer_token(k));
                walk(child, at, services, loaded, replaced)?;
                at.truncate(len);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter_mut().enumerate() {
                if !at.is_empty() {
                    at.push('/');
                }
                at.push_str(&i.to_string());
                walk(child, at, services, loaded, replaced)?;
                at.truncate(len);
            }
        }
        _ => {}
    }
    Ok(())
}

fn resolve(
    handle: &str,
    path: &str,
    field: &str,
    services: &dyn SessionServices,
    loaded: &mut Vec<(String, Value)>,
) -> Result<Value, ToolError> {
    if !crate::output::is_handle(handle) {
        return Err(ToolError::invalid(
            field,
            format!("`{field}`: `{handle}` is not a handle (handles look like h1, h2, … and come from a result's [handle …] line)"),
        ));
    }
    if !path.is_empty() && !path.starts_with('/') {
        return Err(ToolError::invalid(
            field,
            format!(
                "`{field}`: path `{path}` of handle `{handle}` is not a JSON pointer (it starts with `/`, like /items/0/id; \"\" is the whole value)"
            ),
        ));
    }
    if !loaded.iter().any(|(h, _)| h == handle) {
        let text = services
            .load_overflow(handle)
            .map_err(|e| ToolError::invalid(field, format!("`{field}`: {}", e.message.lines().next().unwrap_or(""))))?;
        let value = serde_json::from_str(&text)
            .map_err(|e| ToolError::invalid(field, format!("`{field}`: handle `{handle}` does not hold JSON ({e})")))?;
        loaded.push((handle.to_string(), value));
    }
    let value = loaded
        .iter()
        .find(|(h, _)| h == handle)
        .map(|(_, v)| v)
        .ok_or_else(|| ToolError::invalid(field, format!("`{field}`: handle `{handle}` could not be read")))?;
    value.pointer(path).cloned().ok_or_else(|| {
        ToolError::invalid(
            field,
            format!("`{field}`: handle `{handle}` has nothing at `{path}`; retrieve_tool_result ref={handle} shows what it holds"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::ErrorCategory;
    use serde_json::json;

    /// A session whose handle `h1` holds a small document.
    struct OneHandle;

    impl SessionServices for OneHandle {
        fn file_read_state(&self, _path: &std::path::Path) -> Option<std::time::SystemTime> {
            None
        }
        fn record_file_state(&self, _path: &std::path::Path, _modified: std::time::SystemTime) {}
        fn activate_tools(&self, _names: &[String]) {}
        fn search_index(&self) -> Option<std::sync::Arc<dyn crate::tool::ToolFinder>> {
            None
        }
        fn load_overflow(&self, id: &str) -> Result<String, ToolError> {
            match id {
                "h1" => Ok(r#"{"items": [{"id": 7, "tags": ["a"]}], "a/b": 1}"#.into()),
                "h2" => Ok("not json".into()),
                other => Err(ToolError::invalid("ref", format!("no saved output `{other}` in this session"))),
            }
        }
    }

    #[test]
    fn references_anywhere_in_the_arguments_are_replaced() {
        let mut input = json!({
            "id": {"$handle": "h1", "path": "/items/0/id"},
            "list": [1, {"$handle": "h1", "path": "/items/0/tags"}],
            "whole": {"$handle": "h1"},
            "escaped": {"$handle": "h1", "path": "/a~1b"},
            "plain": {"$handle": "h1", "other": 1}
        });
        assert!(substitute_handles(&mut input, &OneHandle).unwrap());
        assert_eq!(input["id"], json!(7));
        assert_eq!(input["list"], json!([1, ["a"]]));
        assert_eq!(input["whole"]["items"][0]["id"], json!(7));
        assert_eq!(input["escaped"], json!(1));
        assert_eq!(input["plain"], json!({"$handle": "h1", "other": 1}), "not a reference: left alone");
        let mut none = json!({"path": "a.txt"});
        assert!(!substitute_handles(&mut none, &OneHandle).unwrap());
    }

    #[test]
    fn a_bad_reference_is_invalid_input_naming_the_field() {
        for (input, field, says) in [
            (
                json!({"cfg": {"retries": {"$handle": "h9"}}}),
                "cfg/retries",
                "no saved output `h9`",
            ),
            (
                json!({"ids": [0, {"$handle": "h1", "path": "/items/5/id"}]}),
                "ids/1",
                "has nothing at `/items/5/id`",
            ),
            (json!({"x": {"$handle": "h1", "path": "items"}}), "x", "is not a JSON pointer"),
            (json!({"x": {"$handle": "1-2-3"}}), "x", "is not a handle"),
            (json!({"x": {"$handle": "h2"}}), "x", "does not hold JSON"),
        ] {
            let mut input = input;
            let e = substitute_handles(&mut input, &OneHandle).unwrap_err();
            assert_eq!(e.category, ErrorCategory::InvalidInput);
            assert_eq!(e.field.as_deref(), Some(field), "{}", e.message);
            assert!(e.message.contains(says), "{}", e.message);
        }
    }
}
