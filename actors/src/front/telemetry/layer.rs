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
use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::Registry;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use super::record::{Attr, EventRecord, Kind, SpanRecord, StatusRecord, Text, Val};

/// Where ended spans go: the batch queue (`batch.rs`), or a test's list.
pub(super) trait SpanSink: Send + Sync {
    /// Takes an ended, sampled span.
    fn end(&self, span: SpanRecord);
    /// A blank record to record a new span into (one exported earlier, reused, where the
    /// sink keeps them).
    fn blank(&self) -> SpanRecord {
        SpanRecord::blank("")
    }
}

/// The sink the layer holds.
pub(super) type Sink = Arc<dyn SpanSink>;

/// The ratio sampler's decision on `trace`, on the trace id's low 63 bits as the SDK's
/// `TraceIdRatioBased`: every span of a trace gets the same one, wherever it is decided.
pub(super) fn ratio_keeps(ratio: f64, trace: TraceId) -> bool {
    if ratio >= 1.0 {
        return true;
    }
    if ratio <= 0.0 {
        return false;
    }
    let bytes = trace.to_bytes();
    let mut low = [0u8; 8];
    low.copy_from_slice(&bytes[8..]);
    (u64::from_be_bytes(low) >> 1) < (ratio * (1u64 << 63) as f64) as u64
}

/// The layer. A span without a parent in this process is sampled by [`ratio_keeps`]; its
/// children follow it, and a parent from another process decides as [`adopt`] is told.
pub(super) struct SpanLayer {
    sink: Sink,
    ratio: f64,
    ids: RandomIdGenerator,
}

impl SpanLayer {
    pub(super) fn new(sink: Sink, ratio: f64) -> Self {
        SpanLayer {
            sink,
            ratio,
            ids: RandomIdGenerator::default(),
        }
    }

    fn sampled(&self, trace: TraceId) -> bool {
        ratio_keeps(self.ratio, trace)
    }
}

/// Which spans and events go to the collector: toolslot's own, at info (spans) or warn
/// (events, which become span events), less the stages' bookkeeping spans (whose children
/// are then parented to the nearest exported span) and the language servers' answers, which
/// the post-processor asks for outside any call's span and would each start a trace.
pub(super) fn exported(meta: &tracing::Metadata<'_>) -> bool {
    if !meta.target().starts_with("toolslot") {
        return false;
    }
    if meta.is_span() {
        *meta.level() <= tracing::Level::INFO && !matches!(meta.name(), "submission" | "plan" | "batch" | "durable" | "diagnostics")
    } else {
        *meta.level() <= tracing::Level::WARN
    }
}

/// Nanoseconds since the Unix epoch, as OTLP has times.
fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// An open span's trace context and what it has recorded so far; attributes and events are
/// kept only when the span is sampled (or a root, which may yet be).
pub(super) struct Open {
    cx: SpanContext,
    parent: SpanId,
    parent_remote: bool,
    /// Ids, parent and flags are filled from the fields above when the span ends.
    span: SpanRecord,
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
    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::INFO)
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        // Unfiltered behind a `Gate` (`subscriber.rs`), this layer sees the log's spans too.
        if !exported(attrs.metadata()) {
            return;
        }
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
        let fields = meta.fields().len();
        let mut open = Open {
            cx: SpanContext::new(trace, self.ids.new_span_id(), flags, false, state),
            parent: parent_id,
            parent_remote: false,
            span: self.sink.blank(),
        };
        open.span.name = Text::Static(meta.name());
        open.span.start_ns = now_ns();
        // A root's fields are kept even when its trace is not sampled: it may yet adopt a
        // sampled parent from another process (`adopt`).
        if open.sampled() || root {
            open.span.attributes.reserve(fields);
            // Room for the usual strings of a span, so they take one allocation.
            open.span.text.reserve(24 * fields);
            attrs.record(&mut Fields(&mut open.span));
        }
        span.extensions_mut().insert(open);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        if let Some(open) = ext.get_mut::<Open>().filter(|o| o.sampled()) {
            values.record(&mut Fields(&mut open.span));
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        if !exported(event.metadata()) {
            return;
        }
        let Some(span) = ctx.event_span(event) else { return };
        let mut ext = span.extensions_mut();
        let Some(open) = ext.get_mut::<Open>().filter(|o| o.sampled()) else {
            return;
        };
        let level = *event.metadata().level();
        let mut fields = EventFields {
            span: &mut open.span,
            message: None,
            attributes: vec![Attr {
                key: "level",
                value: Val::Str(Text::Static(level.as_str())),
            }],
        };
        event.record(&mut fields);
        let EventFields { message, attributes, .. } = fields;
        let name = message.unwrap_or(Text::Static(event.metadata().name()));
        let span = &mut open.span;
        if level == tracing::Level::ERROR && span.status == StatusRecord::Unset {
            span.status = StatusRecord::Error(Cow::Owned(span.str(&name).to_string()));
        }
        span.events.push(EventRecord {
            time_ns: now_ns(),
            name,
            attributes,
        });
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(open) = span.extensions_mut().remove::<Open>() else {
            return;
        };
        if !open.sampled() {
            return;
        }
        let Open {
            cx,
            parent,
            parent_remote,
            mut span,
        } = open;
        span.trace_id = cx.trace_id().to_bytes();
        span.span_id = cx.span_id().to_bytes();
        span.parent_id = parent.to_bytes();
        span.parent_remote = parent_remote;
        span.flags = cx.trace_flags().to_u8();
        let state = cx.trace_state().header();
        if !state.is_empty() {
            span.trace_state = Some(state.into());
        }
        span.end_ns = now_ns();
        self.sink.end(span);
    }
}

/// A span's fields: the `otel.*` conventions, the rest as attributes, every string into the
/// span's one text.
struct Fields<'a>(&'a mut SpanRecord);

impl Fields<'_> {
    fn put(&mut self, field: &Field, value: Val) {
        self.0.attributes.push(Attr { key: field.name(), value });
    }

    /// An `otel.*` field: `true` when `field` is one (and was applied).
    fn convention(&mut self, field: &Field, value: &str) -> bool {
        let name = field.name();
        if !name.starts_with("otel.") {
            return false;
        }
        let span = &mut *self.0;
        match name {
            "otel.name" => span.name = span.keep(value),
            "otel.kind" => span.kind = Kind::named(value),
            "otel.status_code" => {
                span.status = match value.to_ascii_uppercase().as_str() {
                    "ERROR" => StatusRecord::Error(match &span.status {
                        StatusRecord::Error(description) => description.clone(),
                        _ => Cow::Borrowed(""),
                    }),
                    "OK" => StatusRecord::Ok,
                    _ => StatusRecord::Unset,
                }
            }
            "otel.status_message" => span.status = StatusRecord::Error(Cow::Owned(value.to_string())),
            _ => return false,
        }
        true
    }
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if !self.convention(field, value) {
            let text = self.0.keep(value);
            self.put(field, Val::Str(text));
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "otel.name" {
            // Made at run time (`execute_tool {name}`): formatted straight into the text.
            self.0.name = self.0.keep_formatted(format_args!("{value:?}"));
            return;
        }
        if field.name().starts_with("otel.") {
            let text = format!("{value:?}");
            self.record_str(field, &text);
            return;
        }
        let text = self.0.keep_formatted(format_args!("{value:?}"));
        self.put(field, Val::Str(text));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        let text = self.0.keep_formatted(format_args!("{value}"));
        self.put(field, Val::Str(text));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Val::I64(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        match i64::try_from(value) {
            Ok(v) => self.put(field, Val::I64(v)),
            Err(_) => {
                let text = self.0.keep_formatted(format_args!("{value}"));
                self.put(field, Val::Str(text));
            }
        }
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Val::F64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Val::Bool(value));
    }
}

/// An event's fields: `message` is its name, the rest attributes; strings into the span's text.
struct EventFields<'a> {
    span: &'a mut SpanRecord,
    message: Option<Text>,
    attributes: Vec<Attr>,
}

impl EventFields<'_> {
    fn put(&mut self, field: &Field, value: Val) {
        if field.name() == "message" {
            if let Val::Str(t) = value {
                self.message = Some(t);
            }
        } else {
            self.attributes.push(Attr { key: field.name(), value });
        }
    }
}

impl Visit for EventFields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        let text = self.span.keep(value);
        self.put(field, Val::Str(text));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = self.span.keep_formatted(format_args!("{value:?}"));
        self.put(field, Val::Str(text));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Val::I64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Val::Bool(value));
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

/// A sink that keeps what it is given (tests here and in `subscriber.rs`).
#[cfg(test)]
#[derive(Default)]
pub(super) struct Ended(pub std::sync::Mutex<Vec<SpanRecord>>);

#[cfg(test)]
impl SpanSink for Ended {
    fn end(&self, span: SpanRecord) {
        self.0.lock().unwrap().push(span);
    }
}

#[cfg(test)]
mod tests {

    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    /// Runs `f` under a registry with the layer (spans named `hidden` filtered out of it) and
    /// returns the spans it ended.
    fn ended(ratio: f64, f: impl FnOnce()) -> Vec<SpanRecord> {
        let sink = Arc::new(Ended::default());
        let layer =
            SpanLayer::new(Arc::clone(&sink) as Sink, ratio).with_filter(tracing_subscriber::filter::filter_fn(|m| m.name() != "hidden"));
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), f);
        std::mem::take(&mut *sink.0.lock().unwrap())
    }

    fn named<'a>(spans: &'a [SpanRecord], name: &str) -> &'a SpanRecord {
        spans
            .iter()
            .find(|s| s.str(&s.name) == name)
            .unwrap_or_else(|| panic!("no span {name}"))
    }

    fn has(span: &SpanRecord, key: &str, value: Val) -> bool {
        span.attributes.iter().any(|a| a.key == key && a.value == value)
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
                "otel.name" = %format_args!("execute_tool {}", "read_file"),
                "otel.status_code" = tracing::field::Empty,
                ok = false,
                shown = ?("a", 1),
            );
            let _c = call.enter();
            tracing::warn!(reason = "slow", "took long");
            tracing::error!("it broke");
            call.record("otel.status_code", "ERROR");
        });
        assert_eq!(spans.len(), 2, "the hidden span is not exported: {spans:?}");
        let round = named(&spans, "round");
        let call = named(&spans, "execute_tool read_file");
        assert_eq!(round.kind, Kind::Server);
        assert_eq!(round.parent_id, [0; 8]);
        assert_eq!(round.attr_str("session"), Some("s1"));
        assert!(has(round, "calls", Val::I64(8)));
        // The child of a left-out span is the child of the nearest kept one, in its trace.
        assert_eq!(call.parent_id, round.span_id);
        assert_eq!(call.trace_id, round.trace_id);
        assert!(has(call, "ok", Val::Bool(false)));
        assert_eq!(call.attr_str("shown"), Some("(\"a\", 1)"));
        assert!(!call.attributes.iter().any(|a| a.key.starts_with("otel.")));
        let names: Vec<&str> = call.events.iter().map(|e| call.str(&e.name)).collect();
        assert_eq!(names, ["took long", "it broke"]);
        let warn = &call.events[0];
        let event_str = |key: &str| {
            warn.attributes.iter().find(|a| a.key == key).and_then(|a| match &a.value {
                Val::Str(t) => Some(call.str(t)),
                _ => None,
            })
        };
        assert_eq!(event_str("reason"), Some("slow"));
        assert_eq!(event_str("level"), Some("WARN"));
        assert_eq!(
            call.status,
            StatusRecord::Error("it broke".into()),
            "the error event's message stays the description"
        );
        assert!(call.end_ns >= call.start_ns && call.start_ns > 0);
        assert_eq!(call.flags & 1, 1, "sampled");
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
        assert_eq!(run.trace_id, TraceId::from(7u128).to_bytes());
        assert_eq!(run.parent_id, SpanId::from(9u64).to_bytes());
        assert!(run.parent_remote);
        assert_eq!(run.attr_str("job"), Some("j1"), "a root's fields survive adoption");
        assert_eq!(named(&spans, "child").parent_id, run.span_id);
    }
}
