//! Argument repair per case, valid, broken and in another dialect, side by side with
//! serde_json alone (which only parses, and fails on every broken case).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use toolslot::repair::args::repair_arguments;

const LIMIT: usize = 1 << 20;

/// Realistic arguments as models send them: short paths, commands, multi-line edits.
const VALID: &[&str] = &[
    r#"{"path": "src/main.rs"}"#,
    r#"{"command": "cargo test --workspace", "timeout_ms": 60000}"#,
    r#"{"path": "src/lib.rs", "search": "fn old(a: u32) -> u32 {\n    a + 1\n}", "replace": "fn new(a: u32) -> u32 {\n    a + 2\n}"}"#,
    r#"{"query": "list files in a folder", "limit": 3}"#,
    r#"{"pattern": "TODO|FIXME", "path": ".", "max": 100}"#,
    r#"{"edits": [{"search": "a", "replace": "b"}, {"search": "c", "replace": "d"}]}"#,
];

/// The same shapes broken the ways models break them.
const BROKEN: &[&str] = &[
    r#"{"path": "src/main.rs",}"#,
    r#"{"command": "cargo test --workspace", "timeout_ms": 60000"#,
    "{\"path\": \"src/lib.rs\", \"search\": \"fn old(a: u32) -> u32 {\n    a + 1\n}\", \"replace\": \"fn new(a: u32) -> u32 {\n    a + 2\n}\"}",
    r#"{"query": "list files in a folder", "limit": 3}}"#,
    r#"{"pattern": "TODO|FIXME", "path": ".", "max": tru"#,
    r#"{"edits": [{"search": "a", "replace": "b"}, {"search": "c", "replace": "d"#,
];

/// The same shapes as models used to other languages write them (each needs the tolerant
/// reader: single quotes and `True`, bare keys, a fence, comments and a missing comma, quotes
/// inside a value and a number cut after `.`, a closer of the wrong kind with more after it).
const DIALECT: &[&str] = &[
    "{'path': 'src/main.rs', 'recursive': True}",
    r#"{command: "cargo test --workspace", timeout_ms: 60000}"#,
    "```json\n{\"path\": \"src/lib.rs\", \"search\": \"fn old(a: u32) -> u32 {\\n    a + 1\\n}\"}\n```",
    "{\n  \"query\": \"list files in a folder\" // what to find\n  \"limit\": 3\n}",
    r#"{"pattern": "say "TODO" here", "path": ".", "max": 100.}"#,
    r#"{"edits": [{"search": "a", "replace": "b"}, {"search": "c", "replace": "d"}}, "path": "x.rs"}"#,
];

fn bench(c: &mut Criterion) {
    for (label, cases) in [("valid", VALID), ("broken", BROKEN), ("dialect", DIALECT)] {
        let mut g = c.benchmark_group(format!("repair_{label}"));
        g.throughput(Throughput::Elements(cases.len() as u64));
        g.bench_function("toolslot_ladder", |b| {
            b.iter(|| {
                for case in cases {
                    black_box(repair_arguments(black_box(case), LIMIT).ok());
                }
            })
        });
        g.bench_function("serde_json_only", |b| {
            b.iter(|| {
                for case in cases {
                    black_box(serde_json::from_str::<serde_json::Value>(black_box(case)).ok());
                }
            })
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
