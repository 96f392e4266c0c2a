//! An MCP request's span, by the MCP semantic conventions (`{mcp.method.name} {target}`, a
//! client span), and the trace context it hands the server in `params._meta`.

use std::time::Instant;

use rmcp::model::RequestMetaObject;
use tracing::Span;
use tracing::field::Empty;

use super::RequestFailure;
use crate::telemetry::names;

/// The span of one request to `server`: `method` on `target` (a tool's name for
/// `tools/call`) over `transport` (`pipe` for stdio, `tcp` for HTTP).
pub(super) fn span(method: &'static str, target: &str, transport: &'static str, server: &str) -> Span {
    tracing::info_span!(
        "mcp_request",
        "otel.name" = %format_args!("{method} {target}"),
        "otel.kind" = "client",
        "otel.status_code" = Empty,
        "mcp.method.name" = method,
        "gen_ai.tool.name" = target,
        "network.transport" = transport,
        "toolslot.mcp.server" = server,
        "error.type" = Empty,
    )
}

/// The `_meta` that carries `span`'s trace context (W3C `traceparent` and `tracestate`, the
/// MCP specification's SEP-414 keys); none when telemetry is off or the trace is not sampled.
pub(super) fn meta(span: &Span) -> Option<RequestMetaObject> {
    if span.is_disabled() {
        return None;
    }
    let cx = span.in_scope(crate::telemetry::current_context)?;
    let mut meta = RequestMetaObject::new();
    meta.set_traceparent(cx.traceparent);
    if let Some(state) = cx.tracestate {
        meta.set_tracestate(state);
    }
    Some(meta)
}

/// Records how the request ended: `error.type` on the span, and the duration in
/// `mcp.client.operation.duration`.
pub(super) fn finish(span: &Span, method: &'static str, started: Instant, failure: Option<&RequestFailure>) {
    let error = failure.map(|e| match e {
        RequestFailure::Closed(_) => "closed",
        RequestFailure::Timeout => "timeout",
        RequestFailure::Rpc(_) => "jsonrpc_error",
        RequestFailure::Unreadable(_) => "unreadable",
    });
    if let Some(e) = error {
        span.record("error.type", e);
        span.record("otel.status_code", "ERROR");
    }
    if crate::telemetry::is_on() {
        let seconds = started.elapsed().as_secs_f64();
        match error {
            Some(e) => crate::telemetry::record(
                names::METRIC_MCP_CLIENT_DURATION,
                seconds,
                &[(names::MCP_METHOD_NAME, method), (names::ERROR_TYPE, e)],
            ),
            None => crate::telemetry::record(names::METRIC_MCP_CLIENT_DURATION, seconds, &[(names::MCP_METHOD_NAME, method)]),
        }
    }
}
