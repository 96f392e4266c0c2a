//! The `tracing` layer that turns toolslot's spans into OpenTelemetry span data for the batch
//! processor: ids, parent, name, kind, attributes, events and status, and nothing else.
//!
//! Why not `tracing-opentelemetry`: it keeps a span builder per span, copies every attribute
//! into it, builds an SDK span from it when the span closes (a tracer lookup, a sampler call, a
//! span processor's `on_start`) and ends that span into the same `SpanData` this layer builds
//! directly: about 16,000 instructions a span on the pipeline's thread, more than a no-op call
//! costs, where this layer spends a few thousand (BENCHMARKS.md, "OpenTelemetry export").
//! What it honours is what toolslot's spans use of `tracing-opentelemetry`'s conventions: the
//! `otel.name`, `otel.kind`, `otel.status_code` and `otel.status_message` fields, a warning or
//! error event as a span event (its message the event's name, `level` an attribute), an error
//! event as the span's error status, and a remote parent adopted before the span is entered.
//!
//! The trace context of an open span lives in the registry's extensions ([`Open`]), so the
//! slot's hook reads and sets it from any span, exported or not ([`context_of_current`],
//! [`adopt`]).

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use opentelemetry::trace::{Event, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState};
use opentelemetry::{InstrumentationScope, Key, KeyValue, Value};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SpanData, SpanEvents, SpanLinks, SpanProcessor};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::Registry;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// Where ended spans go: the batch processor (wrapped to count them).
pub(super) type Sink = Arc<dyn SpanProcessor>;

/// The layer. Sampling is the SDK's `ParentBased(TraceIdRatioBased(ratio))`, decided when a
/// span without a parent starts.
pub(super) struct SpanLayer {
    sink: Sink,
    ratio: f64,
    scope: InstrumentationScope,
    ids: RandomIdGenerator,
}

impl SpanLayer {
    pub(super) fn new(sink: Sink, ratio: f64) -> Self {
        SpanLayer {
            sink,
            ratio,
            scope: InstrumentationScope::builder("toolslot").build(),
            ids: RandomIdGenerator::default(),
        }
    }

    /// The ratio sampler's decision, on the trace id's low 63 bits as the SDK's.
    fn sampled(&self, trace: TraceId) -> bool {
        if self.ratio >= 1.0 {
            return true;
        }
        if self.ratio <= 0.0 {
            return false;
        }
        let bytes = trace.to_bytes();
        let mut low = [0u8; 8];
        low.copy_from_slice(&bytes[8..]);
        (u64::from_be_bytes(low) >> 1) < (self.ratio * (1u64 << 63) as f64) as u64
    }
}

/// An open span's trace context and what it has recorded so far; attributes and events are
/// kept only when the span is sampled (or a root, which may yet be).
pub(super) struct Open {
    cx: SpanContext,
    parent: SpanId,
    parent_remote: bool,
    name: Cow<'static, str>,
    kind: SpanKind,
    start: SystemTime,
    attributes: Vec<KeyValue>,
    events: Vec<Event>,
    status: Status,
}

impl Open {
    fn sampled(&self) -> bool {
        self.cx.is_sampled()
    }
}

impl<S> tracing_subscriber::Layer<S> for SpanLayer
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        // The nearest ancestor this layer keeps: bookkeeping spans in between are left out.
        let parent = span
            .scope()
            .skip(1)
            .find_map(|p| p.extensions().get::<Open>().map(|o| o.cx.clone()));
        let root = parent.is_none();
        let (trace, flags, state, parent_id) = match parent {
            Some(p) => (p.trace_id(), p.trace_flags(), p.trace_state().clone(), p.span_id()),
            None => {
                let trace = self.ids.new_trace_id();
                let flags = if self.sampled(trace) {
                    TraceFlags::SAMPLED
                } else {
                    TraceFlags::default()
                };
                (trace, flags, TraceState::default(), SpanId::INVALID)
            }
        };
        let meta = attrs.metadata();
        let mut open = Open {
            cx: SpanContext::new(trace, self.ids.new_span_id(), flags, false, state),
            parent: parent_id,
            parent_remote: false,
            name: Cow::Borrowed(meta.name()),
            kind: SpanKind::Internal,
            start: SystemTime::now(),
            attributes: Vec::new(),
            events: Vec::new(),
            status: Status::Unset,
        };
        // A root's fields are kept even when its trace is not sampled: it may yet adopt a
        // sampled parent from another process (`adopt`).
        if open.sampled() || root {
            open.attributes.reserve_exact(meta.fields().len());
            attrs.record(&mut Fields(&mut open));
        }
        span.extensions_mut().insert(open);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        if let Some(open) = ext.get_mut::<Open>().filter(|o| o.sampled()) {
            values.record(&mut Fields(open));
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.event_span(event) else { return };
        let mut ext = span.extensions_mut();
        let Some(open) = ext.get_mut::<Open>().filter(|o| o.sampled()) else {
            return;
        };
        let level = *event.metadata().level();
        let mut fields = EventFields {
            message: None,
            attributes: vec![KeyValue::new("level", level.as_str())],
        };
        event.record(&mut fields);
        let name: Cow<'static, str> = match fields.message {
            Some(m) => m.into(),
            None => Cow::Borrowed(event.metadata().name()),
        };
        if level == tracing::Level::ERROR && matches!(open.status, Status::Unset) {
            open.status = Status::error(name.clone());
        }
        open.events.push(Event::new(name, SystemTime::now(), fields.attributes, 0));
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(open) = span.extensions_mut().remove::<Open>() else {
            return;
        };
        if !open.sampled() {
            return;
        }
        let mut events = SpanEvents::default();
        events.events = open.events;
        self.sink.on_end(SpanData {
            span_context: open.cx,
            parent_span_id: open.parent,
            parent_span_is_remote: open.parent_remote,
            span_kind: open.kind,
            name: open.name,
            start_time: open.start,
            end_time: SystemTime::now(),
            attributes: open.attributes,
            dropped_attributes_count: 0,
            events,
            links: SpanLinks::default(),
            status: open.status,
            instrumentation_scope: self.scope.clone(),
        });
    }
}

/// A span's fields: the `otel.*` conventions, the rest as attributes.
struct Fields<'a>(&'a mut Open);

impl Fields<'_> {
    fn put(&mut self, field: &Field, value: Value) {
        self.0.attributes.push(KeyValue::new(Key::from_static_str(field.name()), value));
    }

    fn text(&mut self, field: &Field, value: Cow<'_, str>) {
        let open = &mut *self.0;
        match field.name() {
            "otel.name" => open.name = Cow::Owned(value.into_owned()),
            "otel.kind" => {
                open.kind = match value.to_ascii_lowercase().as_str() {
                    "server" => SpanKind::Server,
                    "client" => SpanKind::Client,
                    "producer" => SpanKind::Producer,
                    "consumer" => SpanKind::Consumer,
                    _ => SpanKind::Internal,
                }
            }
            "otel.status_code" => {
                open.status = match value.to_ascii_uppercase().as_str() {
                    "ERROR" => Status::error(match &open.status {
                        Status::Error { description } => description.clone(),
                        _ => Cow::Borrowed(""),
                    }),
                    "OK" => Status::Ok,
                    _ => Status::Unset,
                }
            }
            "otel.status_message" => {
                if let Status::Error { description } = &mut open.status {
                    *description = Cow::Owned(value.into_owned());
                } else {
                    open.status = Status::error(value.into_owned());
                }
            }
            _ => self.put(field, Value::String(value.into_owned().into())),
        }
    }
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.text(field, Cow::Borrowed(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.text(field, Cow::Owned(format!("{value:?}")));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.text(field, Cow::Owned(value.to_string()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::I64(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        match i64::try_from(value) {
            Ok(v) => self.put(field, Value::I64(v)),
            Err(_) => self.put(field, Value::String(value.to_string().into())),
        }
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::F64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }
}

/// An event's fields: `message` is its name, the rest attributes.
struct EventFields {
    message: Option<String>,
    attributes: Vec<KeyValue>,
}

impl Visit for EventFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = Some(value.to_string());
        } else {
            self.attributes
                .push(KeyValue::new(Key::from_static_str(field.name()), value.to_string()));
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        if field.name() == "message" {
            self.message = Some(text);
        } else {
            self.attributes.push(KeyValue::new(Key::from_static_str(field.name()), text));
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.attributes.push(KeyValue::new(Key::from_static_str(field.name()), value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.attributes.push(KeyValue::new(Key::from_static_str(field.name()), value));
    }
}

/// Runs `f` on the [`Open`] of `span` (or, with `or_ancestor`, of its nearest ancestor that
/// has one), through the registry under the current dispatcher; `None` where there is none.
fn with_open<T>(span: &tracing::Span, or_ancestor: bool, f: impl FnOnce(&mut Open) -> T) -> Option<T> {
    let mut out = None;
    span.with_subscriber(|(id, dispatch)| {
        let Some(registry) = dispatch.downcast_ref::<Registry>() else {
            return;
        };
        let Some(data) = registry.span(id) else { return };
        let levels = if or_ancestor { usize::MAX } else { 1 };
        for s in data.scope().take(levels) {
            let mut ext = s.extensions_mut();
            if let Some(open) = ext.get_mut::<Open>() {
                out = Some(f(open));
                return;
            }
        }
    });
    out
}

/// The trace context of the current span (the nearest one this layer keeps), with its
/// sampled flag; `None` when there is none.
pub(super) fn context_of_current() -> Option<SpanContext> {
    with_open(&tracing::Span::current(), true, |o| o.cx.clone())
}

/// Makes `parent` (a context from another process) the parent of `span`, which takes its
/// trace id and sampling decision. Returns whether `span` is one this layer keeps; a span
/// entered since keeps what its children already inherited, so callers adopt first.
pub(super) fn adopt(span: &tracing::Span, parent: &SpanContext) -> bool {
    with_open(span, false, |open| {
        open.cx = SpanContext::new(
            parent.trace_id(),
            open.cx.span_id(),
            parent.trace_flags(),
            false,
            parent.trace_state().clone(),
        );
        open.parent = parent.span_id();
        open.parent_remote = parent.is_remote();
    })
    .is_some()
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use opentelemetry_sdk::error::OTelSdkResult;
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    #[derive(Debug, Default)]
    struct Ended(Mutex<Vec<SpanData>>);

    impl SpanProcessor for Ended {
        fn on_start(&self, _: &mut opentelemetry_sdk::trace::Span, _: &opentelemetry::Context) {}
        fn on_end(&self, span: SpanData) {
            self.0.lock().unwrap().push(span);
        }
        fn force_flush(&self) -> OTelSdkResult {
            Ok(())
        }
        fn shutdown_with_timeout(&self, _: std::time::Duration) -> OTelSdkResult {
            Ok(())
        }
    }

    /// Runs `f` under a registry with the layer (spans named `hidden` filtered out of it) and
    /// returns the spans it ended.
    fn ended(ratio: f64, f: impl FnOnce()) -> Vec<SpanData> {
        let sink = Arc::new(Ended::default());
        let layer =
            SpanLayer::new(Arc::clone(&sink) as Sink, ratio).with_filter(tracing_subscriber::filter::filter_fn(|m| m.name() != "hidden"));
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), f);
        std::mem::take(&mut *sink.0.lock().unwrap())
    }

    fn named<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
        spans.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no span {name}"))
    }

    #[test]
    fn conventions_parents_and_events_are_kept() {
        let spans = ended(1.0, || {
            let round = tracing::info_span!("round", "otel.kind" = "server", session = "s1", calls = 8u64);
            let _r = round.enter();
            let hidden = tracing::info_span!("hidden");
            let _h = hidden.enter();
            let call = tracing::info_span!(
                "call",
                "otel.name" = "execute_tool read_file",
                "otel.status_code" = tracing::field::Empty,
                ok = false
            );
            let _c = call.enter();
            tracing::warn!(reason = "slow", "took long");
            tracing::error!("it broke");
            call.record("otel.status_code", "ERROR");
        });
        assert_eq!(spans.len(), 2, "the hidden span is not exported: {spans:?}");
        let round = named(&spans, "round");
        let call = named(&spans, "execute_tool read_file");
        assert_eq!(round.span_kind, SpanKind::Server);
        assert_eq!(round.parent_span_id, SpanId::INVALID);
        assert!(round.attributes.contains(&KeyValue::new("session", "s1")));
        assert!(round.attributes.contains(&KeyValue::new("calls", 8i64)));
        // The child of a left-out span is the child of the nearest kept one, in its trace.
        assert_eq!(call.parent_span_id, round.span_context.span_id());
        assert_eq!(call.span_context.trace_id(), round.span_context.trace_id());
        assert!(call.attributes.contains(&KeyValue::new("ok", false)));
        assert!(!call.attributes.iter().any(|kv| kv.key.as_str().starts_with("otel.")));
        let names: Vec<&str> = call.events.iter().map(|e| e.name.as_ref()).collect();
        assert_eq!(names, ["took long", "it broke"]);
        assert!(call.events[0].attributes.contains(&KeyValue::new("reason", "slow")));
        assert!(call.events[0].attributes.contains(&KeyValue::new("level", "WARN")));
        assert_eq!(
            call.status,
            Status::error("it broke"),
            "the error event's message stays the description"
        );
        assert!(call.end_time >= call.start_time);
    }

    #[test]
    fn a_trace_not_sampled_exports_nothing_and_an_adopted_parent_decides() {
        assert!(ended(0.0, || drop(tracing::info_span!("round").entered())).is_empty());
        let remote = SpanContext::new(
            TraceId::from(7u128),
            SpanId::from(9u64),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );
        let spans = ended(0.0, || {
            let run = tracing::info_span!("remote_run", job = "j1");
            assert!(adopt(&run, &remote));
            let _e = run.enter();
            assert_eq!(context_of_current().map(|c| c.trace_id()), Some(TraceId::from(7u128)));
            drop(tracing::info_span!("child").entered());
        });
        let run = named(&spans, "remote_run");
        assert_eq!(run.span_context.trace_id(), TraceId::from(7u128));
        assert_eq!(run.parent_span_id, SpanId::from(9u64));
        assert!(run.parent_span_is_remote);
        assert!(
            run.attributes.contains(&KeyValue::new("job", "j1")),
            "a root's fields survive adoption"
        );
        assert_eq!(named(&spans, "child").parent_span_id, run.span_context.span_id());
    }
}
