//! The host's trace on `toolslot serve`: each HTTP request gets a server span, a child of the
//! request's W3C `traceparent` (and `tracestate`) when it carries one, so the rounds a request
//! submits, their calls and everything those wait on appear inside the host's own trace.
//!
//! The span is the current one while the handler runs; the dispatcher takes it as the parent of
//! the rounds it submits (`Dispatcher::submit` reads `tracing::Span::current()`).

use actix_web::Error;
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use toolslot::telemetry::TraceContext;
use tracing::Instrument;
use tracing::field::Empty;

/// Wraps a request in its server span (only when telemetry exports: otherwise the request
/// runs as it did).
pub(super) async fn span(req: ServiceRequest, next: Next<impl MessageBody>) -> Result<ServiceResponse<impl MessageBody>, Error> {
    if !toolslot::telemetry::is_on() {
        return next.call(req).await;
    }
    let method = req.method().as_str().to_string();
    // The route's pattern names the span (`POST /v1/sessions/{id}/rounds`): the path itself
    // holds ids, which would make every request a name of its own.
    let route = req.resource_map().match_pattern(req.path());
    let name = match &route {
        Some(r) => format!("{method} {r}"),
        None => method.clone(),
    };
    let span = tracing::info_span!(
        "http_request",
        "otel.name" = %name,
        "otel.kind" = "server",
        "otel.status_code" = Empty,
        "http.request.method" = %method,
        "url.path" = %req.path(),
        "http.route" = route.as_deref(),
        "http.response.status_code" = Empty,
        "error.type" = Empty,
    );
    if let Some(parent) = context_of(&req) {
        toolslot::telemetry::adopt(&span, &parent);
    }
    let answer = next.call(req).instrument(span.clone()).await;
    match &answer {
        Ok(res) => {
            let status = res.status();
            span.record("http.response.status_code", status.as_u16());
            if status.is_server_error() {
                span.record("error.type", status.as_str());
                span.record("otel.status_code", "ERROR");
            }
        }
        Err(e) => {
            span.record("error.type", e.as_response_error().status_code().as_str());
        }
    }
    answer
}

/// The request's `traceparent` and `tracestate` headers.
fn context_of(req: &ServiceRequest) -> Option<TraceContext> {
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    Some(TraceContext {
        traceparent: header("traceparent")?,
        tracestate: header("tracestate"),
    })
}
