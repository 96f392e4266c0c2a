//! Asking a person over MCP: the form an approval question is put in, what its answer
//! decides, and what the server tells its client about approvals.
//!
//! The form names the tool, shows the exact input that runs if approved and says why it is
//! asked; it offers three decisions (approve, approve for the session, reject). Declining or
//! dismissing the form, an answer that is not one of them, or a client that fails to answer
//! all reject: nothing runs without a person's yes.

use std::collections::BTreeMap;

use rmcp::model::{
    ClientCapabilities, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, EnumSchema, PrimitiveSchemaDefinition,
};
use serde_json::Value;
use toolslot::config::Config;
use toolslot::tool::ApprovalRequirement;

use crate::pipeline::stages::approval::HostDecision;

/// An approval question of the session (or of a sub-agent's session it started).
#[derive(Debug, Clone)]
pub(super) struct Ask {
    /// The session that asks (a sub-agent's, for a question relayed from a child).
    pub session: String,
    /// The call's index in its round.
    pub index: usize,
    /// The question's number in that session: the answer names it.
    pub request: u64,
    /// The tool.
    pub tool: String,
    /// The input that runs if approved.
    pub input: Value,
    /// `required` or `suggest`.
    pub requirement: ApprovalRequirement,
    /// Why a rule or hook asks, when one does.
    pub reason: Option<String>,
    /// When the question expires (ms since the epoch), when it does.
    pub deadline_ms: Option<u64>,
}

/// The form's one field.
const FIELD: &str = "decision";

/// The decisions offered, as the form spells them, with their titles.
const CHOICES: [(&str, &str, HostDecision); 3] = [
    ("approve", "Approve this call", HostDecision::Approve),
    (
        "approve_for_session",
        "Approve it, and calls like it, for this session",
        HostDecision::ApproveForSession,
    ),
    ("reject", "Reject it (nothing runs)", HostDecision::Reject),
];

/// Whether a client with these capabilities can be sent a form (elicitation, form mode).
pub(super) fn can_elicit(capabilities: Option<&ClientCapabilities>) -> bool {
    capabilities
        .and_then(|c| c.elicitation.as_ref())
        // An elicitation capability that names no mode is the form mode of earlier revisions.
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// The question as a form.
pub(super) fn form(ask: &Ask) -> ElicitRequestParams {
    let values: Vec<String> = CHOICES.iter().map(|(v, _, _)| v.to_string()).collect();
    let titles: Vec<String> = CHOICES.iter().map(|(_, t, _)| t.to_string()).collect();
    let choices = match EnumSchema::builder(values.clone()).enum_titles(titles) {
        Ok(titled) => titled,
        // Only when the lists differ in length, which they cannot: the untitled list still asks.
        Err(_) => EnumSchema::builder(values),
    }
    .title("Decision")
    .description("What toolslot does with this call")
    .build();
    let mut properties = BTreeMap::new();
    properties.insert(FIELD.to_string(), PrimitiveSchemaDefinition::Enum(choices));
    let schema = ElicitationSchema::new(properties)
        .with_required(vec![FIELD.to_string()])
        .with_title("Approve a tool call?");
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message(ask),
        requested_schema: schema,
    }
}

/// What the form says: the tool, the exact input, why it is asked, until when.
pub(super) fn message(ask: &Ask) -> String {
    let input = serde_json::to_string_pretty(&ask.input).unwrap_or_else(|_| ask.input.to_string());
    let why = match &ask.reason {
        Some(reason) => reason.clone(),
        None => match ask.requirement {
            ApprovalRequirement::Required => format!(
                "`{}` may change files, run programs or reach the network, and the approval mode asks before such calls.",
                ask.tool
            ),
            ApprovalRequirement::Suggest => format!("`{}` may change files, and the approval mode asks before such calls.", ask.tool),
            ApprovalRequirement::Auto | ApprovalRequirement::Refused => "the session's policy asks about this call.".to_string(),
        },
    };
    let until = match ask.deadline_ms {
        Some(deadline) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            format!(
                "\n\nWithout an answer within {} s it is refused and nothing runs.",
                deadline.saturating_sub(now).div_ceil(1000)
            )
        }
        None => String::new(),
    };
    format!(
        "toolslot asks whether `{}` may run with this input:\n\n{input}\n\nWhy it asks: {why}{until}",
        ask.tool
    )
}

/// What an answer to the form decides (an `ElicitResult`, as the client sent it, or nothing).
pub(super) fn decision_of(answer: Option<&Value>) -> HostDecision {
    let Some(result) = answer.and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok()) else {
        return HostDecision::Reject;
    };
    decided(&result)
}

/// What an elicitation result decides.
pub(super) fn decided(result: &ElicitResult) -> HostDecision {
    if result.action != ElicitationAction::Accept {
        return HostDecision::Reject;
    }
    let word = result.content.as_ref().and_then(|c| c.get(FIELD)).and_then(Value::as_str);
    CHOICES
        .iter()
        .find(|(v, _, _)| Some(*v) == word)
        .map_or(HostDecision::Reject, |(_, _, decision)| *decision)
}

/// What a result says of a question nobody could be asked: the client cannot show forms.
pub(super) fn unasked_note(config: &Config) -> String {
    let when = match config.approval.timeout_ms {
        0 => "at once".to_string(),
        ms => format!("after approval.timeout_ms ({ms} ms)"),
    };
    format!(
        "toolslot could not ask a person about this call: this MCP client cannot show a form (no elicitation capability), so it was refused {when}. Allow such calls with policy rules ([[policy.rules]]) or an approval mode, or use a client that supports elicitation."
    )
}

/// The server's instructions: what it is, and how its approvals reach a person. `elicits` is
/// what the client said at the handshake (`None`: not known, e.g. a 2026-07-28 client, which
/// says it with every request).
pub(super) fn instructions(config: &Config, elicits: Option<bool>) -> String {
    let timeout = config.approval.timeout_ms;
    let refused = if timeout == 0 {
        // No person can be asked and nothing waits for ever on nobody.
        "refused at once".to_string()
    } else {
        format!("refused after approval.timeout_ms ({timeout} ms)")
    };
    let how = match elicits {
        Some(true) => "Calls that need approval are asked here, as a form (elicitation) showing the tool, its exact input and why it is asked; the first answer decides.".to_string(),
        Some(false) => format!(
            "This client cannot show a form (no elicitation capability), so no person can be asked: calls that need approval are {refused} and nothing runs. Allow them with policy rules ([[policy.rules]]) or an approval mode, or use a client that supports elicitation."
        ),
        None => format!(
            "Calls that need approval are asked as a form (elicitation) showing the tool, its exact input and why it is asked, the first answer deciding; a client that cannot show forms cannot be asked, and such calls are {refused} with nothing run."
        ),
    };
    format!(
        "toolslot governs these tools: each call is checked against the session's policy and approval mode, runs sandboxed, and is recorded in the audit ledger. {how} Tools a policy denies outright are not listed; deferred tools appear once tool_search activates them."
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_an_accepted_known_decision_approves() {
        let check = |answer: Value, want: HostDecision| assert_eq!(decision_of(Some(&answer)), want, "{answer}");
        check(
            json!({"action": "accept", "content": {"decision": "approve"}}),
            HostDecision::Approve,
        );
        check(
            json!({"action": "accept", "content": {"decision": "approve_for_session"}}),
            HostDecision::ApproveForSession,
        );
        check(json!({"action": "accept", "content": {"decision": "reject"}}), HostDecision::Reject);
        check(
            json!({"action": "accept", "content": {"decision": "yes please"}}),
            HostDecision::Reject,
        );
        check(json!({"action": "decline"}), HostDecision::Reject);
        check(json!({"action": "cancel"}), HostDecision::Reject);
        check(json!("approve"), HostDecision::Reject);
        assert_eq!(decision_of(None), HostDecision::Reject);
    }

    #[test]
    fn the_form_shows_the_tool_the_exact_input_and_why() {
        let ask = Ask {
            session: "s".into(),
            index: 0,
            request: 1,
            tool: "exec_shell".into(),
            input: json!({"command": "touch marker"}),
            requirement: ApprovalRequirement::Required,
            reason: Some("rule 0 of the user policy asks".into()),
            deadline_ms: None,
        };
        let form = serde_json::to_value(form(&ask)).unwrap();
        let message = form["message"].as_str().unwrap();
        assert!(message.contains("`exec_shell`"), "{message}");
        assert!(message.contains("\"command\": \"touch marker\""), "{message}");
        assert!(message.contains("rule 0 of the user policy asks"), "{message}");
        let field = &form["requestedSchema"]["properties"]["decision"];
        let offered: Vec<&str> = field["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["const"].as_str().unwrap())
            .collect();
        assert_eq!(offered, ["approve", "approve_for_session", "reject"], "{form}");
        assert_eq!(form["requestedSchema"]["required"], json!(["decision"]));
    }
}
