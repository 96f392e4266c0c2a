//! The trace context of a remote call, carried in its NATS message's headers (`traceparent`,
//! `tracestate`), so the worker's span is a child of the dispatcher's and one trace shows both
//! machines. The headers are outside the sealed payload: they steer only where a span is
//! drawn, never what runs.

use async_nats::HeaderMap;
use toolslot::telemetry::TraceContext;

/// The current span's context as headers to add to a message; none when telemetry is off.
pub(crate) fn headers() -> Option<HeaderMap> {
    let cx = toolslot::telemetry::current_context()?;
    let mut headers = HeaderMap::new();
    headers.insert("traceparent", cx.traceparent.as_str());
    if let Some(state) = &cx.tracestate {
        headers.insert("tracestate", state.as_str());
    }
    Some(headers)
}

/// The trace context a message came with, if any.
pub(crate) fn context_of(headers: Option<&HeaderMap>) -> Option<TraceContext> {
    let headers = headers?;
    let traceparent = headers.get("traceparent")?.as_str().to_string();
    let tracestate = headers.get("tracestate").map(|v| v.as_str().to_string());
    Some(TraceContext { traceparent, tracestate })
}
