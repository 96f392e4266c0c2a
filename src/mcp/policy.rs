//! Capabilities of an MCP tool: conservative unless the server is trusted.

use serde_json::Value;

use crate::tool::Capability;

/// Capabilities for a server tool with these `annotations` (the MCP `annotations` object).
///
/// Every server tool is Network + RequiresApproval: what a server does is not ours to know.
/// Annotations are hints written by the server, so by default they may only raise caution,
/// which is already at its highest. With `trust_annotations = true` they are believed:
/// `readOnlyHint: true` makes a read-only tool (network-facing unless `openWorldHint: false`),
/// `destructiveHint: false` a file-writing one (asks in `ask` mode only).
pub fn capabilities_for(annotations: Option<&Value>, trust: bool) -> Vec<Capability> {
    let hint = |name: &str| annotations.and_then(|a| a.get(name)).and_then(Value::as_bool);
    if !trust {
        return vec![Capability::Network, Capability::RequiresApproval];
    }
    if hint("readOnlyHint") == Some(true) && hint("destructiveHint") != Some(true) {
        let mut caps = vec![Capability::ReadOnly];
        if hint("openWorldHint") != Some(false) {
            caps.push(Capability::Network);
        }
        return caps;
    }
    if hint("destructiveHint") == Some(false) {
        return vec![Capability::WritesFiles];
    }
    vec![Capability::Network, Capability::RequiresApproval]
}

#[cfg(test)]
mod tests {
    use super::*;
    use Capability::*;
    use serde_json::json;

    #[test]
    fn untrusted_hints_never_lower_caution() {
        let ro = json!({"readOnlyHint": true, "destructiveHint": false, "openWorldHint": false});
        assert_eq!(capabilities_for(Some(&ro), false), vec![Network, RequiresApproval]);
        assert_eq!(capabilities_for(None, false), vec![Network, RequiresApproval]);
    }

    #[test]
    fn trusted_hints_are_believed() {
        assert_eq!(
            capabilities_for(Some(&json!({"readOnlyHint": true, "openWorldHint": false})), true),
            vec![ReadOnly]
        );
        assert_eq!(
            capabilities_for(Some(&json!({"readOnlyHint": true})), true),
            vec![ReadOnly, Network]
        );
        assert_eq!(capabilities_for(Some(&json!({"destructiveHint": false})), true), vec![WritesFiles]);
        assert_eq!(
            capabilities_for(Some(&json!({"readOnlyHint": true, "destructiveHint": true})), true),
            vec![Network, RequiresApproval]
        );
        assert_eq!(capabilities_for(None, true), vec![Network, RequiresApproval]);
    }
}
