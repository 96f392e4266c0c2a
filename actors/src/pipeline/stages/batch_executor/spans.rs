//! The spans of a round and of each call, shaped for OpenTelemetry: a call's span follows the
//! GenAI convention for tool execution (`execute_tool {gen_ai.tool.name}`), and what the
//! convention does not cover is in `toolslot.*` (see `toolslot::telemetry::names`).
//!
//! Field names are written as literals because `tracing` takes only literals; the contract's
//! list is `names`. With no subscriber every span here is disabled and nothing is formatted.

use toolslot::notice::{Notice, NoticeKind};
use toolslot::plan::approval::Trace;
use toolslot::telemetry::names;
use tracing::Span;
use tracing::field::Empty;

use crate::pipeline::chain::{CallHead, PostItem, RoundNo};
use crate::pipeline::session::SessionShared;

/// A round's span: a child of the span the host submitted from, or the root of a trace.
pub(super) fn round(shared: &SessionShared, round: RoundNo) -> Span {
    let parent = shared.trace_parent.lock().unwrap_or_else(|p| p.into_inner()).clone();
    crate::pipeline::stage::span!(
        parent: &parent,
        "round",
        "gen_ai.conversation.id" = shared.id.as_str(),
        "toolslot.round" = round.0 as i64,
    )
}

/// A call's span, a child of the current one (its round's), with what was decided about it
/// (`ran`: it passed the gate); [`finish`] adds how it ended. Every value is given here as a
/// `&str` where it can be: each later `record` and each formatted value costs the bridge an
/// allocation and a lock per call.
pub(super) fn call(shared: &SessionShared, head: &CallHead, trace: &Trace, speculative: bool, ran: bool) -> Span {
    if !crate::pipeline::stage::spans_on() {
        return Span::none();
    }
    let rule = trace.rule.as_ref().map(|r| format!("{}#{}", r.layer.name(), r.index));
    let capture = shared.config.telemetry.capture_content;
    crate::pipeline::stage::span!(
        "call",
        "otel.name" = %format_args!("{} {}", names::EXECUTE_TOOL, head.name),
        "gen_ai.operation.name" = names::EXECUTE_TOOL,
        "gen_ai.tool.name" = &*head.name,
        "gen_ai.tool.call.id" = &*head.id,
        "gen_ai.tool.type" = "function",
        "toolslot.call.index" = head.index as i64,
        "toolslot.speculative" = speculative,
        "toolslot.approval.decision" = if ran { "run" } else { "refuse" },
        "toolslot.approval.decided_by" = trace.source.map(source_name),
        "toolslot.policy.rule" = rule.as_deref(),
        "toolslot.sandbox" = sandbox_name(shared.config.shell.sandbox),
        "toolslot.repair" = repair_name(head.repair),
        "toolslot.approval.wait_ms" = trace.waited_ms.map(|ms| ms as i64),
        "toolslot.loop_guard" = Empty,
        "toolslot.output.truncated" = Empty,
        "toolslot.output.overflow_ref" = Empty,
        "error.type" = Empty,
        "otel.status_code" = Empty,
        "gen_ai.tool.call.arguments" = capture.then(|| capped(&head.input.to_string(), shared)).as_deref(),
        "gen_ai.tool.call.result" = Empty,
    )
}

/// The repair step applied to the arguments (`rejected` when none could), or nothing for
/// arguments valid as sent (most calls: no attribute to build).
fn repair_name(mark: toolslot::event::RepairMark) -> Option<&'static str> {
    use toolslot::event::RepairMark;
    match mark {
        RepairMark::None => None,
        RepairMark::Step(step) => Some(step.as_str()),
        RepairMark::Rejected => Some("rejected"),
    }
}

/// Records the loop guard's verdict on a call's span when it gave one: `warn` (the failure
/// streak reached `loop_guard.failure_warn`) or `pause` (this failure paused the session).
/// Nothing for the common case, so a call the guard let pass costs no `record`.
pub(super) fn guarded(span: &Span, guard: &(Vec<Notice>, Option<String>)) {
    if span.is_disabled() {
        return;
    }
    let verdict = if guard.0.iter().any(|n| n.kind == NoticeKind::LoopPaused) {
        "pause"
    } else if guard.0.iter().any(|n| n.kind == NoticeKind::LoopWarning) {
        "warn"
    } else {
        return;
    };
    span.record("toolslot.loop_guard", verdict);
}

fn source_name(source: toolslot::ledger::Source) -> &'static str {
    use toolslot::ledger::Source;
    match source {
        Source::Rule => "rule",
        Source::Hook => "hook",
        Source::Host => "host",
        Source::Mode => "mode",
        Source::Timeout => "timeout",
    }
}

fn sandbox_name(mode: toolslot::config::SandboxMode) -> &'static str {
    use toolslot::config::SandboxMode;
    match mode {
        SandboxMode::Auto => "auto",
        SandboxMode::Bwrap => "bwrap",
        SandboxMode::Landlock => "landlock",
        SandboxMode::None => "none",
    }
}

/// Records how a call ended on its span, and its duration in `gen_ai.execute_tool.duration`
/// when it ran.
pub(super) fn finish(span: &Span, shared: &SessionShared, item: &PostItem, ran: bool) {
    let error = match &item.result {
        Err(e) => Some(e.category_name()),
        Ok(out) if out.is_error => Some("tool_error".to_string()),
        Ok(_) => None,
    };
    if ran && toolslot::telemetry::is_on() {
        let name: &str = &item.head.name;
        let seconds = item.duration_ms as f64 / 1000.0;
        match &error {
            Some(e) => toolslot::telemetry::record(
                names::METRIC_EXECUTE_TOOL_DURATION,
                seconds,
                &[(names::GEN_AI_TOOL_NAME, name), (names::ERROR_TYPE, e)],
            ),
            None => toolslot::telemetry::record(names::METRIC_EXECUTE_TOOL_DURATION, seconds, &[(names::GEN_AI_TOOL_NAME, name)]),
        }
    }
    if span.is_disabled() {
        return;
    }
    if let Some(e) = &error {
        span.record("error.type", e.as_str());
        span.record("otel.status_code", "ERROR");
    }
    if shared.config.telemetry.capture_content {
        let text = match &item.result {
            Ok(out) => out.content.as_str(),
            Err(e) => e.message.as_str(),
        };
        span.record("gen_ai.tool.call.result", capped(text, shared).as_str());
    }
}

/// Content cut to `telemetry.max_content_bytes` (on a character boundary).
fn capped(text: &str, shared: &SessionShared) -> String {
    let max = shared.config.telemetry.max_content_bytes;
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} bytes cut]", &text[..end], text.len() - end)
}
