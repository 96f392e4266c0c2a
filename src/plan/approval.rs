//! The approval policy: what a requirement means under a mode, and the two fingerprints.
//!
//! Rejection is precise: a rejected call is auto-rejected again only when the same tool is
//! called with the same canonical arguments. Approval is loose: `approved_for_session`
//! covers later calls with the same `approval_key` (for the shell, program and subcommand;
//! for network tools, the host; for file writes, the path).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::canonical_json;
use crate::config::{ApprovalMode, NetworkPolicy, RuleDecision};
use crate::event::ApprovalDecision;
use crate::ledger::Source;
use crate::policy::{RuleRef, Verdict};
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

/// Who decided what happens to a call, and with which rule (the ledger's `source` and
/// `rule`, and the text a refusal gives).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trace {
    /// Rule or mode (then hook, host or timeout as the call goes on); `None` before the gate.
    pub source: Option<Source>,
    /// The rule that decided.
    pub rule: Option<RuleRef>,
    /// Why (a rule's or hook's reason).
    pub reason: Option<String>,
    /// A remembered approval does not cover this call (a managed ask under
    /// `allow_override = false`); the host is asked every time.
    pub sticky: bool,
    /// Only the host may let it run: a rule or hook asked (an allow from a hook cannot lift it).
    pub forced_ask: bool,
    /// How long the host took to answer, when it was asked (ms; its call span's
    /// `toolslot.approval.wait_ms`).
    pub waited_ms: Option<u64>,
}

/// The rules' verdict, then the mode's table: what happens to a call before the host is asked.
///
/// A deny is refused; an ask is asked in every mode (read-only refuses what is not Auto, as
/// it refuses everything that is not); an allow runs without asking unless the network policy
/// or read-only mode refuses it. The grant is the requirement's, whoever decided: a rule never
/// widens the sandbox.
pub fn decide(requirement: ApprovalRequirement, mode: ApprovalMode, verdict: &Verdict) -> (Gate, Trace) {
    let by_rule = |forced_ask| Trace {
        source: Some(Source::Rule),
        rule: verdict.rule.clone(),
        reason: verdict.reason.clone(),
        sticky: verdict.sticky,
        forced_ask,
        waited_ms: None,
    };
    let by_mode = Trace {
        source: Some(Source::Mode),
        ..Trace::default()
    };
    let mode_gate = gate(requirement, mode);
    match verdict.decision {
        Some(RuleDecision::Deny) => (Gate::Refuse, by_rule(false)),
        _ if requirement == ApprovalRequirement::Refused => (Gate::Refuse, by_mode),
        Some(_) if mode_gate == Gate::Refuse => (Gate::Refuse, by_mode),
        Some(RuleDecision::Ask) => (Gate::Ask(requirement.max(ApprovalRequirement::Suggest)), by_rule(true)),
        Some(RuleDecision::Allow) => (Gate::Run, by_rule(false)),
        None => (mode_gate, by_mode),
    }
}

/// The precise fingerprint of a call: tool and canonical arguments.
pub fn exact_fingerprint(tool: &str, input: &Value) -> String {
    format!("{tool}\u{0}{}", canonical_json(input))
}

/// The key a one-off rejection is remembered under: the tool and its exact arguments.
fn rejection_key(tool: &str, input: &Value) -> String {
    format!("{tool}:call:{}", canonical_json(input))
}

/// What a remembered decision does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Remembers {
    /// Later calls with the key run without asking.
    Approve,
    /// Later calls with the key are refused without asking.
    Reject,
}

/// One remembered decision: `{"key", "tool", "decision", "scope", "input"}` over the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remembered {
    /// The key later calls are matched by (an approval key, or for a one-off rejection the
    /// tool and its exact arguments).
    pub key: String,
    /// The tool of the call that was decided.
    pub tool: String,
    /// Approve or reject.
    pub decision: Remembers,
    /// `session` (approve_for_session, approve_for_project, reject_for_session) or `call` (a
    /// one-off rejection, which refuses the same call again).
    pub scope: String,
    /// The input of the call that was decided, to show what it was.
    pub input: Value,
}

/// A session's remembered decisions. Serializable: a session resumed elsewhere keeps them.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionApprovals {
    approved: BTreeMap<String, Remembered>,
    rejected: BTreeMap<String, Remembered>,
}

impl SessionApprovals {
    /// A decision an earlier one implies for this call, if any. Rejection is checked first:
    /// a call the user refused stays refused even if a looser approval would cover it. A
    /// `sticky` call (a managed ask) is never covered by a remembered approval.
    pub fn cached(&self, tool: &str, input: &Value, approval_key: &str, sticky: bool) -> Option<ApprovalDecision> {
        if self.rejected.contains_key(&rejection_key(tool, input)) || self.rejected.contains_key(approval_key) {
            return Some(ApprovalDecision::CachedRejection);
        }
        if !sticky && self.approved.contains_key(approval_key) {
            return Some(ApprovalDecision::CachedApproval);
        }
        None
    }

    /// Remembers a host's decision (a one-off approval is not remembered).
    pub fn record(&mut self, decision: ApprovalDecision, tool: &str, input: &Value, approval_key: &str) {
        let entry = |key: String, decision, scope: &str| Remembered {
            key,
            tool: tool.to_string(),
            decision,
            scope: scope.to_string(),
            input: input.clone(),
        };
        match decision {
            ApprovalDecision::ApprovedForSession | ApprovalDecision::ApprovedForProject => {
                self.approved.insert(
                    approval_key.to_string(),
                    entry(approval_key.to_string(), Remembers::Approve, "session"),
                );
            }
            ApprovalDecision::RejectedForSession => {
                self.rejected.insert(
                    approval_key.to_string(),
                    entry(approval_key.to_string(), Remembers::Reject, "session"),
                );
            }
            ApprovalDecision::Rejected => {
                let key = rejection_key(tool, input);
                self.rejected.insert(key.clone(), entry(key, Remembers::Reject, "call"));
            }
            ApprovalDecision::Approved | ApprovalDecision::CachedApproval | ApprovalDecision::CachedRejection => {}
        }
    }

    /// Every remembered decision, approvals first, each by key.
    pub fn list(&self) -> Vec<Remembered> {
        self.approved.values().chain(self.rejected.values()).cloned().collect()
    }

    /// Forgets the decisions remembered under `key`; whether there were any.
    pub fn revoke(&mut self, key: &str) -> bool {
        let a = self.approved.remove(key).is_some();
        let r = self.rejected.remove(key).is_some();
        a || r
    }

    /// Forgets every remembered decision; how many there were.
    pub fn revoke_all(&mut self) -> usize {
        let n = self.approved.len() + self.rejected.len();
        self.approved.clear();
        self.rejected.clear();
        n
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
            s.cached("exec_shell", &json!({"command": "rm -rf build"}), "k1", false),
            Some(ApprovalDecision::CachedRejection)
        );
        assert_eq!(s.cached("exec_shell", &json!({"command": "rm -rf dist"}), "k2", false), None);
        s.record(
            ApprovalDecision::ApprovedForSession,
            "exec_shell",
            &json!({"command": "cargo build"}),
            "exec_shell:cargo build",
        );
        assert_eq!(
            s.cached(
                "exec_shell",
                &json!({"command": "cargo build --release"}),
                "exec_shell:cargo build",
                false
            ),
            Some(ApprovalDecision::CachedApproval)
        );
        assert_eq!(
            s.cached(
                "exec_shell",
                &json!({"command": "cargo build --release"}),
                "exec_shell:cargo build",
                true
            ),
            None,
            "a managed ask is asked every time"
        );
        s.record(ApprovalDecision::Approved, "write_file", &json!({"path": "a"}), "write_file:a");
        assert_eq!(
            s.cached("write_file", &json!({"path": "a"}), "write_file:a", false),
            None,
            "a one-off approval is not remembered"
        );
    }

    #[test]
    fn remembered_decisions_are_listed_revoked_and_serialized() {
        let mut s = SessionApprovals::default();
        s.record(
            ApprovalDecision::ApprovedForSession,
            "exec_shell",
            &json!({"command": "cargo build"}),
            "exec_shell:cargo build",
        );
        s.record(
            ApprovalDecision::RejectedForSession,
            "exec_shell",
            &json!({"command": "git push"}),
            "exec_shell:git push",
        );
        s.record(ApprovalDecision::Rejected, "write_file", &json!({"path": "a"}), "write_file:a");
        assert_eq!(
            s.cached("exec_shell", &json!({"command": "git push origin"}), "exec_shell:git push", false),
            Some(ApprovalDecision::CachedRejection)
        );
        let listed = s.list();
        assert_eq!(listed.len(), 3);
        assert_eq!(listed[0].key, "exec_shell:cargo build");
        assert_eq!(listed[0].decision, Remembers::Approve);
        let back: SessionApprovals = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        assert!(s.revoke("exec_shell:cargo build"));
        assert!(!s.revoke("exec_shell:cargo build"));
        assert_eq!(
            s.cached("exec_shell", &json!({"command": "cargo build"}), "exec_shell:cargo build", false),
            None
        );
        assert_eq!(s.revoke_all(), 2);
        assert!(s.list().is_empty());
    }

    #[test]
    fn rules_decide_before_the_mode_and_never_past_a_refusal() {
        use crate::policy::{LayerKind, RuleRef};
        let rule = |d| Verdict {
            decision: Some(d),
            rule: Some(RuleRef {
                layer: LayerKind::Config,
                file: None,
                index: 0,
            }),
            reason: None,
            sticky: false,
            unsure: false,
        };
        let none = Verdict::default();
        assert_eq!(decide(Required, FullAuto, &rule(RuleDecision::Ask)).0, Gate::Ask(Required));
        assert_eq!(decide(Auto, FullAuto, &rule(RuleDecision::Ask)).0, Gate::Ask(Suggest));
        assert_eq!(decide(Auto, Ask, &rule(RuleDecision::Deny)).0, Gate::Refuse);
        assert_eq!(decide(Required, Ask, &rule(RuleDecision::Allow)).0, Gate::Run);
        assert_eq!(decide(Required, ReadOnly, &rule(RuleDecision::Allow)).0, Gate::Refuse);
        assert_eq!(decide(Refused, FullAuto, &rule(RuleDecision::Allow)).0, Gate::Refuse);
        assert_eq!(decide(Required, Ask, &none).0, Gate::Ask(Required));
        let (_, trace) = decide(Required, Ask, &rule(RuleDecision::Allow));
        assert_eq!(trace.source, Some(Source::Rule));
        assert_eq!(decide(Required, Ask, &none).1.source, Some(Source::Mode));
    }
}
