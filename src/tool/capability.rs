//! Capabilities a tool declares, and the approval derived from them.
//!
//! The ground of the tool contract: it needs only the configuration, so the event vocabulary
//! (which names an [`ApprovalRequirement`]) can stand below the rest of the trait layer.

use serde::{Deserialize, Serialize};

use crate::config::NetworkPolicy;

/// What must happen before a call may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalRequirement {
    /// Runs without asking.
    Auto,
    /// Asks in `ask` mode, runs in `auto-edit` and `full-auto`.
    Suggest,
    /// Asks unless `full-auto`.
    Required,
    /// Never runs (network tools under `network.policy = "deny"`).
    Refused,
}

/// Something a tool may do. Approval and scheduling are computed from these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// Reads and never changes anything.
    ReadOnly,
    /// Creates or changes files.
    WritesFiles,
    /// Runs code or commands.
    ExecutesCode,
    /// Reaches the network.
    Network,
    /// Talks to the user; never runs in parallel.
    Interactive,
    /// Always needs approval, whatever else it declares.
    RequiresApproval,
}

impl std::str::FromStr for Capability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        serde_json::from_value(serde_json::Value::String(s.to_string())).map_err(|_| {
            format!(
                "unknown capability `{s}` (expected read_only, writes_files, executes_code, \
                 network, interactive or requires_approval)"
            )
        })
    }
}

/// Where a tool comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolSource {
    /// Shipped with toolslot.
    Builtin,
    /// A tool of an MCP server.
    Mcp,
    /// An out-of-process extension declared in config.
    Extension,
    /// A sub-agent.
    Subagent,
}

/// Derives approval from capabilities. The precedence, written once:
/// 1. ExecutesCode or RequiresApproval → Required;
/// 2. WritesFiles → Suggest;
/// 3. Network → per `network.policy` (prompt: Required, allow: Auto, deny: Refused);
/// 4. otherwise Auto.
///
/// Network policy `deny` wins over everything: a tool that reaches the network is refused
/// under deny even if it also executes code.
pub fn derive_approval(caps: &[Capability], policy: NetworkPolicy) -> ApprovalRequirement {
    let has = |c| caps.contains(&c);
    if has(Capability::Network) && policy == NetworkPolicy::Deny {
        return ApprovalRequirement::Refused;
    }
    if has(Capability::ExecutesCode) || has(Capability::RequiresApproval) {
        return ApprovalRequirement::Required;
    }
    if has(Capability::WritesFiles) {
        return ApprovalRequirement::Suggest;
    }
    if has(Capability::Network) {
        return match policy {
            NetworkPolicy::Prompt => ApprovalRequirement::Required,
            NetworkPolicy::Allow => ApprovalRequirement::Auto,
            NetworkPolicy::Deny => ApprovalRequirement::Refused,
        };
    }
    ApprovalRequirement::Auto
}

/// True when the capabilities make a tool read-only: it declares ReadOnly and neither
/// WritesFiles nor ExecutesCode (a contradictory declaration is read as the unsafe one).
pub fn is_read_only(caps: &[Capability]) -> bool {
    caps.contains(&Capability::ReadOnly) && !caps.contains(&Capability::WritesFiles) && !caps.contains(&Capability::ExecutesCode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ApprovalRequirement::*;
    use Capability::*;

    #[track_caller]
    fn check(caps: &[Capability], policy: NetworkPolicy, expected: ApprovalRequirement) {
        assert_eq!(derive_approval(caps, policy), expected, "{caps:?} under {policy:?}");
    }

    #[test]
    fn approval_follows_the_precedence() {
        let p = NetworkPolicy::Prompt;
        check(&[ReadOnly], p, Auto);
        check(&[], p, Auto);
        check(&[WritesFiles], p, Suggest);
        check(&[ExecutesCode], p, Required);
        check(&[ReadOnly, RequiresApproval], p, Required);
        check(&[WritesFiles, ExecutesCode], p, Required);
        check(&[Network, ReadOnly], p, Required);
        check(&[Network, ReadOnly], NetworkPolicy::Allow, Auto);
        check(&[Network, ReadOnly], NetworkPolicy::Deny, Refused);
        check(&[Network, ExecutesCode], NetworkPolicy::Deny, Refused);
        check(&[Network, WritesFiles], NetworkPolicy::Allow, Suggest);
        check(&[Interactive], p, Auto);
    }

    #[test]
    fn read_only_needs_the_declaration_and_no_contradiction() {
        assert!(is_read_only(&[ReadOnly]));
        assert!(is_read_only(&[ReadOnly, Network]));
        assert!(!is_read_only(&[]));
        assert!(!is_read_only(&[ReadOnly, WritesFiles]));
        assert!(!is_read_only(&[ReadOnly, ExecutesCode]));
    }

    #[test]
    fn capability_names_parse() {
        assert_eq!("writes_files".parse::<Capability>(), Ok(WritesFiles));
        assert!("write".parse::<Capability>().unwrap_err().contains("write"));
    }
}
