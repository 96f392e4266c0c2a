//! SSE bytes → normalized events, on every recorded fixture: toolslot's parser and decoders
//! side by side with what a user would reach for first (eventsource-stream + serde_json).

use std::convert::Infallible;
use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use toolslot::stream::dialect::{Dialect, decoder_for};
use toolslot::stream::sse::{SseParser, frame_data_lines};
use toolslot::stream::{Assembler, StreamEvent};

/// A network read: both sides get the same chunks.
const CHUNK: usize = 512;

fn corpus() -> Vec<(Dialect, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/recorded");
    let mut out = Vec::new();
    for (dir, dialect) in [
        ("anthropic", Dialect::Anthropic),
        ("openai-chat", Dialect::OpenaiChat),
        ("openai-compatible", Dialect::OpenaiChat),
        ("openai-responses", Dialect::OpenaiResponses),
        ("gemini", Dialect::Gemini),
    ] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir)).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        for f in files {
            let raw = std::fs::read(&f).unwrap();
            let body = if f.extension().is_some_and(|e| e == "jsonl") {
                frame_data_lines(&raw)
            } else {
                raw
            };
            out.push((dialect, body));
        }
    }
    out
}

fn toolslot_decode(corpus: &[(Dialect, Vec<u8>)]) -> usize {
    let mut n = 0;
    let mut sse = Vec::new();
    let mut events: Vec<StreamEvent> = Vec::new();
    for (dialect, body) in corpus {
        let mut parser = SseParser::new();
        let mut decoder = decoder_for(*dialect);
        for chunk in body.chunks(CHUNK) {
            parser.feed_into(chunk, &mut sse);
            for ev in sse.drain(..) {
                decoder.decode(&ev, &mut events);
            }
            n += events.len();
            events.clear();
        }
        for ev in parser.finish() {
            decoder.decode(&ev, &mut events);
        }
        decoder.finish(&mut events);
        n += events.len();
        events.clear();
    }
    n
}

fn toolslot_assemble(corpus: &[(Dialect, Vec<u8>)]) -> usize {
    let mut n = 0;
    let mut out = Vec::new();
    for (_, body) in corpus {
        let mut a = Assembler::new(None);
        for chunk in body.chunks(CHUNK) {
            a.feed(chunk, &mut out);
        }
        a.finish(&mut out);
        n += out.len();
        out.clear();
    }
    n
}

fn eventsource_serde_json(corpus: &[(Dialect, Vec<u8>)]) -> usize {
    futures::executor::block_on(async {
        let mut n = 0;
        for (_, body) in corpus {
            let chunks = futures::stream::iter(body.chunks(CHUNK).map(Ok::<_, Infallible>));
            let mut events = chunks.eventsource();
            while let Some(ev) = events.next().await {
                let Ok(ev) = ev else { continue };
                if ev.data == "[DONE]" {
                    continue;
                }
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&ev.data) {
                    black_box(&v);
                    n += 1;
                }
            }
        }
        n
    })
}

fn bench(c: &mut Criterion) {
    let corpus = corpus();
    let bytes: usize = corpus.iter().map(|(_, b)| b.len()).sum();
    let mut g = c.benchmark_group("sse_to_events");
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("toolslot_decode", |b| b.iter(|| toolslot_decode(black_box(&corpus))));
    g.bench_function("eventsource_stream_serde_json", |b| {
        b.iter(|| eventsource_serde_json(black_box(&corpus)))
    });
    g.bench_function("toolslot_assemble", |b| b.iter(|| toolslot_assemble(black_box(&corpus))));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
