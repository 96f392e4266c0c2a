//! A pre_tool_use verdict applied to a planned call: a rewrite is judged again as the input it
//! now is, and the hooks' decision joins the rules' (the strictest wins).

use serde_json::Value;

use super::PreVerdict;
use crate::config::RuleDecision;
use crate::event::PipelineEvent;
use crate::ledger::Source;
use crate::plan::approval::Gate;
use crate::plan::call::rejudge;
use crate::plan::{Action, PlanContext, PlannedCall};
use crate::policy::SHELL_TOOLS;
use crate::shell::parse;
use crate::tool::{ApprovalRequirement, ErrorCategory, ToolError};

/// Applies `verdict` to `planned` (a call the rules did not refuse). Returns the event that
/// shows a rewrite (both inputs), if the hooks rewrote the input.
///
/// - A rewrite is validated and judged again (rules, mode) as the input it now is: an approval
///   is always given for the exact input that runs.
/// - deny (or a block) refuses; ask asks in every mode; allow runs without asking only a call
///   that only the mode would have asked about (never past a rule's ask or deny, never a shell
///   command that is not plain, and never with a wider sandbox).
pub fn apply_pre(ctx: PlanContext<'_>, planned: &mut PlannedCall, verdict: &PreVerdict) -> Option<PipelineEvent> {
    let mut event = None;
    if let Some(updated) = &verdict.updated_input
        && *updated != planned.input
    {
        event = Some(PipelineEvent::InputRewritten {
            index: planned.index,
            id: planned.id.clone(),
            hook: verdict.hook.clone().unwrap_or_default(),
            original_input: planned.input.clone(),
            input: updated.clone(),
        });
        planned.input = updated.clone();
        rejudge(ctx, planned);
    }
    let hook = verdict.hook.as_deref().unwrap_or("a hook");
    let reason = |default: &str| format!("{hook}: {}", verdict.reason.as_deref().unwrap_or(default));
    let name = planned.name.clone();
    let key_of = || {
        ctx.registry
            .get(&name)
            .map(|t| t.spec.approval_key(&planned.input))
            .unwrap_or_default()
    };
    let key = key_of();
    let Action::Run {
        gate,
        requirement,
        approval_key,
        ..
    } = &mut planned.action
    else {
        return event;
    };
    match verdict.decision {
        Some(RuleDecision::Deny) => {
            let why = verdict.reason.as_deref().unwrap_or("a hook denied it");
            planned.action = Action::Refuse(ToolError::refused(
                ErrorCategory::NotApproved,
                format!("Blocked by a hook: {why}. `{name}` was not run."),
            ));
            planned.trace.source = Some(Source::Hook);
            planned.trace.rule = None;
            planned.trace.reason = Some(reason("a hook denied it"));
        }
        Some(RuleDecision::Ask) => {
            if *gate == Gate::Run {
                *gate = Gate::Ask((*requirement).max(ApprovalRequirement::Suggest));
                if approval_key.is_empty() {
                    *approval_key = key;
                }
                planned.trace.source = Some(Source::Hook);
                planned.trace.rule = None;
            }
            planned.trace.forced_ask = true;
            planned.trace.reason = Some(reason("a hook asks"));
        }
        Some(RuleDecision::Allow) => {
            let only_the_mode_asks =
                matches!(gate, Gate::Ask(_)) && !planned.trace.forced_ask && planned.trace.source == Some(Source::Mode);
            let not_plain = SHELL_TOOLS.contains(&name.as_str())
                && !planned
                    .input
                    .get("command")
                    .and_then(Value::as_str)
                    .is_some_and(|c| parse(c).is_plain());
            if only_the_mode_asks && !not_plain {
                *gate = Gate::Run;
                planned.trace.source = Some(Source::Hook);
                planned.trace.reason = Some(reason("a hook allows it"));
            }
        }
        None => {}
    }
    event
}
