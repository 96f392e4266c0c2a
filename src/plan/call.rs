//! Planning one call: the whole serial decision, from raw call to "refuse" or "run how".
//!
//! In order: truncation gate and argument ladder, name resolution, `$handle` arguments
//! replaced by the values they point at, validation, loop guard,
//! approval requirement for this input under the session's mode, parallel safety, and
//! eligibility for speculative start. The pipeline's Planner stage calls [`plan_call`] once per
//! call, in index order; benches call it directly.

use serde_json::Value;

use super::approval::{Gate, Trace, decide, grant};
use super::finalize::{RepairMark, finalize_call};
use super::loop_guard::LoopGuard;
use super::resolve::resolve_call;
use crate::config::{ApprovalMode, Config, HookEvent};
use crate::notice::{Notice, NoticeKind};
use crate::policy::{Call, Policy};
use crate::registry::{Catalog, RegisteredTool, Registry};
use crate::repair::args::decode_stringified;
use crate::repair::names::NameLimits;
use crate::stream::RawCall;
use crate::tool::{ApprovalRequirement, ErrorCategory, Grant, SessionServices, ToolError};

/// What planning decided for a call.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Not run; this error is its result.
    Refuse(ToolError),
    /// Run, after the approval gate.
    Run {
        /// Asking, running or refusing under the session's mode.
        gate: Gate,
        /// The requirement for this input.
        requirement: ApprovalRequirement,
        /// The loose fingerprint `approved_for_session` covers (empty unless the host is asked).
        approval_key: String,
        /// May share a concurrent batch.
        parallel_safe: bool,
        /// May start before the stream ends (if every earlier call may too).
        speculative: bool,
        /// What the call may do once it passes the gate (the sandbox enforces it).
        grant: Grant,
    },
}

/// A planned call.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedCall {
    /// Index in the response.
    pub index: usize,
    /// Provider id.
    pub id: String,
    /// The name as the model wrote it.
    pub called: String,
    /// The resolved name (the written one when unresolved).
    pub name: String,
    /// Arguments after repair.
    pub input: Value,
    /// What repair did.
    pub repair: RepairMark,
    /// Notices raised while planning, in order.
    pub notices: Vec<Notice>,
    /// Gemini's thought signature, which the host must send back with the call.
    pub thought_signature: Option<String>,
    /// The decision.
    pub action: Action,
    /// Who made it, and with which rule (for the ledger and the refusal's text).
    pub trace: Trace,
}

/// What planning reads: the session's view of the tools and its policy.
#[derive(Clone, Copy)]
pub struct PlanContext<'a> {
    /// All tools.
    pub registry: &'a Registry,
    /// What the model can call now.
    pub catalog: &'a Catalog,
    /// Limits and policies.
    pub config: &'a Config,
    /// The session's approval mode.
    pub mode: ApprovalMode,
    /// The session's policy rules and hooks.
    pub policy: &'a Policy,
    /// The session's workspace (where rules' paths are relative to).
    pub workspace: &'a std::path::Path,
    /// The session, whose handles a `$handle` argument reads (none: such arguments are left
    /// as they are, and validation judges them).
    pub services: Option<&'a dyn SessionServices>,
}

impl std::fmt::Debug for PlanContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanContext")
            .field("mode", &self.mode)
            .field("services", &self.services.is_some())
            .finish_non_exhaustive()
    }
}

/// Plans `call`. `cut` is true when the round ended at the output limit.
pub fn plan_call(ctx: PlanContext<'_>, call: &RawCall, cut: bool, guard: &mut LoopGuard) -> PlannedCall {
    let schema = ctx.registry.get(&call.name).map(|t| &t.input_schema);
    let finalized = finalize_call(call, cut, schema, &ctx.config.repair);
    let mut planned = PlannedCall {
        index: call.index,
        id: call.id.clone(),
        called: call.name.clone(),
        name: call.name.clone(),
        input: finalized.input,
        repair: finalized.repair,
        notices: finalized.notices,
        thought_signature: call.thought_signature.clone(),
        action: Action::Refuse(ToolError::refused(ErrorCategory::Unavailable, "not planned")),
        trace: Trace::default(),
    };
    if let Some(refusal) = finalized.refusal {
        planned.action = Action::Refuse(refusal);
        return planned;
    }
    let limits = NameLimits::from(&ctx.config.names);
    let name = match resolve_call(ctx.registry, ctx.catalog, call.index, &call.name, &planned.input, limits) {
        Ok((name, notice)) => {
            planned.notices.extend(notice);
            name
        }
        Err((error, notice)) => {
            planned.notices.push(notice);
            planned.action = Action::Refuse(error);
            return planned;
        }
    };
    planned.name = name.clone();
    let Some(tool) = ctx.registry.get(&name) else {
        planned.action = Action::Refuse(ToolError::refused(ErrorCategory::UnknownTool, format!("Unknown tool `{name}`.")));
        return planned;
    };
    if name != call.name {
        decode_stringified(&mut planned.input, &tool.input_schema, ctx.config.repair.string_decode_depth);
    }
    // Handle references become the values they point at before anything judges the input.
    if let Some(services) = ctx.services
        && let Err(error) = super::handles::substitute_handles(&mut planned.input, services)
    {
        planned.notices.push(Notice::for_call(
            NoticeKind::ValidationFailed,
            call.index,
            format!("`{name}`: {}", error.message.lines().next().unwrap_or("")),
        ));
        planned.action = Action::Refuse(error);
        return planned;
    }
    if let Err(error) = tool.validate_input(&planned.input) {
        planned.notices.push(Notice::for_call(
            NoticeKind::ValidationFailed,
            call.index,
            format!("`{name}`: {}", error.message.lines().next().unwrap_or("")),
        ));
        planned.action = Action::Refuse(error);
        return planned;
    }
    if let Err(error) = guard.check(&name, &planned.input, tool.meta.loop_exempt) {
        let kind = if error.category == ErrorCategory::LoopBlocked {
            NoticeKind::LoopBlocked
        } else {
            NoticeKind::LoopPaused
        };
        planned.notices.push(Notice::for_call(
            kind,
            call.index,
            format!("`{name}` not run: {}", error.category_name()),
        ));
        planned.action = Action::Refuse(error);
        return planned;
    }
    judge(ctx, tool, &mut planned, call.complete);
    planned
}

/// Judges `planned`'s input (already validated) for `tool`: the requirement for this input,
/// the policy's rules, the mode; then whether it may run in parallel or start early, and its
/// grant. Run again when a hook rewrote the input ([`rejudge`]).
pub fn judge(ctx: PlanContext<'_>, tool: &RegisteredTool, planned: &mut PlannedCall, complete: bool) {
    let name = planned.name.clone();
    let requirement = tool.spec.approval_requirement_for_input(&planned.input, ctx.config.network.policy);
    let key_of = || tool.spec.approval_key(&planned.input);
    let verdict = ctx.policy.evaluate(&Call::new(&name, &planned.input, ctx.workspace, &key_of));
    let (g, trace) = decide(requirement, ctx.mode, &verdict);
    planned.trace = trace;
    if g == Gate::Refuse {
        let why = if verdict.decision == Some(crate::config::RuleDecision::Deny) {
            let reason = verdict.reason.as_deref().unwrap_or("a policy rule denies it");
            format!("Denied by policy: {reason}. `{name}` was not run; do not retry it in another form.")
        } else if requirement == ApprovalRequirement::Refused {
            format!("Not run: `{name}` reaches the network and the network policy is deny.")
        } else {
            format!("Not approved: `{name}` needs approval and the session is in read-only mode; nothing was run.")
        };
        planned.action = Action::Refuse(ToolError::refused(ErrorCategory::NotApproved, why));
        return;
    }
    let meta = &tool.meta;
    let parallel_safe = meta.parallel_safe && requirement == ApprovalRequirement::Auto && g == Gate::Run;
    // Network tools never start early: their approval can depend on host policy that the
    // host may still change while the model is speaking, and a request once sent cannot be
    // taken back. Interactive tools need the user, who is still reading the stream. A call a
    // hook must see first waits for it.
    let speculative = ctx.config.execution.speculative_start
        && parallel_safe
        && meta.static_approval == ApprovalRequirement::Auto
        && !meta.network
        && !meta.interactive
        && complete
        // Unrepaired means the arguments parsed strictly as sent: nothing repaired runs early.
        && planned.repair == RepairMark::None
        && !ctx.policy.has_hooks(HookEvent::PreToolUse, &name);
    // The key is needed when the host is asked (and by the ledger's remembered approvals).
    let approval_key = if matches!(g, Gate::Ask(_)) { key_of() } else { String::new() };
    planned.action = Action::Run {
        gate: g,
        requirement,
        approval_key,
        parallel_safe,
        speculative,
        grant: grant(requirement, meta.network, ctx.config.network.policy),
    };
}

/// Judges `planned` again with the input a hook gave it: validated against the tool's schema
/// and checks, then the rules and the mode as for a fresh call (no early start, no second
/// count by the loop guard). An invalid input refuses the call.
pub fn rejudge(ctx: PlanContext<'_>, planned: &mut PlannedCall) {
    let Some(tool) = ctx.registry.get(&planned.name) else {
        planned.action = Action::Refuse(ToolError::refused(
            ErrorCategory::UnknownTool,
            format!("Unknown tool `{}`.", planned.name),
        ));
        return;
    };
    if let Err(mut error) = tool.validate_input(&planned.input) {
        error.message = format!(
            "A hook rewrote the input into one `{}` does not take: {}",
            planned.name, error.message
        );
        planned.action = Action::Refuse(error);
        return;
    }
    judge(ctx, tool, planned, false);
}
