//! What OpenTelemetry export costs a round: `round_noop_x8` (8 no-op calls through the full
//! pipeline, as in `actor_roundtrip`) and `round_sleep1ms_x8` (8 calls of a 1 ms tool) with no
//! subscriber, with the binary's log layer and export off, and with export on to a local
//! OTLP/HTTP endpoint that accepts and discards (through toolslot's span encoder behind one
//! filter, as the binary installs it; behind two per-layer filters; and through
//! `opentelemetry-otlp`'s exporter for comparison), side by side in one run.

mod support;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use toolslot_actors::front::telemetry::{LogStyle, Telemetry, subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let system = actix_rt::System::new();
    let (config, _, dispatcher, session) = support::one_thread_pipeline(dir.path(), &system);
    let k = 8;
    let workloads = [
        ("noop", support::round("noop", k, |i| json!({"i": i}))),
        ("sleep1ms", support::round("sleep1ms", k, |i| json!({"i": i}))),
    ];
    let round = |b: &mut criterion::Bencher, body: &Vec<u8>| {
        b.iter_custom(|iters| system.block_on(support::actor_rounds(&dispatcher, &session, body, k, iters)))
    };
    // What the binary installs with export off: the log at its default filter. The pipeline
    // runs on this thread (`workers = 0`), so a scoped subscriber is the one it sees.
    let installed = |t: Option<&Telemetry>| subscriber(LogStyle::Text { ansi: false }, std::io::sink, "warn", t).unwrap();
    for (tool, body) in &workloads {
        let mut g = c.benchmark_group(format!("round_{tool}_x8"));
        g.bench_function("no_subscriber", |b| round(b, body));
        tracing::subscriber::with_default(installed(None), || g.bench_function("export_off", |b| round(b, body)));
        g.finish();
    }
    // Started only now: it installs the slot's hook (the histograms) for the whole process.
    let mut cfg = config.telemetry.clone();
    // An OTLP/HTTP endpoint that reads each request whole and answers 200 (keep-alive).
    cfg.otlp_endpoint =
        support::http_stub::serve(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n").0;
    let telemetry = Telemetry::start(&cfg).unwrap().unwrap();
    // The same, with `opentelemetry-otlp`'s span exporter (what export used before toolslot
    // encoded spans itself): the "before" column.
    let reference = Telemetry::start_with_reference_exporter(&cfg).unwrap().unwrap();
    // The log and the exporter each behind a per-layer filter: how the binary composed them
    // before one filter served both (`telemetry::subscriber`).
    let log = || {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::sink)
            .with_filter(tracing_subscriber::EnvFilter::new("warn"))
    };
    for (tool, body) in &workloads {
        let mut g = c.benchmark_group(format!("round_{tool}_x8"));
        tracing::subscriber::with_default(installed(Some(&reference)), || {
            g.bench_function("export_on_reference_exporter", |b| round(b, body))
        });
        let filtered = tracing_subscriber::registry().with(log()).with(Some(telemetry.layer()));
        tracing::subscriber::with_default(filtered, || g.bench_function("export_on_two_filters", |b| round(b, body)));
        tracing::subscriber::with_default(installed(Some(&telemetry)), || g.bench_function("export_on", |b| round(b, body)));
        g.finish();
    }
    for (name, t) in [("reference exporter", &reference), ("toolslot's encoder", &telemetry)] {
        let s = t.stats();
        eprintln!(
            "{name}: spans {} ended, {} exported, {} failed",
            s.ended(),
            s.exported(),
            s.failed()
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
