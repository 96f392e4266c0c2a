//! Semantic-preserving cleaning of dirty tool schemas before they reach a model.
//!
//! MCP servers and extensions ship schemas written for validators, not for models: nullable
//! fields spelt as `anyOf: [X, {"type": "null"}]`, objects without `properties`, `required`
//! lists naming fields that were never declared. Providers reject some of these outright
//! (strict function calling) and models misread the rest. [`clean_schema`] rewrites them into
//! the plainest equivalent form for the target dialect.
//!
//! The cleaned schema is only what the model *sees*. Arguments are still validated against
//! the tool's own schema, so the one rule that loosens a schema (pruning `required` names that
//! have no property) never lets a call through that the tool would have refused.
//!
//! # Example
//! ```
//! use serde_json::json;
//! use toolslot::schema::{clean_schema, NullableStyle};
//! let dirty = json!({"type": "object", "properties": {
//!     "since": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}}});
//! let clean = clean_schema(&dirty, NullableStyle::TypeArray);
//! assert_eq!(clean["properties"]["since"], json!({"type": ["string", "null"], "default": null}));
//! ```

use serde_json::{Map, Value, json};

/// How the target dialect marks a field nullable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NullableStyle {
    /// JSON Schema type arrays, `"type": ["string", "null"]` (Anthropic, OpenAI).
    TypeArray,
    /// OpenAPI 3.0's `"nullable": true` (Gemini).
    NullableKeyword,
}

/// Returns the cleaned copy of `schema`; the input is not changed.
pub fn clean_schema(schema: &Value, style: NullableStyle) -> Value {
    let mut out = schema.clone();
    if let Value::Object(root) = &mut out {
        // `$schema` only names the draft; providers with strict schemas refuse it.
        root.remove("$schema");
    }
    clean_in_place(&mut out, style);
    out
}

fn clean_in_place(schema: &mut Value, style: NullableStyle) {
    let Value::Object(obj) = schema else { return };
    for key in ["anyOf", "oneOf"] {
        fold_nullable_union(obj, key, style);
    }
    if style == NullableStyle::NullableKeyword {
        type_array_to_keyword(obj);
    }
    let is_object = obj.get("type").is_some_and(|t| type_includes(t, "object"));
    if is_object && !obj.contains_key("properties") {
        obj.insert("properties".into(), json!({}));
    }
    prune_required(obj);
    for key in ["properties", "$defs", "definitions", "patternProperties"] {
        if let Some(Value::Object(children)) = obj.get_mut(key) {
            for child in children.values_mut() {
                clean_in_place(child, style);
            }
        }
    }
    for key in ["items", "additionalProperties", "not", "contains", "additionalItems"] {
        if let Some(child) = obj.get_mut(key) {
            clean_in_place(child, style);
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems", "items"] {
        if let Some(Value::Array(children)) = obj.get_mut(key) {
            for child in children {
                clean_in_place(child, style);
            }
        }
    }
}

fn type_includes(t: &Value, name: &str) -> bool {
    match t {
        Value::String(s) => s == name,
        Value::Array(items) => items.iter().any(|i| i == name),
        _ => false,
    }
}

fn is_null_schema(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|o| o.len() == 1 && o.get("type").is_some_and(|t| t == "null"))
}

/// `anyOf: [X, {"type":"null"}]` (either order) becomes X made nullable. Only a union of
/// exactly one schema and null is folded; anything wider keeps its union, since folding it
/// would change what validates.
fn fold_nullable_union(obj: &mut Map<String, Value>, key: &str, style: NullableStyle) {
    let Some(Value::Array(members)) = obj.get(key) else {
        return;
    };
    if members.len() != 2 {
        return;
    }
    let Some(null_at) = members.iter().position(is_null_schema) else {
        return;
    };
    let Value::Object(mut inner) = members[1 - null_at].clone() else {
        return;
    };
    let made_nullable = match style {
        NullableStyle::TypeArray => match inner.get("type").cloned() {
            Some(Value::String(t)) => {
                inner.insert("type".into(), json!([t, "null"]));
                true
            }
            Some(Value::Array(mut ts)) => {
                if !ts.iter().any(|t| t == "null") {
                    ts.push("null".into());
                }
                inner.insert("type".into(), Value::Array(ts));
                true
            }
            // A `$ref` or a typeless schema cannot carry a type array without changing what
            // it means; leave the union as it was.
            _ => false,
        },
        NullableStyle::NullableKeyword => {
            inner.insert("nullable".into(), Value::Bool(true));
            true
        }
    };
    if !made_nullable {
        return;
    }
    // An enum would still refuse null, so null joins the enum too.
    if let Some(Value::Array(values)) = inner.get_mut("enum")
        && !values.iter().any(Value::is_null)
    {
        values.push(Value::Null);
    }
    obj.remove(key);
    for (k, v) in inner {
        // The outer schema's own keys (description, default, title) win over the member's.
        obj.entry(k).or_insert(v);
    }
}

fn type_array_to_keyword(obj: &mut Map<String, Value>) {
    let Some(Value::Array(ts)) = obj.get("type") else {
        return;
    };
    let non_null: Vec<Value> = ts.iter().filter(|t| *t != "null").cloned().collect();
    if non_null.len() == 1 && non_null.len() < ts.len() {
        obj.insert("type".into(), non_null[0].clone());
        obj.insert("nullable".into(), Value::Bool(true));
    }
}

/// Drops `required` names that have no property: a model cannot fill a field whose type it
/// was never told, and strict providers reject the schema. Only done when `properties` is
/// declared, so a schema that leaves its properties open keeps its requirements.
fn prune_required(obj: &mut Map<String, Value>) {
    let Some(Value::Object(props)) = obj.get("properties") else {
        return;
    };
    let declared: Vec<String> = props.keys().cloned().collect();
    if let Some(Value::Array(required)) = obj.get_mut("required") {
        required.retain(|r| r.as_str().is_some_and(|name| declared.iter().any(|d| d == name)));
        if required.is_empty() {
            obj.remove("required");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use NullableStyle::*;

    #[track_caller]
    fn check(style: NullableStyle, input: Value, expected: Value) {
        assert_eq!(clean_schema(&input, style), expected);
    }

    #[test]
    fn cleaning_table() {
        let cases = vec![
            // git's optional string: anyOf with null and default null.
            (
                TypeArray,
                json!({"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Since"}),
                json!({"type": ["string", "null"], "default": null, "title": "Since"}),
            ),
            // Null first, oneOf spelling.
            (
                TypeArray,
                json!({"oneOf": [{"type": "null"}, {"type": "integer", "minimum": 1}]}),
                json!({"type": ["integer", "null"], "minimum": 1}),
            ),
            // Gemini's dialect.
            (
                NullableKeyword,
                json!({"anyOf": [{"type": "string"}, {"type": "null"}]}),
                json!({"type": "string", "nullable": true}),
            ),
            (
                NullableKeyword,
                json!({"type": ["string", "null"]}),
                json!({"type": "string", "nullable": true}),
            ),
            // Enum gains null so null still validates.
            (
                TypeArray,
                json!({"anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "null"}]}),
                json!({"type": ["string", "null"], "enum": ["a", "b", null]}),
            ),
            // A $ref member is not folded (a type array would change its meaning).
            (
                TypeArray,
                json!({"anyOf": [{"$ref": "#/$defs/T"}, {"type": "null"}]}),
                json!({"anyOf": [{"$ref": "#/$defs/T"}, {"type": "null"}]}),
            ),
            // Wider unions stay.
            (
                TypeArray,
                json!({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}),
                json!({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}),
            ),
            // Bare object gets properties; $schema goes.
            (
                TypeArray,
                json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}),
                json!({"type": "object", "properties": {}}),
            ),
            // Required naming an absent property is pruned; present ones stay.
            (
                TypeArray,
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "ghost"]}),
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}),
            ),
            (
                TypeArray,
                json!({"type": "object", "properties": {}, "required": ["ghost"]}),
                json!({"type": "object", "properties": {}}),
            ),
            // Nested: properties, items, $defs, allOf.
            (
                TypeArray,
                json!({"type": "object", "properties": {
                    "edits": {"type": "array", "items": {"type": "object", "required": ["x"]}},
                    "opt": {"anyOf": [{"type": "boolean"}, {"type": "null"}]}},
                    "$defs": {"T": {"type": "object"}},
                    "allOf": [{"type": "object"}]}),
                json!({"type": "object", "properties": {
                    "edits": {"type": "array", "items": {"type": "object", "properties": {}}},
                    "opt": {"type": ["boolean", "null"]}},
                    "$defs": {"T": {"type": "object", "properties": {}}},
                    "allOf": [{"type": "object", "properties": {}}]}),
            ),
            // Already clean schemas pass unchanged.
            (
                TypeArray,
                json!({"type": "object", "properties": {"path": {"type": "string", "format": "uri"}}, "required": ["path"], "additionalProperties": false}),
                json!({"type": "object", "properties": {"path": {"type": "string", "format": "uri"}}, "required": ["path"], "additionalProperties": false}),
            ),
            // Type arrays in the TypeArray dialect are left alone.
            (TypeArray, json!({"type": ["string", "null"]}), json!({"type": ["string", "null"]})),
        ];
        for (style, input, expected) in cases {
            check(style, input, expected);
        }
    }

    #[test]
    fn cleaning_keeps_validity_of_consistent_schemas() {
        let dirty = json!({"type": "object", "properties": {
            "since": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
            "kind": {"oneOf": [{"type": "string", "enum": ["a"]}, {"type": "null"}]}}});
        let clean = clean_schema(&dirty, TypeArray);
        let before = jsonschema::validator_for(&dirty).unwrap();
        let after = jsonschema::validator_for(&clean).unwrap();
        for input in [
            json!({}),
            json!({"since": null}),
            json!({"since": "x"}),
            json!({"since": 3}),
            json!({"kind": "a"}),
            json!({"kind": null}),
            json!({"kind": "b"}),
        ] {
            assert_eq!(before.is_valid(&input), after.is_valid(&input), "{input}");
        }
    }
}
