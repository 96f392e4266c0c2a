//! What the actor pipeline costs: the same rounds through (a) the slot's functions called
//! directly in one task, with the same batching, and (b) the full pipeline through the
//! Dispatcher, side by side in one run.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use toolslot::event::PipelineEvent;
use toolslot::output::OverflowStore;
use toolslot::plan::loop_guard::LoopGuard;
use toolslot::session::SessionMemory;

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    // Both sides on one thread: the direct path runs in the bench's task, the pipeline on the
    // bench thread's arbiter (`workers = 0`).
    let system = actix_rt::System::new();
    let (config, registry, dispatcher, session) = support::one_thread_pipeline(dir.path(), &system);
    let memory = Arc::new(SessionMemory::new(
        "direct".into(),
        Arc::clone(&registry),
        Arc::new(OverflowStore::new(dir.path().join("overflow"))),
    ));
    let mut guard = LoopGuard::new(config.loop_guard.clone());
    for (label, tool, k) in [
        ("noop_x1", "noop", 1),
        ("noop_x8", "noop", 8),
        ("noop_x64", "noop", 64),
        ("sleep1ms_x8", "sleep1ms", 8),
    ] {
        let body = support::round(tool, k, |i| json!({"i": i}));
        let mut g = c.benchmark_group(format!("round_{label}"));
        if tool == "sleep1ms" {
            g.measurement_time(Duration::from_secs(8));
        }
        g.bench_function("direct", |b| {
            b.iter_custom(|iters| {
                system.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let r = support::direct_round(&config, &memory, &mut guard, dir.path(), &body, None).await;
                        assert_eq!(r.len(), k);
                    }
                    start.elapsed()
                })
            })
        });
        // The same logic, also telling the host what happened: the pipeline's events, built
        // and sent the same way, and read by the same kind of consumer.
        g.bench_function("direct_with_events", |b| {
            b.iter_custom(|iters| {
                system.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
                        support::direct_round(&config, &memory, &mut guard, dir.path(), &body, Some(&tx)).await;
                        drop(tx);
                        let mut n = 0;
                        while let Some(e) = rx.recv().await {
                            if let PipelineEvent::RoundComplete { results, .. } = e {
                                n = results.len();
                            }
                        }
                        assert_eq!(n, k);
                    }
                    start.elapsed()
                })
            })
        });
        g.bench_function("actors", |b| {
            b.iter_custom(|iters| system.block_on(support::actor_rounds(&dispatcher, &session, &body, k, iters)))
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
