//! Hooks: a team's own programs, run before a call (to block it, ask for it, allow it or
//! rewrite its input) and after it (to add to its result, or withhold it).
//!
//! A hook gets the call as one JSON object on stdin (`{"event", "session", "call_id", "index",
//! "tool", "input"}`, and `"result": {"is_error", "content"}` after). Exit 0 goes on (stdout may
//! hold a JSON object with `decision`, `updated_input`, `additional_context`, `reason`); exit 2
//! blocks, its stderr the reason the model reads. Anything else (a crash, a timeout, output that
//! is not an answer) is a failure, which counts as the hook's `on_error`: a block unless it says
//! `allow`. A hook runs in the sandbox, read-only and offline, with the filtered environment.

mod answer;
mod apply;
mod run;

use std::path::Path;

use serde_json::{Value, json};

pub use answer::{Answer, Ending, read};
pub use apply::apply_pre;
pub use run::run_one;

use crate::config::{Config, HookEvent, HookOnError, RuleDecision};
use crate::policy::{Hook, Policy};

/// The call a hook is told about.
#[derive(Debug, Clone)]
pub struct HookCall<'a> {
    /// The session's id.
    pub session: &'a str,
    /// The provider's call id.
    pub call_id: &'a str,
    /// The call's index in its response.
    pub index: usize,
    /// The resolved tool name.
    pub tool: &'a str,
    /// Its input (for a post hook, the input that ran).
    pub input: &'a Value,
}

/// What the pre_tool_use hooks of a call decided together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PreVerdict {
    /// The strictest decision a hook gave (a block, or a failure counted as one, is a deny).
    pub decision: Option<RuleDecision>,
    /// The input after the hooks' rewrites, when one rewrote it.
    pub updated_input: Option<Value>,
    /// Why, for the model (a deny) or the host (an ask).
    pub reason: Option<String>,
    /// The command of the hook that decided.
    pub hook: Option<String>,
    /// Hooks that failed and were ignored (`on_error = "allow"`), for the host.
    pub ignored_failures: Vec<String>,
}

/// What the post_tool_use hooks of a call did to its result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PostVerdict {
    /// Texts to append to the result, in hook order.
    pub additional_context: Vec<String>,
    /// The result must not reach the model: why.
    pub withheld: Option<String>,
    /// The command of the hook that withheld it.
    pub hook: Option<String>,
    /// Hooks that failed and were ignored (`on_error = "allow"`), for the host.
    pub ignored_failures: Vec<String>,
}

/// Where hooks run.
#[derive(Debug, Clone, Copy)]
pub struct HookContext<'a> {
    /// The session's workspace (their working folder).
    pub workspace: &'a Path,
    /// Sandbox, environment and hook limits.
    pub config: &'a Config,
}

/// Runs the pre_tool_use hooks of `call` in order, each seeing the input as the hooks before
/// it left it. A block (or a failure counted as one, or a deny) stops there.
pub async fn pre_tool_use(policy: &Policy, call: &HookCall<'_>, ctx: HookContext<'_>) -> PreVerdict {
    let mut verdict = PreVerdict::default();
    let mut input = call.input.clone();
    for hook in policy.hooks(HookEvent::PreToolUse, call.tool) {
        let payload = payload(HookEvent::PreToolUse, call, &input, None);
        let answer = run_one(hook, HookEvent::PreToolUse, &payload, ctx.workspace, ctx.config).await;
        let shown = shown(hook);
        match settle(hook, answer) {
            Settled::Deny(reason) => {
                verdict.decision = Some(RuleDecision::Deny);
                verdict.reason = Some(reason);
                verdict.hook = Some(shown);
                break;
            }
            Settled::Ignored(why) => verdict.ignored_failures.push(format!("{shown}: {why}")),
            Settled::Continue {
                decision,
                updated_input,
                reason,
                ..
            } => {
                if let Some(updated) = updated_input {
                    input = updated;
                    verdict.updated_input = Some(input.clone());
                }
                if let Some(d) = decision
                    && verdict.decision.is_none_or(|old| d > old)
                {
                    verdict.decision = Some(d);
                    verdict.reason = reason;
                    verdict.hook = Some(shown);
                    if d == RuleDecision::Deny {
                        break;
                    }
                }
            }
        }
    }
    if verdict.decision == Some(RuleDecision::Deny) && verdict.reason.is_none() {
        verdict.reason = Some("a hook denied it".into());
    }
    verdict
}

/// Runs the post_tool_use hooks of `call`, which ended with `result` (`is_error`, content).
pub async fn post_tool_use(policy: &Policy, call: &HookCall<'_>, result: (bool, &str), ctx: HookContext<'_>) -> PostVerdict {
    let mut verdict = PostVerdict::default();
    for hook in policy.hooks(HookEvent::PostToolUse, call.tool) {
        let payload = payload(HookEvent::PostToolUse, call, call.input, Some(result));
        let answer = run_one(hook, HookEvent::PostToolUse, &payload, ctx.workspace, ctx.config).await;
        let shown = shown(hook);
        match settle(hook, answer) {
            Settled::Deny(reason) => {
                verdict.withheld = Some(reason);
                verdict.hook = Some(shown);
                break;
            }
            Settled::Ignored(why) => verdict.ignored_failures.push(format!("{shown}: {why}")),
            Settled::Continue {
                decision,
                additional_context,
                reason,
                ..
            } => {
                if decision == Some(RuleDecision::Deny) {
                    verdict.withheld = Some(reason.unwrap_or_else(|| "a hook withheld it".into()));
                    verdict.hook = Some(shown);
                    break;
                }
                verdict.additional_context.extend(additional_context);
            }
        }
    }
    verdict
}

enum Settled {
    Deny(String),
    Ignored(String),
    Continue {
        decision: Option<RuleDecision>,
        updated_input: Option<Value>,
        additional_context: Option<String>,
        reason: Option<String>,
    },
}

/// An answer with the hook's `on_error` applied to a failure.
fn settle(hook: &Hook, answer: Answer) -> Settled {
    match answer {
        Answer::Block(reason) => Settled::Deny(reason),
        Answer::Failed(why) => match hook.config.on_error {
            HookOnError::Block => Settled::Deny(format!(
                "Blocked: the hook `{}` failed ({why}), and a failed hook blocks (on_error = \"block\").",
                shown(hook)
            )),
            HookOnError::Allow => Settled::Ignored(why),
        },
        Answer::Continue {
            decision,
            updated_input,
            additional_context,
            reason,
        } => {
            if decision == Some(RuleDecision::Deny) {
                return Settled::Deny(reason.unwrap_or_else(|| "a hook denied it".into()));
            }
            Settled::Continue {
                decision,
                updated_input,
                additional_context,
                reason,
            }
        }
    }
}

/// The hook's command as the host reads it.
fn shown(hook: &Hook) -> String {
    hook.config.command.join(" ")
}

fn payload(event: HookEvent, call: &HookCall<'_>, input: &Value, result: Option<(bool, &str)>) -> Vec<u8> {
    let mut p = json!({
        "event": event,
        "session": call.session,
        "call_id": call.call_id,
        "index": call.index,
        "tool": call.tool,
        "input": input,
    });
    if let Some((is_error, content)) = result {
        p["result"] = json!({"is_error": is_error, "content": content});
    }
    serde_json::to_vec(&p).unwrap_or_default()
}

#[cfg(test)]
#[path = "hooks_tests.rs"]
mod tests;
