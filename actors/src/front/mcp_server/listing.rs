//! `tools/list`: the session's catalog as MCP tools.
//!
//! The catalog is the one a model of this session would be sent: resident tools, then what
//! became visible later (deferred tools `tool_search` activated, tools an MCP server added), in
//! that order. A tool a policy rule denies outright is left out: every call of it would be
//! refused, so listing it only invites the calls.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::Value;
use toolslot::config::RuleDecision;
use toolslot::policy::Policy;
use toolslot::registry::RegisteredTool;

use crate::host::dispatcher::{DispatchError, Dispatcher};

/// The session's tools as MCP lists them, and the names of the whole catalog (what the client
/// has now been shown, denied tools included: a change is a change of the catalog).
///
/// # Errors
/// [`DispatchError::UnknownSession`] when the session is gone.
pub(super) fn tools(dispatcher: &Dispatcher, session: &str, policy: &Policy) -> Result<(Vec<Tool>, Vec<String>), DispatchError> {
    let catalog = dispatcher.catalog(session)?;
    let names = catalog.visible_names();
    let registry = catalog.registry();
    let tools = names
        .iter()
        .filter(|name| !denied_outright(policy, name))
        .filter_map(|name| registry.get(name))
        .map(tool_of)
        .collect();
    Ok((tools, names))
}

/// Whether a deny rule names `tool` and nothing else (no command, path, input or key): such a
/// rule refuses every call of it.
pub(super) fn denied_outright(policy: &Policy, tool: &str) -> bool {
    policy.rules().iter().any(|rule| {
        let written = rule.written();
        rule.decision() == RuleDecision::Deny
            && rule.applies_to(tool)
            && written.command.is_none()
            && written.path.is_none()
            && written.input.is_none()
            && written.key.is_none()
    })
}

/// One tool as MCP describes it. The hints come from the capabilities toolslot judges the tool
/// by, read the fail-safe way: a tool whose source said nothing is neither read-only nor
/// closed-world.
fn tool_of(tool: &RegisteredTool) -> Tool {
    let meta = &tool.meta;
    let schema = match &tool.input_schema {
        Value::Object(map) => map.clone(),
        // Cannot happen for an admitted tool (its schema's root is an object); a fail-closed
        // stand-in still gets a valid listing.
        _ => object_schema(),
    };
    let annotations = match tool.spec.title() {
        Some(title) => ToolAnnotations::with_title(title.to_string()),
        None => ToolAnnotations::new(),
    }
    .read_only(meta.read_only)
    // Anything that may change things may destroy: toolslot cannot tell additive updates
    // apart, so it never claims them.
    .destructive(!meta.read_only)
    .open_world(meta.network || !meta.capabilities_declared);
    let mut listed = Tool::new(meta.name.clone(), tool.model_description.clone(), Arc::new(schema)).annotate(annotations);
    if let Some(title) = tool.spec.title() {
        listed = listed.with_title(title);
    }
    if let Some(Value::Object(output)) = tool.spec.output_schema() {
        listed = listed.with_raw_output_schema(Arc::new(output.clone()));
    }
    listed
}

fn object_schema() -> JsonObject {
    let mut schema = JsonObject::new();
    schema.insert("type".into(), Value::String("object".into()));
    schema.insert("properties".into(), Value::Object(JsonObject::new()));
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(rules: &str) -> Policy {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, rules).unwrap();
        let cfg = toolslot::config::Config::load(Some(&file)).unwrap();
        Policy::load(&cfg, dir.path()).unwrap()
    }

    #[test]
    fn only_a_deny_rule_naming_the_tool_alone_hides_it() {
        let p = policy(
            "[policy]\nmanaged_file = \"\"\ntrust_file = \"\"\n\n\
             [[policy.rules]]\ntool = \"write_*\"\ndecision = \"deny\"\n\n\
             [[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"deny\"\ncommand = [\"rm\", \"*\"]\n\n\
             [[policy.rules]]\ntool = \"fetch_url\"\ndecision = \"ask\"\n",
        );
        assert!(denied_outright(&p, "write_file"));
        assert!(!denied_outright(&p, "exec_shell"), "a deny of some commands leaves the others");
        assert!(!denied_outright(&p, "fetch_url"), "an ask rule asks");
        assert!(!denied_outright(&p, "read_file"));
    }
}
