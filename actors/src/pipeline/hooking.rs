//! Hooks in the running pipeline: a call's `pre_tool_use` hooks run after it was planned and
//! before the host is asked (in the approval stage), its `post_tool_use` hooks after it ran and
//! before its outcome is recorded (in the executor).
//!
//! The hooks' programs run as futures of their own (spawned off the stage's handler), so a
//! slow hook holds up only the calls behind it in its own session. What their answers mean is
//! the slot's ([`toolslot::hooks`]); this file moves calls in and verdicts out.

use std::sync::Arc;

use toolslot::config::HookEvent;
use toolslot::hooks::{HookCall, HookContext, PostVerdict, PreVerdict, apply_pre, post_tool_use, pre_tool_use};
use toolslot::notice::{Notice, NoticeKind};
use toolslot::plan::{Action, PlanContext, PlannedCall, RepairMark};
use toolslot::tool::{ErrorCategory, ToolError, ToolOutput};
use tracing::Instrument;

use crate::pipeline::chain::{CallHead, Ticket};
use crate::pipeline::session::SessionShared;

/// Whether `ticket` must be shown to pre_tool_use hooks first: it may still run, and a hook
/// applies to its tool.
pub fn needs_pre(shared: &SessionShared, ticket: &Ticket) -> bool {
    matches!(ticket.action, Action::Run { .. }) && shared.policy.has_hooks(HookEvent::PreToolUse, &ticket.head.name)
}

/// Runs `head`'s pre_tool_use hooks (in the sandbox, in the session's workspace). Owns what it
/// needs, so it can run as a task of its own.
pub async fn run_pre(shared: Arc<SessionShared>, head: CallHead) -> PreVerdict {
    let call = HookCall {
        session: &shared.id,
        call_id: &head.id,
        index: head.index,
        tool: &head.name,
        input: &head.input,
    };
    let ctx = HookContext {
        workspace: &shared.workspace,
        config: &shared.config,
    };
    let span = crate::pipeline::stage::span!("pre_hooks", session = %shared.id, index = head.index, tool = %head.name);
    pre_tool_use(&shared.policy, &call, ctx).instrument(span).await
}

/// Applies a pre_tool_use verdict to `ticket`: a rewritten input is validated and judged again
/// (rules, mode) as the input it now is, and an `input_rewritten` event shows both; a deny
/// refuses, an ask asks in every mode, an allow lifts only the mode's ask.
pub fn apply(shared: &SessionShared, ticket: &mut Ticket, verdict: &PreVerdict) {
    for failure in &verdict.ignored_failures {
        shared.notice(Notice::for_call(
            NoticeKind::HookFailed,
            ticket.head.index,
            format!("a pre_tool_use hook failed and was ignored (on_error = \"allow\"): {failure}"),
        ));
    }
    let mut planned = PlannedCall {
        index: ticket.head.index,
        id: ticket.head.id.to_string(),
        called: ticket.head.name.to_string(),
        name: ticket.head.name.to_string(),
        input: (*ticket.head.input).clone(),
        repair: RepairMark::None,
        notices: Vec::new(),
        thought_signature: None,
        action: std::mem::replace(
            &mut ticket.action,
            Action::Refuse(ToolError::refused(ErrorCategory::Unavailable, "")),
        ),
        trace: std::mem::take(&mut ticket.trace),
    };
    let event = shared.memory.with_catalog(|catalog| {
        let ctx = PlanContext {
            registry: catalog.registry(),
            catalog,
            config: &shared.config,
            mode: shared.mode,
            services: Some(shared.memory.as_ref()),
            policy: &shared.policy,
            workspace: &shared.workspace,
        };
        apply_pre(ctx, &mut planned, verdict)
    });
    for n in planned.notices.drain(..) {
        shared.notice(n);
    }
    if let Some(event) = event {
        shared.emit(event);
        ticket.head.input = Arc::new(planned.input);
    }
    ticket.action = planned.action;
    ticket.trace = planned.trace;
}

/// Runs `head`'s post_tool_use hooks on a call that produced `result`, and applies them:
/// `additional_context` is appended to the result (where truncation never cuts it), a block
/// withholds the result. Returns whether it was withheld.
pub async fn run_post(shared: &SessionShared, head: &CallHead, result: &mut Result<ToolOutput, ToolError>) -> bool {
    let Ok(out) = result.as_ref() else {
        return false;
    };
    if !shared.policy.has_hooks(HookEvent::PostToolUse, &head.name) {
        return false;
    }
    let call = HookCall {
        session: &shared.id,
        call_id: &head.id,
        index: head.index,
        tool: &head.name,
        input: &head.input,
    };
    let ctx = HookContext {
        workspace: &shared.workspace,
        config: &shared.config,
    };
    let shown = match &out.trailer {
        Some(t) => format!("{}\n{t}", out.content),
        None => out.content.clone(),
    };
    let span = crate::pipeline::stage::span!("post_hooks", session = %shared.id, index = head.index, tool = %head.name);
    let verdict: PostVerdict = post_tool_use(&shared.policy, &call, (out.is_error, &shown), ctx)
        .instrument(span)
        .await;
    for failure in &verdict.ignored_failures {
        shared.notice(Notice::for_call(
            NoticeKind::HookFailed,
            head.index,
            format!("a post_tool_use hook failed and was ignored (on_error = \"allow\"): {failure}"),
        ));
    }
    if let Some(why) = verdict.withheld {
        *result = Err(ToolError::tool(format!(
            "The result of `{}` was withheld by a hook: {why}",
            head.name
        )));
        return true;
    }
    if let Ok(out) = result.as_mut()
        && !verdict.additional_context.is_empty()
    {
        let added = verdict.additional_context.join("\n");
        out.trailer = Some(match out.trailer.take() {
            Some(t) => format!("{t}\n{added}"),
            None => added,
        });
    }
    false
}
