//! Resolving a call's tool name, and teaching the model when it cannot be resolved.

use serde_json::{Value, json};

use crate::notice::{Notice, NoticeKind};
use crate::registry::{Catalog, Registry};
use crate::repair::names::{NameLimits, NameResolution};
use crate::tool::{ErrorCategory, ToolError};

/// Field names models commonly use for what tools here call otherwise (sent → schema name).
/// Used only to teach: a deferred tool's refusal maps the fields the model sent, so its next
/// call can be right at once. A mapping is offered only when the schema has the target
/// field and not the sent one.
pub const COMMON_FIELD_ALIASES: &[(&str, &str)] = &[
    ("old_string", "search"),
    ("new_string", "replace"),
    ("old_str", "search"),
    ("new_str", "replace"),
    ("file_path", "path"),
    ("filepath", "path"),
    ("filename", "path"),
    ("file", "path"),
    ("cmd", "command"),
    ("text", "content"),
    ("q", "query"),
];

/// A resolved call: the catalog name and, when the ladder was used, a `name_repaired` notice.
pub type Resolved = (String, Option<Notice>);

/// Resolves `called` for call `index` against the session's catalog.
///
/// # Errors
/// An `unknown_tool` [`ToolError`] (and its notice) when no visible tool matches: either a
/// "Did you mean" list, or, for a deferred tool, how to load it and how to call it.
pub fn resolve_call(
    registry: &Registry,
    catalog: &Catalog,
    index: usize,
    called: &str,
    input: &Value,
    limits: NameLimits,
) -> Result<Resolved, (ToolError, Notice)> {
    // The common case first: a name the model may call, written exactly.
    if catalog.contains(called) {
        return Ok((called.to_string(), None));
    }
    let names = registry.name_index();
    let visible = |n: &str| catalog.contains(n);
    let deferred = |n: &str| !catalog.contains(n);
    match names.resolve(called, limits, &visible) {
        NameResolution::Exact(name) => return Ok((name, None)),
        NameResolution::Repaired { name, step } => {
            let notice = Notice::for_call(
                NoticeKind::NameRepaired,
                index,
                format!("tool name `{called}` resolved to `{name}` ({step})"),
            );
            return Ok((name, Some(notice)));
        }
        NameResolution::Unknown { .. } => {}
    }
    if let NameResolution::Exact(name) | NameResolution::Repaired { name, .. } = names.resolve(called, limits, &deferred)
        && let Some(tool) = registry.get(&name)
    {
        let error = deferred_error(&name, &tool.model_schema, input, tool.spec.field_aliases());
        let notice = Notice::for_call(
            NoticeKind::UnknownTool,
            index,
            format!("`{called}` is deferred; the model was told to load it"),
        );
        return Err((error, notice));
    }
    let suggestions = match names.resolve(called, limits, &visible) {
        NameResolution::Unknown { suggestions } => suggestions,
        _ => Vec::new(),
    };
    let mut message = format!("Unknown tool `{called}`.");
    if !suggestions.is_empty() {
        message.push_str(&format!(" Did you mean: {}?", suggestions.join(", ")));
    }
    if registry.has_deferred() {
        message.push_str(" More tools can be loaded with tool_search: call it with a short description of what you need.");
    }
    let notice = Notice::for_call(NoticeKind::UnknownTool, index, format!("unknown tool `{called}`"));
    Err((ToolError::refused(ErrorCategory::UnknownTool, message), notice))
}

/// The refusal of a call to a deferred tool: how to load it, `"retry_required": true`, the
/// fields it expects with their types, the fields received, and renamed fields mapped.
fn deferred_error(name: &str, schema: &Value, input: &Value, aliases: &[(&'static str, &'static str)]) -> ToolError {
    let props = schema.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let expected: serde_json::Map<String, Value> = props
        .map(|p| {
            p.iter()
                .map(|(k, v)| {
                    let ty = v.get("type").cloned().unwrap_or(json!("any"));
                    (k.clone(), json!({"type": ty, "required": required.contains(&k.as_str())}))
                })
                .collect()
        })
        .unwrap_or_default();
    let received: Vec<String> = input.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default();
    let renamed: serde_json::Map<String, Value> = received
        .iter()
        .filter(|r| !expected.contains_key(*r))
        .filter_map(|r| {
            aliases
                .iter()
                .chain(COMMON_FIELD_ALIASES)
                .find(|(from, to)| from == r && expected.contains_key(*to))
                .map(|(from, to)| (from.to_string(), json!(to)))
        })
        .collect();
    let detail = json!({
        "retry_required": true,
        "load_with": {"tool": "tool_search", "input": {"query": name}},
        "expected_fields": expected,
        "received_fields": received,
        "renamed_fields": renamed,
    });
    ToolError::refused(
        ErrorCategory::UnknownTool,
        format!(
            "Tool `{name}` exists but is not loaded, so nothing was run. Load it with tool_search \
             (query: \"{name}\"), then call it again with the expected fields.\n{detail}"
        ),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::Config;
    use crate::registry::RegistryBuilder;
    use crate::tool::{Capability, Tool, ToolContext, ToolFuture, ToolOutput, ToolSpec};

    struct Editor(bool);
    impl Tool for Editor {
        fn name(&self) -> &str {
            if self.0 { "remote_edit" } else { "read_file" }
        }
        fn description(&self) -> &str {
            "edit"
        }
        fn input_schema(&self) -> Value {
            json!({"type": "object", "properties": {"path": {"type": "string"}, "search": {"type": "string"}, "replace": {"type": "string"}}, "required": ["path", "search"]})
        }
        fn run<'a>(&'a self, _: Value, _: &'a ToolContext) -> ToolFuture<'a> {
            Box::pin(async { Ok(ToolOutput::text("")) })
        }
    }
    impl ToolSpec for Editor {
        fn capabilities(&self) -> &[Capability] {
            &[Capability::WritesFiles]
        }
        fn defer_loading(&self) -> bool {
            self.0
        }
    }

    fn setup() -> (Arc<Registry>, Catalog) {
        let cfg = Arc::new(Config::builtin());
        let reg = Arc::new(
            RegistryBuilder::new(cfg)
                .with_tool(Arc::new(Editor(true)))
                .with_tool(Arc::new(Editor(false)))
                .build(),
        );
        let cat = reg.catalog();
        (reg, cat)
    }

    const LIMITS: NameLimits = NameLimits {
        max_distance: 3,
        max_suggestions: 3,
        prefix_min_chars: 3,
    };

    #[test]
    fn deferred_tool_teaches_how_to_call_it() {
        let (reg, cat) = setup();
        let input = json!({"file_path": "a", "old_string": "x", "new_string": "y"});
        let (err, notice) = resolve_call(&reg, &cat, 2, "remote_edit", &input, LIMITS).unwrap_err();
        assert_eq!(notice.index, Some(2));
        assert_eq!(err.category, ErrorCategory::UnknownTool);
        let detail: Value = serde_json::from_str(err.message.lines().last().unwrap()).unwrap();
        assert_eq!(detail["retry_required"], json!(true));
        assert_eq!(
            detail["renamed_fields"],
            json!({"file_path": "path", "old_string": "search", "new_string": "replace"})
        );
        assert_eq!(detail["expected_fields"]["path"], json!({"type": "string", "required": true}));
        assert_eq!(detail["received_fields"], json!(["file_path", "new_string", "old_string"]));
        assert!(err.message.contains("tool_search"));
        // Once activated, it resolves.
        let cat = cat.activate(&["remote_edit".into()]);
        assert_eq!(resolve_call(&reg, &cat, 2, "remote_edit", &input, LIMITS).unwrap().0, "remote_edit");
    }

    #[test]
    fn unknown_tool_suggests_and_points_to_search() {
        let (reg, cat) = setup();
        let (err, _) = resolve_call(&reg, &cat, 0, "read_fiel", &json!({}), LIMITS).unwrap_err();
        assert!(
            err.message.starts_with("Unknown tool `read_fiel`. Did you mean: read_file?"),
            "{}",
            err.message
        );
        assert!(err.message.contains("tool_search"));
    }

    #[test]
    fn repaired_names_resolve_with_a_notice() {
        let (reg, cat) = setup();
        let (name, notice) = resolve_call(&reg, &cat, 1, "ReadFile", &json!({}), LIMITS).unwrap();
        assert_eq!(name, "read_file");
        assert_eq!(notice.unwrap().kind, NoticeKind::NameRepaired);
    }
}
