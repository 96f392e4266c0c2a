//! The load harness: N concurrent sessions, each feeding R rounds of K tool calls through the
//! Dispatcher.
//!
//! `cargo bench --bench load -- --sessions N --rounds R --calls K --tool noop|sleep1ms|read|shell|mixed`
//! (`shell`: exec_shell running `cat small.txt`, judged read-only, in the OS sandbox; `mixed`:
//! call n of a round is, by n mod 4, that command, a read_file, an extension program (`wc -c`
//! of its arguments, read-only, in the OS sandbox) or a no-op)
//!
//! `cargo bench --bench load -- --remote N --slots K --tool sleep10ms [--seconds S]` measures the
//! same pipeline with the tool routed through NATS JetStream to 1, 2, 4, … N worker processes,
//! side by side with in-process (see `support/remote.rs`).
//!
//! Prints calls/s, round latency p50/p99/max, peak RSS and RSS per idle session, and checks
//! that every round produced exactly one result per call, in order: a lost or duplicated
//! result fails the run with exit status 1. `--workers N` spreads the sessions over N worker
//! threads (0: the harness's own thread); each session is driven from its own thread.

mod support;

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolslot::event::PipelineEvent;
use toolslot_actors::{Dispatcher, RoundInput, SessionOptions};

/// The allocator the `toolslot` binary runs with (`actors/src/main.rs`): this bench stands in
/// for `toolslot serve` and, re-run as `--as-worker`, for `toolslot worker`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    } else if !matches!(a.tool.as_str(), "noop" | "sleep1ms" | "read" | "shell" | "mixed") {
        return Err(format!("--tool takes noop, sleep1ms, read, shell or mixed, not `{}`", a.tool));
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

/// CPU time of the whole process so far (user + system), every thread.
fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// One session's driver: its rounds one after the other, each checked for exactly one result
/// per call, in order. Sends back the rounds' latencies and how many were bad.
async fn drive(
    dispatcher: Dispatcher,
    session: String,
    body: Arc<Vec<u8>>,
    rounds: usize,
    calls: usize,
    done: tokio::sync::mpsc::UnboundedSender<(Vec<Duration>, usize)>,
) {
    let mut latencies = Vec::with_capacity(rounds);
    let mut bad = 0;
    for _ in 0..rounds {
        let t = Instant::now();
        let input = RoundInput::Bytes(Box::pin(futures::stream::iter([Ok(body.as_ref().clone())])));
        let Ok(mut rx) = dispatcher.submit_round(&session, input) else {
            bad += 1;
            continue;
        };
        let mut completes = 0;
        let mut ok = false;
        while let Some(e) = rx.recv().await {
            if let PipelineEvent::RoundComplete { results, .. } = e {
                completes += 1;
                ok = results.len() == calls
                    && results.iter().enumerate().all(|(i, r)| {
                        r.index == i && r.tool_use_id.strip_prefix("call_").and_then(|n| n.parse().ok()) == Some(i) && !r.is_error
                    });
            }
        }
        latencies.push(t.elapsed());
        if !(ok && completes == 1) {
            bad += 1;
        }
    }
    let _ = done.send((latencies, bad));
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
    // The extension of the mixed rounds: a program started for each call, as any extension.
    let overlay = dir.path().join("extensions.toml");
    std::fs::write(
        &overlay,
        "[[extensions]]\nname = \"count_bytes\"\ndescription = \"Counts the bytes of its arguments\"\ncapabilities = [\"read_only\"]\ncommand = [\"wc\", \"-c\"]\ninput_schema = '{\"type\":\"object\"}'\n",
    )
    .expect("writable temp folder");
    let config = support::config_with(Some(&overlay), &dir.path().join("overflow"), args.workers);
    let registry = support::registry(&config);
    let call = |n: usize, tool: &str| match tool {
        "read" => ("read_file", json!({"path": "small.txt"})),
        "shell" => ("exec_shell", json!({"command": "cat small.txt"})),
        "sleep1ms" => ("sleep1ms", json!({"i": n})),
        "count" => ("count_bytes", json!({"i": n})),
        _ => ("noop", json!({"i": n})),
    };
    let body = Arc::new(match args.tool.as_str() {
        "mixed" => support::round_of(args.calls, |n| call(n, ["shell", "read", "count", "noop"][n % 4])),
        tool => support::round_of(args.calls, |n| call(n, tool)),
    });
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
        // Each session's driver runs on the session's own worker thread (`run_beside`), so
        // the drivers spread over the threads as the sessions do and the harness measures the
        // pipeline, not one thread reading every event of every session.
        let total_rounds = args.sessions * args.rounds;
        let (tx, mut finished) = tokio::sync::mpsc::unbounded_channel::<(Vec<Duration>, usize)>();
        let start = Instant::now();
        let cpu_start = cpu_time();
        let mut bad = 0usize;
        for s in &sessions {
            let driver = drive(
                dispatcher.clone(),
                s.clone(),
                Arc::clone(&body),
                args.rounds,
                args.calls,
                tx.clone(),
            );
            if dispatcher.run_beside(s, driver).is_err() {
                bad += args.rounds;
            }
        }
        drop(tx);
        let mut latencies: Vec<Duration> = Vec::with_capacity(total_rounds);
        let mut last_report = Instant::now();
        let mut drivers = 0;
        while let Some((l, b)) = finished.recv().await {
            drivers += 1;
            latencies.extend(l);
            bad += b;
            if last_report.elapsed() >= Duration::from_secs(1) {
                eprint!("\r{}/{} rounds", latencies.len(), total_rounds);
                let _ = std::io::stderr().flush();
                last_report = Instant::now();
            }
        }
        let elapsed = start.elapsed();
        let cpu = cpu_time().saturating_sub(cpu_start);
        // A driver that never reported lost all its rounds.
        bad += (args.sessions - drivers.min(args.sessions)) * args.rounds;
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
        // On a machine shared with other work the wall-clock rate depends on how much of each
        // core this process got; the rate per CPU-second does not, and a pipeline that scales
        // keeps it as workers are added.
        println!(
            "cpu={:.2?} ({:.2} cores busy) calls per cpu-second={:.0}",
            cpu,
            cpu.as_secs_f64() / elapsed.as_secs_f64(),
            calls as f64 / cpu.as_secs_f64().max(1e-9)
        );
        println!(
            "round latency p50={:.2?} p99={:.2?} max={:.2?}",
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99),
            latencies.last().copied().unwrap_or_default()
        );
        println!("rss idle per session={per_session:.1} KiB peak={peak} KiB");
        println!("rounds with a lost, duplicated or misordered result: {bad}");
        bad
    });
    std::process::exit(if failed == 0 { 0 } else { 1 });
}
