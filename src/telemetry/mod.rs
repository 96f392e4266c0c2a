//! OpenTelemetry's part in the slot: the names spans and metrics use, and the hooks a host
//! installs to export them.
//!
//! The slot links no exporter: its spans are plain `tracing` spans, which a host bridges to
//! OpenTelemetry (the `toolslot` binary does, see `[telemetry]`). What the slot cannot do
//! through `tracing` alone goes through [`Telemetry`], installed once per process: reading
//! the current trace context (an MCP request carries it in `params._meta`) and recording the
//! duration histograms. Without a hook every function here does nothing and costs a load.
//!
//! # Names
//! [`names`] holds every attribute, span and metric name, the OpenTelemetry semantic
//! conventions' (GenAI tool execution, MCP) and toolslot's own (`toolslot.*`), so the
//! contract lists one set and the code cannot spell a name two ways.

pub mod names;

use std::sync::OnceLock;

/// A W3C trace context, as it travels in `traceparent` and `tracestate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// `traceparent`: version, trace id, parent span id, flags.
    pub traceparent: String,
    /// `tracestate`, when the trace carries vendor state.
    pub tracestate: Option<String>,
}

/// What a host gives the slot to export its telemetry.
pub trait Telemetry: Send + Sync {
    /// The trace context of the current `tracing` span, when it is sampled into a trace.
    fn current_context(&self) -> Option<TraceContext>;
    /// One histogram sample: `name` is one of [`names`]'s metric names, `seconds` the
    /// duration, `attributes` its dimensions (low cardinality: tool and method names, error
    /// types).
    fn record(&self, name: &'static str, seconds: f64, attributes: &[(&'static str, &str)]);
    /// Makes `span` a child of the remote `parent` (a host's request, a dispatcher's call).
    fn adopt(&self, span: &tracing::Span, parent: &TraceContext);
}

static HOOK: OnceLock<Box<dyn Telemetry>> = OnceLock::new();

/// Installs the process's telemetry hook. The first one stays: a second call returns false.
pub fn install(hook: Box<dyn Telemetry>) -> bool {
    HOOK.set(hook).is_ok()
}

/// Whether a hook is installed (export is on).
pub fn is_on() -> bool {
    HOOK.get().is_some()
}

/// The trace context of the current span, when telemetry is on and the span is sampled.
pub fn current_context() -> Option<TraceContext> {
    HOOK.get().and_then(|h| h.current_context())
}

/// Records one duration sample of the histogram `name` (nothing when telemetry is off).
pub fn record(name: &'static str, seconds: f64, attributes: &[(&'static str, &str)]) {
    if let Some(h) = HOOK.get() {
        h.record(name, seconds, attributes);
    }
}

/// Makes `span` a child of `parent`, a trace context that came from another process (an HTTP
/// request's `traceparent`, an MCP request's `_meta`, a NATS message's headers); nothing when
/// telemetry is off. Call it before the span is first entered.
pub fn adopt(span: &tracing::Span, parent: &TraceContext) {
    if let Some(h) = HOOK.get()
        && !span.is_disabled()
    {
        h.adopt(span, parent);
    }
}
