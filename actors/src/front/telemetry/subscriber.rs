//! One `tracing` subscriber for the log and the exporter.
//!
//! Why not `tracing-subscriber`'s per-layer filters alone: a filtered layer looks the span up
//! in the registry on every enter, exit and close to learn whether its filter took it, and
//! with the log and the exporter each filtered that was the largest single part of what
//! export costs a round (BENCHMARKS.md, "One filter for the log and the exporter"). When
//! `RUST_LOG` has only static directives (a target and a level, which a span's metadata
//! decides), a [`Gate`] enables what either side wants and each side keeps its own: the
//! exporter by [`exported`], the log by its filter when a span starts, a field is recorded or
//! an event is written ([`LogLayer`]). Directives on spans or fields (`[span{field=…}]`) need
//! the per-layer filter's tracking of which span is entered; with those, and for the
//! reference exporter, the layers are filtered as before.

use std::marker::PhantomData;

use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::filter::ParseError;
use tracing_subscriber::fmt::format::{DefaultFields, JsonFields};
use tracing_subscriber::fmt::{FormatFields, FormattedFields, MakeWriter};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{EnvFilter, Registry};

use super::Telemetry;
use super::layer::{SpanLayer, exported};

/// How the log writes a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogStyle {
    /// Human-readable lines, with colours when `ansi`.
    Text {
        /// Colours (the writer is a terminal).
        ansi: bool,
    },
    /// One JSON object a line.
    Json,
}

/// The subscriber: the log, filtered by `directives` (`RUST_LOG`'s syntax), written to
/// `writer` in `style`; and, when `telemetry` is on, the exporter.
///
/// # Errors
/// [`FilterError`]: `directives` that do not parse.
pub fn subscriber<W>(style: LogStyle, writer: W, directives: &str, telemetry: Option<&Telemetry>) -> Result<Built, FilterError>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    match telemetry {
        Some(t) => match t.own_layer() {
            Some(own) => compose(style, writer, directives, Some(own)),
            None => filtered(style, writer, directives, Some(t.layer())),
        },
        None => compose(style, writer, directives, None),
    }
}

/// A subscriber ready to install.
pub type Built = Box<dyn Subscriber + Send + Sync>;

type Filtered = tracing_subscriber::layer::Layered<Box<dyn Layer<Registry> + Send + Sync>, Registry>;

/// The log and toolslot's own exporter, behind one filter where `directives` allow it.
fn compose<W>(style: LogStyle, writer: W, directives: &str, own: Option<SpanLayer>) -> Result<Built, FilterError>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    // Span and field directives are the only ones that look past a callsite's metadata.
    if directives.contains('[') {
        let own = own.map(|l| l.with_filter(tracing_subscriber::filter::filter_fn(exported)));
        return filtered(style, writer, directives, own);
    }
    type Base = tracing_subscriber::layer::Layered<Gate, Registry>;
    // Two filters of the same directives: `EnvFilter` is not `Clone`, and both sides decide.
    let gate = Gate {
        log: log_filter(directives)?,
        export: own.is_some(),
    };
    let log: Box<dyn Layer<Base> + Send + Sync> = match style {
        LogStyle::Text { ansi } => Box::new(LogLayer::<_, DefaultFields>::new(
            tracing_subscriber::fmt::layer().with_writer(writer).with_ansi(ansi),
            log_filter(directives)?,
            "",
        )),
        LogStyle::Json => Box::new(LogLayer::<_, JsonFields>::new(
            tracing_subscriber::fmt::layer().json().with_writer(writer),
            log_filter(directives)?,
            "{}",
        )),
    };
    Ok(Box::new(tracing_subscriber::registry().with(gate).with(log).with(own)))
}

/// The log and an exporter each behind a per-layer filter.
fn filtered<W, E>(style: LogStyle, writer: W, directives: &str, export: Option<E>) -> Result<Built, FilterError>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
    E: Layer<Filtered> + Send + Sync + 'static,
{
    let log: Box<dyn Layer<Registry> + Send + Sync> = match style {
        LogStyle::Text { ansi } => Box::new(
            tracing_subscriber::fmt::layer()
                .with_writer(writer)
                .with_ansi(ansi)
                .with_filter(log_filter(directives)?),
        ),
        LogStyle::Json => Box::new(
            tracing_subscriber::fmt::layer()
                .json()
                .with_writer(writer)
                .with_filter(log_filter(directives)?),
        ),
    };
    Ok(Box::new(tracing_subscriber::registry().with(log).with(export)))
}

/// Log filter directives (`RUST_LOG`) that do not parse.
#[derive(Debug, thiserror::Error)]
#[error("log filter `{directives}` does not parse: {reason}")]
pub struct FilterError {
    directives: String,
    reason: ParseError,
}

fn log_filter(directives: &str) -> Result<EnvFilter, FilterError> {
    EnvFilter::builder().parse(directives).map_err(|reason| FilterError {
        directives: directives.to_string(),
        reason,
    })
}

/// The one filter: a callsite is on when the log's filter or the exporter wants it.
pub(super) struct Gate {
    log: EnvFilter,
    export: bool,
}

impl Gate {
    fn exports(&self, meta: &Metadata<'_>) -> bool {
        self.export && exported(meta)
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Gate {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if self.exports(meta) {
            return Interest::always();
        }
        Layer::<S>::register_callsite(&self.log, meta)
    }

    fn enabled(&self, meta: &Metadata<'_>, ctx: Context<'_, S>) -> bool {
        self.exports(meta) || Layer::<S>::enabled(&self.log, meta, ctx)
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        let log = Layer::<S>::max_level_hint(&self.log);
        if self.export {
            // Exported spans are at info; exported events at warn.
            return log.map(|l| l.max(tracing::level_filters::LevelFilter::INFO));
        }
        log
    }
}

/// The log's layer behind the [`Gate`]: it sees a span or an event only when its own filter
/// took it, as a filtered layer would, but asks nothing on enter, exit or close (the format
/// writes no span events, so it has nothing to do there).
struct LogLayer<L, N> {
    inner: L,
    filter: EnvFilter,
    /// The fields of an exported span the log did not take, should the log write an event
    /// inside it: the format expects every span in an event's scope to have some (`{}` for
    /// JSON, nothing for text).
    blank: &'static str,
    _fields: PhantomData<fn(N)>,
}

impl<L, N> LogLayer<L, N> {
    fn new(inner: L, filter: EnvFilter, blank: &'static str) -> Self {
        LogLayer {
            inner,
            filter,
            blank,
            _fields: PhantomData,
        }
    }
}

impl<S, L, N> Layer<S> for LogLayer<L, N>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    L: Layer<S>,
    N: for<'w> FormatFields<'w> + 'static,
{
    fn on_register_dispatch(&self, subscriber: &tracing::Dispatch) {
        self.inner.on_register_dispatch(subscriber);
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Layer::<S>::max_level_hint(&self.filter)
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if Layer::<S>::enabled(&self.filter, attrs.metadata(), ctx.clone()) {
            self.inner.on_new_span(attrs, id, ctx);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if ctx.metadata(id).is_some_and(|m| Layer::<S>::enabled(&self.filter, m, ctx.clone())) {
            self.inner.on_record(id, values, ctx);
        }
    }

    fn on_follows_from(&self, span: &Id, follows: &Id, ctx: Context<'_, S>) {
        self.inner.on_follows_from(span, follows, ctx);
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if !Layer::<S>::enabled(&self.filter, event.metadata(), ctx.clone()) {
            return;
        }
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope {
                let mut ext = span.extensions_mut();
                if ext.get_mut::<FormattedFields<N>>().is_none() {
                    ext.insert(FormattedFields::<N>::new(self.blank.to_string()));
                }
            }
        }
        self.inner.on_event(event, ctx);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        self.inner.on_close(id, ctx);
    }

    fn on_id_change(&self, old: &Id, new: &Id, ctx: Context<'_, S>) {
        self.inner.on_id_change(old, new, ctx);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::super::layer::{Ended, Sink};
    use super::*;

    /// What the log wrote, and the spans (with their events) the exporter ended, while `f` ran
    /// under the subscriber.
    fn run(style: LogStyle, directives: &str, f: impl FnOnce()) -> (String, Vec<String>) {
        let log = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = Arc::new(Ended::default());
        let writer = {
            let log = Arc::clone(&log);
            move || Writer(Arc::clone(&log))
        };
        let own = SpanLayer::new(Arc::clone(&sink) as Sink, 1.0);
        let built = compose(style, writer, directives, Some(own)).unwrap();
        tracing::subscriber::with_default(built, f);
        let text = String::from_utf8(log.lock().unwrap().clone()).unwrap();
        let spans = std::mem::take(&mut *sink.0.lock().unwrap())
            .into_iter()
            .map(|span| {
                let events: Vec<&str> = span.events.iter().map(|e| span.str(&e.name)).collect();
                format!("{}[{}]", span.str(&span.name), events.join(","))
            })
            .collect();
        (text, spans)
    }

    struct Writer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Writer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A round with a call inside, a bookkeeping span, and events at several levels.
    fn round() {
        let round = tracing::info_span!("round", session = "s1");
        let _r = round.enter();
        let plan = tracing::info_span!("plan");
        let _p = plan.enter();
        let call = tracing::info_span!("call", tool = "read_file");
        let _c = call.enter();
        tracing::info!("quiet");
        tracing::warn!("careful");
        tracing::warn!(target: "elsewhere", "foreign");
    }

    #[test]
    fn one_filter_serves_the_log_and_the_exporter() {
        let (log, spans) = run(LogStyle::Text { ansi: false }, "warn", round);
        assert_eq!(
            spans,
            ["call[careful]", "round[]"],
            "what the log leaves out is still exported; another crate's warning is not a span event"
        );
        assert!(log.contains("careful") && log.contains("foreign"), "{log}");
        assert!(!log.contains("quiet"), "info is below the log's filter: {log}");
        assert!(log.contains("round:call:"), "an event's spans are named in the log: {log}");
        let (_, spans) = run(LogStyle::Text { ansi: false }, "warn", || {
            assert!(tracing::debug_span!("deep").is_disabled(), "nobody wants debug spans");
        });
        assert!(spans.is_empty());
        // Asked of the subscriber itself: `LevelFilter::current()` is the most any subscriber
        // alive in the process wants, and the other tests' run beside this one.
        let own = SpanLayer::new(Arc::new(Ended::default()) as Sink, 1.0);
        let built = compose(LogStyle::Text { ansi: false }, std::io::sink, "warn", Some(own)).unwrap();
        assert_eq!(built.max_level_hint(), Some(tracing::level_filters::LevelFilter::INFO));
    }

    #[test]
    fn the_log_takes_spans_its_filter_allows() {
        let (log, spans) = run(LogStyle::Text { ansi: false }, "info", round);
        assert_eq!(spans, ["call[careful]", "round[]"], "the log's own spans (plan) are not exported");
        assert!(
            log.contains("quiet") && log.contains("round{session=\"s1\"}:plan:call{tool=\"read_file\"}"),
            "{log}"
        );
    }

    #[test]
    fn json_lines_name_spans_the_log_did_not_take() {
        let (log, _) = run(LogStyle::Json, "warn", round);
        let lines: Vec<serde_json::Value> = log.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2, "{log}");
        assert_eq!(lines[0]["fields"]["message"], "careful");
        assert_eq!(lines[0]["span"]["name"], "call", "{log}");
    }

    #[test]
    fn span_directives_are_honoured() {
        let (log, spans) = run(LogStyle::Text { ansi: false }, "warn,[call]=info", round);
        assert!(log.contains("quiet"), "info inside `call` is asked for: {log}");
        assert_eq!(spans, ["call[careful]", "round[]"]);
        let (log, _) = run(LogStyle::Text { ansi: false }, "warn,[other]=info", round);
        assert!(!log.contains("quiet"), "{log}");
    }

    #[test]
    fn directives_that_do_not_parse_are_an_error() {
        let e = compose(LogStyle::Json, std::io::sink, "warn,x=loud", None).err().expect("refused");
        assert!(e.to_string().contains("loud"), "{e}");
    }
}
