//! `[telemetry]`: OpenTelemetry export of spans and metrics over OTLP.

use serde::Deserialize;

/// `[telemetry]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The collector's OTLP/HTTP base URL (`/v1/traces` and `/v1/metrics` are added); "" =
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` if set, else export is off.
    pub otlp_endpoint: String,
    /// The OTLP protocol; `http/protobuf` is the one supported.
    pub protocol: String,
    /// `service.name` of the resource; "" = `OTEL_SERVICE_NAME` if set, else `toolslot`.
    pub service_name: String,
    /// The share of traces kept (0.0 to 1.0), decided at the root and followed by children.
    pub sampling_ratio: f64,
    /// The sampler, as `OTEL_TRACES_SAMPLER` names them (`parentbased_traceidratio`,
    /// `traceidratio`, `always_on`, …); "" = `OTEL_TRACES_SAMPLER` if set, else
    /// `parentbased_traceidratio`.
    pub sampler: String,
    /// Headers sent with every export (`name=value`, e.g. an API key), besides
    /// `OTEL_EXPORTER_OTLP_HEADERS`.
    pub headers: Vec<String>,
    /// Put a call's arguments and result on its span.
    pub capture_content: bool,
    /// The most bytes of arguments or of a result put on a span.
    pub max_content_bytes: usize,
    /// Finished spans held for export at most; more are dropped and counted.
    pub max_queue_size: usize,
    /// Spans in one export request at most.
    pub max_export_batch_size: usize,
    /// How long finished spans wait before they are exported (ms).
    pub schedule_delay_ms: u64,
    /// How long one export request may take (ms), and the wait for the last one at exit.
    pub export_timeout_ms: u64,
    /// How often metrics are exported (ms).
    pub metrics_interval_ms: u64,
}
