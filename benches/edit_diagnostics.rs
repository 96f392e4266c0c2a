//! What diagnostics add to an edit: the same round (one `write_file`, its content alternating
//! between a type error and its fix, so the server re-checks every time) on a file no server
//! handles, on a Python file (basedpyright) and on a TypeScript file (`tsc --lsp`), side by
//! side in one run, through the Dispatcher. Needs `bash scripts/install-test-deps.sh`.
//!
//! `cargo bench --bench edit_diagnostics -- --warm-up-time 5 --measurement-time 10`

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolslot::config::Config;
use toolslot::event::PipelineEvent;
use toolslot::registry::RegistryBuilder;
use toolslot_actors::{Dispatcher, RoundInput, SessionOptions};

fn round(path: &str, content: &str) -> Vec<u8> {
    let args = json!({"path": path, "content": content}).to_string();
    let head = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_0", "type": "function", "function": {"name": "write_file", "arguments": args}}]}, "finish_reason": null}]});
    format!("data: {head}\n\ndata: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"tool_calls\"}}]}}\n\ndata: [DONE]\n\n")
        .into_bytes()
}

fn config(dir: &Path) -> Arc<Config> {
    let deps = Path::new(env!("CARGO_MANIFEST_DIR")).join(".test-deps");
    let file = dir.join("bench.toml");
    std::fs::write(
        &file,
        format!(
            "[approval]\nmode = \"full-auto\"\n[loop_guard]\nexempt = [\"write_file\"]\n[overflow]\ndir = \"{}\"\n\
             [lsp]\nwait_ms = 60000\n\
             [[lsp.servers]]\nname = \"python\"\ncommand = [\"{}\", \"--stdio\"]\nextensions = [\"py\"]\n\
             [[lsp.servers]]\nname = \"typescript\"\ncommand = [\"{}\", \"--lsp\", \"--stdio\"]\nextensions = [\"ts\"]\n",
            dir.join("overflow").display(),
            deps.join("venv/bin/basedpyright-langserver").display(),
            deps.join("node/node_modules/.bin/tsc").display(),
        ),
    )
    .unwrap();
    Arc::new(Config::load_with_env(Some(&file), std::env::vars()).expect("bench config loads"))
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let registry = Arc::new(
        RegistryBuilder::new(Arc::clone(&config))
            .extend(toolslot::builtin::enabled(&config))
            .build(),
    );
    let system = actix_rt::System::new();
    let dispatcher = system.block_on(async { Dispatcher::new(Arc::clone(&config), registry) });
    let session = dispatcher.open_session(SessionOptions {
        workspace: Some(dir.path().to_path_buf()),
        ..Default::default()
    });
    let cases = [
        ("no_server", "notes.txt", "count = double(\"two\")\n", "count = double(2)\n", None),
        (
            "basedpyright",
            "app.py",
            "def double(n: int) -> int:\n    return n * 2\n\ncount: int = double(\"two\")\n",
            "def double(n: int) -> int:\n    return n * 2\n\ncount: int = double(2)\n",
            Some("Diagnostics (python)"),
        ),
        (
            "tsc_lsp",
            "app.ts",
            "export function double(n: number): number {\n  return n * 2;\n}\nexport const count: number = double(\"two\");\n",
            "export function double(n: number): number {\n  return n * 2;\n}\nexport const count: number = double(2);\n",
            Some("Diagnostics (typescript)"),
        ),
    ];
    let mut g = c.benchmark_group("edit_round");
    for (label, path, broken, fixed, expect) in cases {
        let bodies = [round(path, broken), round(path, fixed)];
        g.bench_function(label, |b| {
            b.iter_custom(|iters| {
                system.block_on(async {
                    let start = Instant::now();
                    for i in 0..iters {
                        let body = bodies[(i % 2) as usize].clone();
                        let input = RoundInput::Bytes(Box::pin(futures::stream::iter([Ok(body)])));
                        let mut events = dispatcher.submit_round(&session, input).unwrap();
                        let mut content = String::new();
                        while let Some(e) = events.recv().await {
                            if let PipelineEvent::RoundComplete { results, .. } = e {
                                content = results[0].content.clone();
                            }
                        }
                        // Every round got its diagnostics (not a note that they were late).
                        let expected: Value = json!(expect.is_none_or(|e| content.contains(e) && !content.contains("not ready")));
                        assert_eq!(expected, json!(true), "{content}");
                    }
                    start.elapsed()
                })
            })
        });
    }
    g.finish();
    let _ = dispatcher.close_session(&session);
}

criterion_group!(benches, bench);
criterion_main!(benches);
