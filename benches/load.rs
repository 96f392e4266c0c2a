//! The load harness: N concurrent sessions, each feeding R rounds of K tool calls through the
//! Dispatcher.
//!
//! `cargo bench --bench load -- --sessions N --rounds R --calls K --tool noop|sleep1ms|read`
//!
//! `cargo bench --bench load -- --remote N --slots K --tool sleep10ms [--seconds S]` measures the
//! same pipeline with the tool routed through NATS JetStream to 1, 2, 4, … N worker processes,
//! side by side with in-process (see `support/remote.rs`).
//!
//! Prints calls/s, round latency p50/p99/max, peak RSS and RSS per idle session, and checks
//! that every round produced exactly one result per call, in order: a lost or duplicated
//! result fails the run with exit status 1.

mod support;

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use toolslot::event::PipelineEvent;
use toolslot_actors::{Dispatcher, RoundInput, SessionOptions};

struct Args {
    sessions: usize,
    rounds: usize,
    calls: usize,
    tool: String,
    workers: usize,
    remote: Option<usize>,
    slots: usize,
    seconds: f64,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        sessions: 100,
        rounds: 5,
        calls: 8,
        tool: "noop".into(),
        workers: 0,
        remote: None,
        slots: 4,
        seconds: 3.0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--sessions" => a.sessions = value()?.parse().map_err(|e| format!("--sessions: {e}"))?,
            "--rounds" => a.rounds = value()?.parse().map_err(|e| format!("--rounds: {e}"))?,
            "--calls" => a.calls = value()?.parse().map_err(|e| format!("--calls: {e}"))?,
            "--workers" => a.workers = value()?.parse().map_err(|e| format!("--workers: {e}"))?,
            "--tool" => a.tool = value()?,
            "--remote" => a.remote = Some(value()?.parse().map_err(|e| format!("--remote: {e}"))?),
            "--slots" => a.slots = value()?.parse().map_err(|e| format!("--slots: {e}"))?,
            "--seconds" => a.seconds = value()?.parse().map_err(|e| format!("--seconds: {e}"))?,
            // cargo bench passes this to every bench binary.
            "--bench" => {}
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if a.remote.is_some() {
        if !matches!(a.tool.as_str(), "noop" | "sleep1ms" | "sleep10ms" | "sleep20ms") || a.slots == 0 {
            return Err(format!(
                "--remote takes --tool noop, sleep1ms, sleep10ms or sleep20ms and --slots of 1 or more, not `{}`",
                a.tool
            ));
        }
    } else if !matches!(a.tool.as_str(), "noop" | "sleep1ms" | "read") {
        return Err(format!("--tool takes noop, sleep1ms or read, not `{}`", a.tool));
    }
    Ok(a)
}

/// (current RSS, peak RSS) in KiB, from /proc.
fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    // A worker process the remote mode started (this binary, re-run).
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("--as-worker") {
        let slots = argv.get(3).and_then(|s| s.parse().ok()).unwrap_or(1);
        support::remote::worker_main(argv.get(2).map_or("", String::as_str), slots);
    }
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("load: {e}");
            std::process::exit(2);
        }
    };
    if let Some(workers) = args.remote {
        let tool = match args.tool.as_str() {
            "sleep1ms" => "sleep1ms",
            "sleep10ms" => "sleep10ms",
            "sleep20ms" => "sleep20ms",
            _ => "noop",
        };
        let bad = support::remote::run(support::remote::RemoteArgs {
            workers,
            slots: args.slots,
            tool,
            seconds: args.seconds,
        });
        std::process::exit(if bad == 0 { 0 } else { 1 });
    }
    let dir = tempfile::tempdir().expect("a temporary folder");
    std::fs::write(dir.path().join("small.txt"), "a small file\nof two lines\n").expect("writable temp folder");
    let config = support::config(&dir.path().join("overflow"), args.workers);
    let registry = support::registry(&config);
    let (tool, arg): (&str, fn(usize) -> serde_json::Value) = match args.tool.as_str() {
        "read" => ("read_file", |_| json!({"path": "small.txt"})),
        "sleep1ms" => ("sleep1ms", |i| json!({"i": i})),
        _ => ("noop", |i| json!({"i": i})),
    };
    let body = Arc::new(support::round(tool, args.calls, arg));
    let system = actix_rt::System::new();
    let failed = system.block_on(async move {
        let dispatcher = Dispatcher::new(Arc::clone(&config), registry);
        let (rss_before, _) = rss_kib();
        let opened = Instant::now();
        let sessions: Vec<String> = (0..args.sessions)
            .map(|_| {
                dispatcher.open_session(SessionOptions {
                    workspace: Some(dir.path().to_path_buf()),
                    ..Default::default()
                })
            })
            .collect();
        let open_time = opened.elapsed();
        // Let every stage actor start before memory is read.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (rss_idle, _) = rss_kib();
        let per_session = (rss_idle.saturating_sub(rss_before)) as f64 / args.sessions.max(1) as f64;
        eprintln!(
            "opened {} sessions in {open_time:.2?}; RSS {} KiB → {} KiB ({per_session:.1} KiB per idle session)",
            args.sessions, rss_before, rss_idle
        );
        let done = Arc::new(AtomicUsize::new(0));
        let bad = Arc::new(AtomicUsize::new(0));
        let total_rounds = args.sessions * args.rounds;
        let progress = {
            let done = Arc::clone(&done);
            actix_rt::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    eprint!("\r{}/{} rounds", done.load(Ordering::Relaxed), total_rounds);
                    let _ = std::io::stderr().flush();
                }
            })
        };
        let start = Instant::now();
        let runs = sessions.iter().map(|s| {
            let dispatcher = dispatcher.clone();
            let body = Arc::clone(&body);
            let done = Arc::clone(&done);
            let bad = Arc::clone(&bad);
            let calls = args.calls;
            let rounds = args.rounds;
            async move {
                let mut latencies = Vec::with_capacity(rounds);
                for _ in 0..rounds {
                    let t = Instant::now();
                    let input = RoundInput::Bytes(Box::pin(futures::stream::iter([Ok(body.as_ref().clone())])));
                    let Ok(mut rx) = dispatcher.submit_round(s, input) else {
                        bad.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    let mut completes = 0;
                    let mut ok = false;
                    while let Some(e) = rx.recv().await {
                        if let PipelineEvent::RoundComplete { results, .. } = e {
                            completes += 1;
                            ok = results.len() == calls
                                && results
                                    .iter()
                                    .enumerate()
                                    .all(|(i, r)| r.index == i && r.tool_use_id == format!("call_{i}") && !r.is_error);
                        }
                    }
                    latencies.push(t.elapsed());
                    if !(ok && completes == 1) {
                        bad.fetch_add(1, Ordering::Relaxed);
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
                latencies
            }
        });
        let mut latencies: Vec<Duration> = futures::future::join_all(runs).await.into_iter().flatten().collect();
        let elapsed = start.elapsed();
        progress.abort();
        latencies.sort();
        let (_, peak) = rss_kib();
        let calls = total_rounds * args.calls;
        eprintln!();
        println!(
            "sessions={} rounds={} calls={} tool={} workers={}",
            args.sessions, args.rounds, args.calls, args.tool, config.execution.workers
        );
        println!(
            "calls/s={:.0} rounds/s={:.0} elapsed={:.2?}",
            calls as f64 / elapsed.as_secs_f64(),
            total_rounds as f64 / elapsed.as_secs_f64(),
            elapsed
        );
        println!(
            "round latency p50={:.2?} p99={:.2?} max={:.2?}",
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99),
            latencies.last().copied().unwrap_or_default()
        );
        println!("rss idle per session={per_session:.1} KiB peak={peak} KiB");
        let bad = bad.load(Ordering::Relaxed);
        println!("rounds with a lost, duplicated or misordered result: {bad}");
        bad
    });
    std::process::exit(if failed == 0 { 0 } else { 1 });
}
