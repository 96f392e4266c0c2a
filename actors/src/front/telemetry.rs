//! OpenTelemetry export for the binary: the `tracing` spans bridged to OTLP/HTTP protobuf, the
//! duration histograms beside them, and the trace context read and written for the slot.
//!
//! Nothing here runs on a pipeline thread but the layer itself (`telemetry/layer.rs`, toolslot's
//! own, see there why) and a push per histogram sample: a finished span (`telemetry/record.rs`)
//! and a sample go into a bounded queue (`telemetry/batch.rs`), whose own thread records the
//! samples into the SDK's histograms and sends batches of spans with a blocking reqwest client (the
//! tree's reqwest over `toolslot::tls`). A collector that is down or slow costs a failed export
//! on that thread; a full queue drops spans. Both are counted ([`Telemetry::stats`], and
//! [`span_counts`] for `/metrics`) and reported when the process ends. Spans are encoded by
//! `telemetry/otlp.rs`, metrics by `opentelemetry-otlp`.
//!
//! # Where settings come from
//! 1. A non-empty `telemetry.otlp_endpoint` (or `TOOLSLOT_TELEMETRY__OTLP_ENDPOINT`) turns
//!    export on, to that base URL.
//! 2. Otherwise `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` does
//!    (read as the specification says: the traces one as given, the general one with the
//!    signal's path added).
//! 3. `service_name`, then `OTEL_SERVICE_NAME`, then `toolslot`.
//! 4. `headers`, plus `OTEL_EXPORTER_OTLP_HEADERS` (and `OTEL_EXPORTER_OTLP_TRACES_HEADERS`
//!    for spans).
//! 5. `sampler`, then `OTEL_TRACES_SAMPLER` (with `OTEL_TRACES_SAMPLER_ARG` as its ratio), then
//!    `parentbased_traceidratio` at `sampling_ratio` ([`Sampling`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, MeterProvider as _};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter, SpanProcessor};
use opentelemetry_sdk::{Resource, trace::Tracer};
use toolslot::config::TelemetryConfig;

mod batch;
mod layer;
mod otlp;
mod record;
mod sampling;
mod subscriber;
pub use sampling::Sampling;
pub use subscriber::{Built, FilterError, LogStyle, subscriber};
use toolslot::telemetry::{TraceContext, names};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

/// Export could not be set up (a configuration the exporter refuses).
#[derive(Debug, thiserror::Error)]
#[error("telemetry: {0}")]
pub struct TelemetryError(String);

/// How many spans went where, since the process started exporting.
#[derive(Debug, Default)]
pub struct Stats {
    ended: AtomicU64,
    exported: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
    last_error: std::sync::Mutex<Option<String>>,
}

impl Stats {
    /// Spans handed to the export queue.
    pub fn ended(&self) -> u64 {
        self.ended.load(Ordering::Relaxed)
    }
    /// Spans the collector accepted.
    pub fn exported(&self) -> u64 {
        self.exported.load(Ordering::Relaxed)
    }
    /// Spans in export requests that failed (collector down, refused, timed out).
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
    /// Spans dropped because the export queue was full (or export had stopped).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// The counts of the export started in this process, for `/metrics`.
static STATS: std::sync::OnceLock<Arc<Stats>> = std::sync::OnceLock::new();

/// `(exported, failed, dropped, queued)` span counts when export is on: spans the collector
/// accepted, spans in requests that failed, spans dropped because the queue was full, and
/// spans ended but none of these yet (waiting in the queue or being sent).
pub fn span_counts() -> Option<(u64, u64, u64, u64)> {
    STATS.get().map(|s| {
        let (exported, failed, dropped) = (s.exported(), s.failed(), s.dropped());
        (exported, failed, dropped, s.ended().saturating_sub(exported + failed + dropped))
    })
}

/// Export running: the providers, held until the process ends (dropping it flushes them).
pub struct Telemetry {
    /// Where spans go.
    spans: Spans,
    meter: SdkMeterProvider,
    stats: Arc<Stats>,
    endpoint: String,
    timeout: Duration,
    capture_content: bool,
    /// What was not taken as given (an `OTEL_TRACES_SAMPLER` not offered), said once a log is
    /// set up.
    notes: Vec<String>,
}

/// The span pipeline: toolslot's layer into the batch processor (with the sampling ratio), or
/// the earlier one the bench compares against (`tracing-opentelemetry` and the SDK's tracer).
enum Spans {
    Own(Arc<batch::Batcher>, f64),
    Reference(SdkTracerProvider),
}

/// Where export goes, once the configuration and the environment are read; `None` when
/// export is off.
fn endpoint(cfg: &TelemetryConfig) -> Option<Option<String>> {
    if !cfg.otlp_endpoint.trim().is_empty() {
        return Some(Some(cfg.otlp_endpoint.trim().trim_end_matches('/').to_string()));
    }
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    // The exporters read these themselves (adding the signal's path to the general one).
    (set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") || set("OTEL_EXPORTER_OTLP_ENDPOINT")).then_some(None)
}

impl Telemetry {
    /// Starts export as `cfg` (and the `OTEL_*` variables) say; `None` when it is off.
    ///
    /// # Errors
    /// [`TelemetryError`] for a protocol other than `http/protobuf`, an unusable header or
    /// endpoint, or a TLS setup rustls refuses.
    pub fn start(cfg: &TelemetryConfig) -> Result<Option<Telemetry>, TelemetryError> {
        Self::start_with(cfg, false)
    }

    /// [`Telemetry::start`] with the pipeline export used before toolslot's own layer and
    /// encoder: `tracing-opentelemetry`, the SDK's tracer and `opentelemetry-otlp`'s span
    /// exporter. Kept only so `benches/telemetry_cost.rs` can show what they save, side by
    /// side in one run.
    ///
    /// # Errors
    /// As [`Telemetry::start`].
    #[doc(hidden)]
    pub fn start_with_reference_exporter(cfg: &TelemetryConfig) -> Result<Option<Telemetry>, TelemetryError> {
        Self::start_with(cfg, true)
    }

    fn start_with(cfg: &TelemetryConfig, reference: bool) -> Result<Option<Telemetry>, TelemetryError> {
        let Some(base) = endpoint(cfg) else { return Ok(None) };
        if cfg.protocol != "http/protobuf" {
            return Err(TelemetryError(format!(
                "telemetry.protocol `{}` is not offered (use \"http/protobuf\")",
                cfg.protocol
            )));
        }
        let mut headers = HashMap::new();
        for h in &cfg.headers {
            let Some((k, v)) = h.split_once('=') else {
                return Err(TelemetryError(format!("telemetry.headers entry `{h}` is not name=value")));
            };
            headers.insert(k.trim().to_string(), v.trim().to_string());
        }
        let timeout = Duration::from_millis(cfg.export_timeout_ms);
        let tls = toolslot::tls::public_roots().map_err(|e| TelemetryError(e.to_string()))?;
        let client = reqwest::blocking::Client::builder()
            .tls_backend_preconfigured(tls)
            .timeout(timeout)
            .build()
            .map_err(|e| TelemetryError(format!("HTTP client: {e}")))?;
        let pairs: Vec<(String, String)> = headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let reference_spans = if reference {
            let b = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_http_client(client.clone())
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_timeout(timeout)
                .with_headers(headers.clone());
            let b = match &base {
                Some(u) => b.with_endpoint(format!("{u}/v1/traces")),
                None => b,
            };
            Some(b.build().map_err(|e| TelemetryError(e.to_string()))?)
        } else {
            None
        };
        let metrics = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_http_client(client.clone())
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_timeout(timeout)
            .with_headers(headers);
        let metrics = match &base {
            Some(b) => metrics.with_endpoint(format!("{b}/v1/metrics")),
            None => metrics,
        };
        let metrics = metrics.build().map_err(|e| TelemetryError(e.to_string()))?;
        let service = if !cfg.service_name.is_empty() {
            cfg.service_name.clone()
        } else {
            std::env::var("OTEL_SERVICE_NAME")
                .ok()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "toolslot".into())
        };
        let resource = Resource::builder()
            .with_service_name(service)
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let stats = Arc::new(Stats::default());
        let _ = STATS.set(Arc::clone(&stats));
        let batch_config = || {
            BatchConfigBuilder::default()
                .with_max_queue_size(cfg.max_queue_size.max(1))
                .with_max_export_batch_size(cfg.max_export_batch_size.clamp(1, cfg.max_queue_size.max(1)))
                .with_scheduled_delay(Duration::from_millis(cfg.schedule_delay_ms))
                .build()
        };
        let mut notes = Vec::new();
        let sampling = Sampling::from(cfg, |name| std::env::var(name).ok(), &mut notes)?;
        let ratio = sampling.ratio;
        let reader = PeriodicReader::builder(metrics)
            .with_interval(Duration::from_millis(cfg.metrics_interval_ms.max(1)))
            .build();
        let meter = SdkMeterProvider::builder()
            .with_reader(reader)
            .with_resource(resource.clone())
            .build();
        let histograms = Histograms::new(&meter);
        let spans = match reference_spans {
            Some(inner) => {
                let batch = BatchSpanProcessor::builder(Counting {
                    inner,
                    stats: Arc::clone(&stats),
                })
                .with_batch_config(batch_config())
                .build();
                let tracer = SdkTracerProvider::builder()
                    .with_span_processor(Queued {
                        inner: batch,
                        stats: Arc::clone(&stats),
                    })
                    .with_sampler(sampling.sdk())
                    .with_resource(resource)
                    .build();
                Spans::Reference(tracer)
            }
            None => {
                let spans = otlp::OtlpSpans::new(client, base.as_deref(), &pairs, &resource).map_err(TelemetryError)?;
                let limits = batch::Limits {
                    max_queue: cfg.max_queue_size,
                    batch: cfg.max_export_batch_size,
                    delay: Duration::from_millis(cfg.schedule_delay_ms),
                };
                let exporting = Exporting {
                    spans,
                    histograms: histograms.clone(),
                    sets: AttributeSets::default(),
                };
                let batcher = batch::Batcher::start(exporting, limits, Arc::clone(&stats))
                    .map_err(|e| TelemetryError(format!("export thread: {e}")))?;
                Spans::Own(Arc::new(batcher), ratio)
            }
        };
        let queue = match &spans {
            Spans::Own(batcher, _) => Some(Arc::clone(batcher)),
            Spans::Reference(_) => None,
        };
        toolslot::telemetry::install(Box::new(Hook {
            histograms,
            queue,
            sampling,
        }));
        Ok(Some(Telemetry {
            spans,
            meter,
            stats,
            endpoint: base.unwrap_or_else(|| "the OTEL_EXPORTER_OTLP endpoint".into()),
            timeout,
            capture_content: cfg.capture_content,
            notes,
        }))
    }

    /// The `tracing` layer that turns toolslot's spans into OpenTelemetry spans. Only the
    /// spans a trace reader wants go through: rounds, calls and what a call waits on (hooks,
    /// MCP requests, remote runs, HTTP requests), not the stages' own bookkeeping.
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + use<S>
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let (own, reference) = match &self.spans {
            Spans::Own(batcher, ratio) => (Some(layer::SpanLayer::new(Arc::clone(batcher) as layer::Sink, *ratio)), None),
            Spans::Reference(provider) => (None, Some(provider)),
        };
        let reference = reference.map(|provider| {
            let tracer: Tracer = provider.tracer("toolslot");
            tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_location(false)
                .with_threads(false)
                .with_target(false)
                .with_tracked_inactivity(false)
                .with_context_activation(false)
        });
        Layer::and_then(own, reference).with_filter(tracing_subscriber::filter::filter_fn(layer::exported))
    }

    /// toolslot's own span layer, unfiltered (it keeps only [`layer::exported`] spans
    /// itself), for a subscriber with one filter (`subscriber.rs`); `None` for the reference
    /// exporter.
    fn own_layer(&self) -> Option<layer::SpanLayer> {
        match &self.spans {
            Spans::Own(batcher, ratio) => Some(layer::SpanLayer::new(Arc::clone(batcher) as layer::Sink, *ratio)),
            Spans::Reference(_) => None,
        }
    }

    /// Counts of spans queued, exported and failed.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Whether calls' arguments and results go on their spans.
    pub fn captures_content(&self) -> bool {
        self.capture_content
    }

    /// What of the settings was not taken as given, and what was taken instead: for the log,
    /// which starts after export does.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        // The last batch goes now, bounded: a hung collector delays the exit by one timeout.
        match &self.spans {
            Spans::Own(batcher, _) => batcher.shutdown(self.timeout),
            Spans::Reference(tracer) => drop(tracer.shutdown_with_timeout(self.timeout)),
        }
        let _ = self.meter.shutdown_with_timeout(self.timeout);
        let ended = self.stats.ended();
        let lost = ended.saturating_sub(self.stats.exported());
        if lost > 0 {
            let why = self
                .stats
                .last_error
                .lock()
                .ok()
                .and_then(|e| e.clone())
                .unwrap_or_else(|| "the export queue was full".into());
            tracing::warn!(
                target: "telemetry",
                "telemetry: {lost} of {ended} spans not delivered to {} ({why})",
                self.endpoint
            );
        }
    }
}

/// The span exporter, counting what it delivered and what it could not.
#[derive(Debug)]
struct Counting<E> {
    inner: E,
    stats: Arc<Stats>,
}

impl<E: SpanExporter> SpanExporter for Counting<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len() as u64;
        let result = self.inner.export(batch).await;
        match &result {
            Ok(()) => self.stats.exported.fetch_add(n, Ordering::Relaxed),
            Err(e) => {
                if let Ok(mut last) = self.stats.last_error.lock() {
                    *last = Some(e.to_string());
                }
                self.stats.failed.fetch_add(n, Ordering::Relaxed)
            }
        };
        result
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }
    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The batch processor, counting the spans handed to its queue (those it drops when full are
/// the difference at the end).
#[derive(Debug)]
struct Queued<P> {
    inner: P,
    stats: Arc<Stats>,
}

impl<P: SpanProcessor> SpanProcessor for Queued<P> {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.inner.on_start(span, cx);
    }
    fn on_end(&self, span: SpanData) {
        self.stats.ended.fetch_add(1, Ordering::Relaxed);
        self.inner.on_end(span);
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }
    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The duration histograms of the conventions, and approval wait.
#[derive(Clone)]
struct Histograms {
    tool: Histogram<f64>,
    mcp: Histogram<f64>,
    approval: Histogram<f64>,
}

impl Histograms {
    fn new(provider: &SdkMeterProvider) -> Self {
        let meter = provider.meter("toolslot");
        let histogram = |name: &'static str, about: &'static str| meter.f64_histogram(name).with_unit("s").with_description(about).build();
        Histograms {
            tool: histogram(names::METRIC_EXECUTE_TOOL_DURATION, "Duration of tool execution."),
            mcp: histogram(
                names::METRIC_MCP_CLIENT_DURATION,
                "Duration of an MCP request as the client sees it.",
            ),
            approval: histogram(names::METRIC_APPROVAL_WAIT, "Time a call waited for the host's approval."),
        }
    }

    fn record<'a>(&self, name: &str, seconds: f64, attributes: impl Iterator<Item = (&'static str, &'a str)>) {
        let attrs: Vec<KeyValue> = attributes.map(|(k, v)| KeyValue::new(k, v.to_string())).collect();
        self.record_set(name, seconds, &attrs);
    }

    fn record_set(&self, name: &str, seconds: f64, attributes: &[KeyValue]) {
        let histogram = match name {
            names::METRIC_EXECUTE_TOOL_DURATION => &self.tool,
            names::METRIC_MCP_CLIENT_DURATION => &self.mcp,
            names::METRIC_APPROVAL_WAIT => &self.approval,
            _ => return,
        };
        histogram.record(seconds, attributes);
    }
}

/// What the export thread does with a batch: spans to the collector, samples into the
/// histograms.
struct Exporting {
    spans: otlp::OtlpSpans,
    histograms: Histograms,
    /// The attribute sets recorded lately, as the SDK takes them.
    sets: AttributeSets,
}

impl batch::Export for Exporting {
    fn export(&mut self, batch: &[record::SpanRecord]) -> Result<(), String> {
        self.spans.export(batch)
    }
    fn record(&mut self, samples: &[record::Sample]) {
        for s in samples {
            let attributes = self.sets.of(s);
            self.histograms.record_set(s.metric, s.seconds, attributes);
        }
    }
}

/// The `KeyValue` lists of the attribute sets seen lately. The SDK takes a sample's
/// attributes as `KeyValue`s, each string value its own `String`; a few tools make most
/// samples, so the list is kept for the next sample of the same set instead of being
/// made and freed each time.
#[derive(Default)]
struct AttributeSets {
    sets: Vec<(record::Sample, Vec<KeyValue>)>,
}

/// How many sets are kept: the tools of a busy catalog; past it the list starts over.
const ATTRIBUTE_SETS_KEPT: usize = 256;

impl AttributeSets {
    fn of(&mut self, sample: &record::Sample) -> &[KeyValue] {
        let found = self.sets.iter().position(|(seen, _)| {
            seen.metric == sample.metric
                && seen.len == sample.len
                && seen.keys == sample.keys
                && seen.ends == sample.ends
                && seen.text() == sample.text()
        });
        let at = match found {
            Some(at) => at,
            None => {
                if self.sets.len() >= ATTRIBUTE_SETS_KEPT {
                    self.sets.clear();
                }
                let list = sample.attributes().map(|(k, v)| KeyValue::new(k, v.to_string())).collect();
                self.sets.push((sample.clone(), list));
                self.sets.len() - 1
            }
        };
        &self.sets[at].1
    }
}

/// The slot's hook: trace context in and out of `tracing` spans, and the histograms' samples
/// (queued for the export thread with toolslot's own pipeline, recorded at once with the
/// reference one).
struct Hook {
    histograms: Histograms,
    queue: Option<Arc<batch::Batcher>>,
    sampling: Sampling,
}

impl toolslot::telemetry::Telemetry for Hook {
    fn current_context(&self) -> Option<TraceContext> {
        let sc = match layer::context_of_current() {
            Some(sc) => sc,
            // The reference pipeline's (the bench's "before" column).
            None => tracing::Span::current().context().span().span_context().clone(),
        };
        if !sc.is_valid() {
            return None;
        }
        let state = sc.trace_state().header();
        Some(TraceContext {
            traceparent: format!("00-{}-{}-{:02x}", sc.trace_id(), sc.span_id(), sc.trace_flags().to_u8()),
            tracestate: (!state.is_empty()).then_some(state),
        })
    }

    fn record(&self, name: &'static str, seconds: f64, attributes: &[(&'static str, &str)]) {
        match &self.queue {
            Some(queue) => queue.sample(record::Sample::new(name, seconds, attributes)),
            None => self.histograms.record(name, seconds, attributes.iter().copied()),
        }
    }

    fn adopt(&self, span: &tracing::Span, parent: &TraceContext) {
        let mut carrier = HashMap::new();
        carrier.insert("traceparent".to_string(), parent.traceparent.clone());
        if let Some(state) = &parent.tracestate {
            carrier.insert("tracestate".to_string(), state.clone());
        }
        let cx = TraceContextPropagator::new().extract(&carrier);
        let remote = self.sampling.parent(cx.span().span_context().clone());
        // A span already entered keeps what its children inherited; the callers adopt before
        // entering.
        if remote.is_valid() && !layer::adopt(span, &remote) {
            let _ = span.set_parent(cx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attribute_set_is_made_once_and_told_apart_from_others() {
        let mut sets = AttributeSets::default();
        let one = record::Sample::new("m", 1.0, &[("gen_ai.tool.name", "read_file")]);
        let first = sets.of(&one).as_ptr();
        assert_eq!(sets.of(&one.clone()).as_ptr(), first, "the same set is not made again");
        // The same bytes split otherwise, or under another metric, are other sets.
        let split = record::Sample::new("m", 1.0, &[("gen_ai.tool.name", "read_"), ("error.type", "file")]);
        assert_eq!(
            sets.of(&split),
            [KeyValue::new("gen_ai.tool.name", "read_"), KeyValue::new("error.type", "file")]
        );
        let other = record::Sample::new("n", 1.0, &[("gen_ai.tool.name", "read_file")]);
        sets.of(&other);
        assert_eq!(sets.sets.len(), 3);
        for i in 0..=ATTRIBUTE_SETS_KEPT {
            let name = format!("tool_{i}");
            assert_eq!(
                sets.of(&record::Sample::new("m", 1.0, &[("gen_ai.tool.name", &name)])),
                [KeyValue::new("gen_ai.tool.name", name.clone())]
            );
        }
        assert!(sets.sets.len() <= ATTRIBUTE_SETS_KEPT, "{} kept", sets.sets.len());
    }
}
