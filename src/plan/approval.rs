//! The approval policy: what a requirement means under a mode, and the two fingerprints.
//!
//! Rejection is precise: a rejected call is auto-rejected again only when the same tool is
//! called with the same canonical arguments. Approval is loose: `approved_for_session`
//! covers later calls with the same `approval_key` (for the shell, program and subcommand;
//! for network tools, the host; for file writes, the path).

use std::collections::HashSet;

use serde_json::Value;

use super::canonical_json;
use crate::config::{ApprovalMode, NetworkPolicy};
use crate::event::ApprovalDecision;
use crate::tool::{ApprovalRequirement, Grant};

/// What to do with a call before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Run without asking.
    Run,
    /// Ask the host.
    Ask(ApprovalRequirement),
    /// Refuse without asking.
    Refuse,
}

/// The approval table of docs/CONTRACT.md, written once:
///
/// | mode | Auto | Suggest | Required |
/// |---|---|---|---|
/// | read-only | runs | refused | refused |
/// | ask | runs | asks | asks |
/// | auto-edit | runs | runs | asks |
/// | full-auto | runs | runs | runs |
///
/// `Refused` (network tools under `network.policy = "deny"`) is refused in every mode.
pub fn gate(requirement: ApprovalRequirement, mode: ApprovalMode) -> Gate {
    use ApprovalMode::*;
    use ApprovalRequirement::*;
    match (requirement, mode) {
        (Refused, _) => Gate::Refuse,
        (Auto, _) => Gate::Run,
        (Suggest | Required, ReadOnly) => Gate::Refuse,
        (Suggest | Required, Ask) => Gate::Ask(requirement),
        (Suggest, AutoEdit) => Gate::Run,
        (Required, AutoEdit) => Gate::Ask(requirement),
        (Suggest | Required, FullAuto) => Gate::Run,
    }
}

/// What a call that passes the gate may do, for the sandbox to enforce.
///
/// A call runs at all only when the gate let it: Auto calls always, Suggest and Required calls
/// once approved (or under a mode that runs them). So a non-Auto requirement that reaches
/// execution *was* approved to write, and to reach the network unless the policy is deny. An
/// Auto call gets a read-only view, with the network only for a tool that declares it under
/// `network.policy = "allow"` (its approval is Auto because the host allowed the network).
pub fn grant(requirement: ApprovalRequirement, network_tool: bool, policy: NetworkPolicy) -> Grant {
    let approved = matches!(requirement, ApprovalRequirement::Suggest | ApprovalRequirement::Required);
    Grant {
        write: approved,
        network: policy != NetworkPolicy::Deny
            && (approved || (requirement == ApprovalRequirement::Auto && network_tool && policy == NetworkPolicy::Allow)),
    }
}

/// The precise fingerprint of a call: tool and canonical arguments.
pub fn exact_fingerprint(tool: &str, input: &Value) -> String {
    format!("{tool}\u{0}{}", canonical_json(input))
}

/// A session's remembered decisions.
#[derive(Debug, Default, Clone)]
pub struct SessionApprovals {
    approved_keys: HashSet<String>,
    rejected: HashSet<String>,
}

impl SessionApprovals {
    /// A decision an earlier one implies for this call, if any. Rejection is checked first:
    /// a call the user refused stays refused even if a looser approval would cover it.
    pub fn cached(&self, tool: &str, input: &Value, approval_key: &str) -> Option<ApprovalDecision> {
        if self.rejected.contains(&exact_fingerprint(tool, input)) {
            return Some(ApprovalDecision::CachedRejection);
        }
        if self.approved_keys.contains(approval_key) {
            return Some(ApprovalDecision::CachedApproval);
        }
        None
    }

    /// Remembers a host's decision.
    pub fn record(&mut self, decision: ApprovalDecision, tool: &str, input: &Value, approval_key: &str) {
        match decision {
            ApprovalDecision::ApprovedForSession => {
                self.approved_keys.insert(approval_key.to_string());
            }
            ApprovalDecision::Rejected => {
                self.rejected.insert(exact_fingerprint(tool, input));
            }
            ApprovalDecision::Approved | ApprovalDecision::CachedApproval | ApprovalDecision::CachedRejection => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ApprovalMode::*;
    use ApprovalRequirement::*;
    use serde_json::json;

    #[test]
    fn the_mode_table() {
        let want = [
            (ReadOnly, [Gate::Run, Gate::Refuse, Gate::Refuse]),
            (Ask, [Gate::Run, Gate::Ask(Suggest), Gate::Ask(Required)]),
            (AutoEdit, [Gate::Run, Gate::Run, Gate::Ask(Required)]),
            (FullAuto, [Gate::Run, Gate::Run, Gate::Run]),
        ];
        for (mode, row) in want {
            assert_eq!([gate(Auto, mode), gate(Suggest, mode), gate(Required, mode)], row, "{mode:?}");
            assert_eq!(gate(Refused, mode), Gate::Refuse);
        }
    }

    #[test]
    fn only_an_approved_call_may_write_or_connect() {
        use NetworkPolicy::*;
        let g = |r, net, p| {
            let g = grant(r, net, p);
            (g.write, g.network)
        };
        assert_eq!(g(Auto, false, Prompt), (false, false));
        assert_eq!(g(Auto, false, Allow), (false, false));
        assert_eq!(g(Auto, true, Allow), (false, true));
        assert_eq!(g(Required, false, Prompt), (true, true));
        assert_eq!(g(Required, false, Deny), (true, false));
        assert_eq!(g(Suggest, false, Allow), (true, true));
        assert_eq!(g(Refused, true, Allow), (false, false));
    }

    #[test]
    fn rejection_is_precise_and_approval_is_loose() {
        let mut s = SessionApprovals::default();
        s.record(ApprovalDecision::Rejected, "exec_shell", &json!({"command": "rm -rf build"}), "k1");
        assert_eq!(
            s.cached("exec_shell", &json!({"command": "rm -rf build"}), "k1"),
            Some(ApprovalDecision::CachedRejection)
        );
        assert_eq!(s.cached("exec_shell", &json!({"command": "rm -rf dist"}), "k2"), None);
        s.record(
            ApprovalDecision::ApprovedForSession,
            "exec_shell",
            &json!({"command": "cargo build"}),
            "exec_shell:cargo build",
        );
        assert_eq!(
            s.cached("exec_shell", &json!({"command": "cargo build --release"}), "exec_shell:cargo build"),
            Some(ApprovalDecision::CachedApproval)
        );
        s.record(ApprovalDecision::Approved, "write_file", &json!({"path": "a"}), "write_file:a");
        assert_eq!(
            s.cached("write_file", &json!({"path": "a"}), "write_file:a"),
            None,
            "a one-off approval is not remembered"
        );
    }
}
