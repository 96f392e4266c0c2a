//! Every input stage is linear in the bytes it receives: the same pathological input at 1, 2,
//! 4, 8 and 16 MiB, streamed in small deltas, must take a flat time per MiB.
//!
//! Stages: SSE framing; each dialect decoder through the assembler (one call whose arguments
//! are N MiB of fragments, and N MiB of many small calls); the argument repair ladder; name
//! repair; and the forgery stripper with each shape that makes it hold text back (a line start
//! of spaces, runs of `<` and of backticks, an unterminated tag, nested forged tags).
//!
//! `cargo bench --bench input_linear`; BENCHMARKS.md has the table of time per MiB.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use toolslot::forgery::ForgeryStripper;
use toolslot::repair::args::repair_arguments;
use toolslot::repair::names::{NameIndex, NameLimits};
use toolslot::stream::sse::SseParser;
use toolslot::stream::{Assembler, Dialect};

const MIB: usize = 1 << 20;
const SIZES: [usize; 5] = [1, 2, 4, 8, 16];
/// Network reads and model deltas are small; a stage that re-scans what it holds on every
/// piece is quadratic exactly here.
const DELTA: usize = 16;

/// SSE frames of `data: <payload>` until `bytes` are reached.
fn sse_of(payloads: impl Iterator<Item = String>, bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 4096);
    for p in payloads {
        if out.len() >= bytes {
            break;
        }
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(p.as_bytes());
        out.extend_from_slice(b"\n\n");
    }
    out
}

/// One call whose argument text arrives in small fragments, per dialect.
fn one_big_call(dialect: Dialect, bytes: usize) -> Vec<u8> {
    let piece = "aaaaaaa ";
    let fragments = std::iter::repeat_n(piece, bytes / 40);
    match dialect {
        Dialect::OpenaiChat => {
            let head = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c0", "type": "function", "function": {"name": "write_file", "arguments": "{\"path\": \"a\", \"content\": \""}}]}}]}).to_string();
            let body = fragments.map(|f| {
                json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": f}}]}}]}).to_string()
            });
            sse_of(std::iter::once(head).chain(body), bytes)
        }
        Dialect::Anthropic => {
            let head = [
                json!({"type": "message_start", "message": {}}).to_string(),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t0", "name": "write_file", "input": {}}}).to_string(),
            ];
            let body = fragments.map(|f| {
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": f}}).to_string()
            });
            sse_of(head.into_iter().chain(body), bytes)
        }
        Dialect::OpenaiResponses => {
            let head = [
                json!({"type": "response.created", "response": {}}).to_string(),
                json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "function_call", "call_id": "c0", "name": "write_file"}}).to_string(),
            ];
            let body =
                fragments.map(|f| json!({"type": "response.function_call_arguments.delta", "output_index": 0, "delta": f}).to_string());
            sse_of(head.into_iter().chain(body), bytes)
        }
        Dialect::Gemini => {
            // Vertex's streamed arguments: string pieces appended at one path.
            let head = json!({"candidates": [{"content": {"parts": [{"functionCall": {"name": "write_file", "willContinue": true}}]}}]})
                .to_string();
            let body = fragments.map(|f| json!({"candidates": [{"content": {"parts": [{"functionCall": {"partialArgs": [{"jsonPath": "$.content", "stringValue": f}], "willContinue": true}}]}}]}).to_string());
            sse_of(std::iter::once(head).chain(body), bytes)
        }
    }
}

/// Many calls in one message, each left with unfinished arguments and fed again after later
/// calls started (what makes a per-call scan quadratic).
fn many_calls_chat(bytes: usize) -> Vec<u8> {
    let frames = (0..).flat_map(|i: usize| {
        [
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "id": format!("c{i}"), "function": {"name": "read_file", "arguments": "{\"path\": \""}}]}}]}).to_string(),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i / 2, "function": {"arguments": "x"}}]}}]}).to_string(),
        ]
    });
    sse_of(frames, bytes)
}

/// Assistant text of `bytes`, in text deltas of the Chat dialect.
fn text_stream(text: &str) -> Vec<u8> {
    let frames = text
        .as_bytes()
        .chunks(DELTA)
        .map(|c| json!({"choices": [{"index": 0, "delta": {"content": String::from_utf8_lossy(c)}}]}).to_string());
    sse_of(frames, usize::MAX)
}

fn assemble(dialect: Option<Dialect>, bytes: &[u8]) -> usize {
    let mut a = Assembler::new(dialect);
    let mut out = Vec::new();
    for chunk in bytes.chunks(512) {
        a.feed(chunk, &mut out);
    }
    a.finish(&mut out);
    out.len()
}

/// The forgery stripper's pathological texts.
fn stripper_shapes(bytes: usize) -> Vec<(&'static str, String)> {
    vec![
        ("spaces_at_line_start", format!("x\n{}", " ".repeat(bytes))),
        ("run_of_lt", "<".repeat(bytes)),
        ("run_of_backticks", "`".repeat(bytes)),
        ("unclosed_code_spans", "`a ".repeat(bytes / 3)),
        ("unterminated_tag", format!("<tool_call name=\"{}", "n".repeat(bytes))),
        ("nested_forged_tags", "<tool_call><ns:invoke name=\"x\">".repeat(bytes / 31)),
        (
            "prose",
            "The quick brown fox <b>jumps</b> over [the] lazy dog.\n\n".repeat(bytes / 55),
        ),
    ]
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("input_linear");
    g.sample_size(10);
    g.warm_up_time(std::time::Duration::from_millis(500));
    g.measurement_time(std::time::Duration::from_secs(2));
    for mib in SIZES {
        let bytes = mib * MIB;

        let sse = one_big_call(Dialect::OpenaiChat, bytes);
        g.throughput(Throughput::Bytes(sse.len() as u64));
        g.bench_with_input(BenchmarkId::new("sse_framing", mib), &sse, |b, sse| {
            b.iter(|| {
                let mut p = SseParser::new();
                let mut n = 0;
                for chunk in sse.chunks(DELTA) {
                    n += p.feed(chunk).len();
                }
                black_box(n + p.finish().len())
            })
        });
        for (name, dialect) in [
            ("decode_anthropic", Dialect::Anthropic),
            ("decode_openai_chat", Dialect::OpenaiChat),
            ("decode_openai_responses", Dialect::OpenaiResponses),
            ("decode_gemini", Dialect::Gemini),
        ] {
            let stream = one_big_call(dialect, bytes);
            g.throughput(Throughput::Bytes(stream.len() as u64));
            g.bench_with_input(BenchmarkId::new(name, mib), &stream, |b, s| {
                b.iter(|| black_box(assemble(Some(dialect), s)))
            });
        }
        let many = many_calls_chat(bytes);
        g.throughput(Throughput::Bytes(many.len() as u64));
        g.bench_with_input(BenchmarkId::new("assemble_many_calls", mib), &many, |b, s| {
            b.iter(|| black_box(assemble(Some(Dialect::OpenaiChat), s)))
        });
        // The text is `bytes` long; its stream (one small delta an event) is several times that.
        let spaces = text_stream(&format!("x\n{}", " ".repeat(bytes)));
        g.throughput(Throughput::Bytes(spaces.len() as u64));
        g.bench_with_input(BenchmarkId::new("assemble_text_spaces", mib), &spaces, |b, s| {
            b.iter(|| black_box(assemble(None, s)))
        });

        // The ladder on N MiB of argument text: a string cut mid-way, and deep nesting with
        // trailing commas and a stray closer.
        let cut = format!("{{\"path\": \"a\", \"content\": \"{}", "x ".repeat(bytes / 2));
        let nested = format!("{}1,{}}}", "[".repeat(bytes / 3), "],".repeat(bytes / 3));
        for (name, text) in [("repair_cut_string", cut), ("repair_deep_nesting", nested)] {
            g.throughput(Throughput::Bytes(text.len() as u64));
            g.bench_with_input(BenchmarkId::new(name, mib), &text, |b, t| {
                b.iter(|| black_box(repair_arguments(t, usize::MAX).is_ok()))
            });
        }

        let index = NameIndex::new((0..200).map(|i| format!("server_{i}__tool_name_{i}")));
        let limits = NameLimits {
            max_distance: 3,
            max_suggestions: 3,
            prefix_min_chars: 3,
        };
        let name = format!("Server1ToolName{}", "X".repeat(bytes));
        g.throughput(Throughput::Bytes(name.len() as u64));
        g.bench_with_input(BenchmarkId::new("name_repair", mib), &name, |b, n| {
            b.iter(|| black_box(index.resolve(n, limits, &|_| true)))
        });

        for (shape, text) in stripper_shapes(bytes) {
            g.throughput(Throughput::Bytes(text.len() as u64));
            g.bench_with_input(BenchmarkId::new(format!("forgery_{shape}"), mib), &text, |b, t| {
                b.iter(|| {
                    let mut s = ForgeryStripper::new();
                    let mut n = 0;
                    let mut rest = t.as_str();
                    while !rest.is_empty() {
                        let mut cut = rest.len().min(DELTA);
                        while !rest.is_char_boundary(cut) {
                            cut += 1;
                        }
                        n += s.push(&rest[..cut]).len();
                        rest = &rest[cut..];
                    }
                    black_box(n + s.finish().len())
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
