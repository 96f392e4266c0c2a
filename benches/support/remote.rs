//! `--remote N`: the load harness through NATS JetStream to worker processes.
//!
//! Starts a nats-server (JetStream, a temporary store) and, for each worker count 1, 2, 4, …
//! up to N, that many worker processes (this bench binary re-run as `--as-worker`, hosting the
//! bench's tool with the real `toolslot_actors::sources::remote::run_worker`), and drives the same load
//! through the same pipeline once in-process and once routed to the workers. Each worker has
//! K slots; the load keeps 2·N·K calls in flight, so the queue is never empty. Reports calls/s
//! side by side with the ideal N·K·(1 s / tool time), the dispatch overhead per call (one call
//! per round, a remote round beside an in-process one: p50/p99 of the pairs' differences), and
//! the CPU time per call of the dispatcher, the workers and the server. Every round is checked
//! for exactly one result per call.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use toolslot::config::Config;
use toolslot::event::PipelineEvent;
use toolslot::registry::{LiveRegistry, RegistryBuilder};
use toolslot::tool::ToolSpec;
use toolslot_actors::sources::remote::RemoteHub;
use toolslot_actors::{Dispatcher, RoundInput, SessionOptions};

use super::Cost;
use super::proc_stat::{cpu_us_of, sleeps_of};

/// What `--remote` runs.
pub struct RemoteArgs {
    /// The largest worker count (1, 2, 4, … up to it are measured).
    pub workers: usize,
    /// Slots per worker.
    pub slots: usize,
    /// The tool (`sleep10ms`, `sleep1ms`, `noop`).
    pub tool: &'static str,
    /// Seconds of load per measurement.
    pub seconds: f64,
}

fn tool_millis(tool: &str) -> f64 {
    match tool {
        "sleep10ms" => 10.0,
        "sleep20ms" => 20.0,
        "sleep1ms" => 1.0,
        _ => 0.0,
    }
}

/// A child killed by its pid when dropped.
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn bench_config(nats_url: &str, overflow: &std::path::Path, slots: usize) -> Arc<Config> {
    let mut env: Vec<(String, String)> = vec![
        ("TOOLSLOT_LOOP_GUARD__EXEMPT".into(), "noop,sleep1ms,sleep10ms,sleep20ms".into()),
        ("TOOLSLOT_OVERFLOW__DIR".into(), overflow.display().to_string()),
        ("TOOLSLOT_APPROVAL__MODE".into(), "full-auto".into()),
        ("TOOLSLOT_REMOTE__NATS_URL".into(), nats_url.into()),
        ("TOOLSLOT_REMOTE__WORKER_SLOTS".into(), slots.to_string()),
    ];
    env.extend(std::env::vars().filter(|(k, _)| k.starts_with("TOOLSLOT_")));
    let mut cfg = Config::load_with_env(None, env).expect("bench config loads");
    for tool in ["noop", "sleep1ms", "sleep10ms", "sleep20ms"] {
        cfg.remote.routes.insert(tool.into(), "bench".into());
    }
    Arc::new(cfg)
}

fn tools() -> Vec<Arc<dyn ToolSpec>> {
    ["noop", "sleep1ms", "sleep10ms", "sleep20ms"]
        .into_iter()
        .map(|t| Arc::new(Cost(t)) as Arc<dyn ToolSpec>)
        .collect()
}

/// `--as-worker URL SLOTS`: one worker process of pool `bench`, hosting the bench's tools.
pub fn worker_main(url: &str, slots: usize) -> ! {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let config = bench_config(url, dir.path(), slots);
    let registry = LiveRegistry::from(RegistryBuilder::new(Arc::clone(&config)).extend(tools()).build());
    let options = toolslot_actors::sources::remote::WorkerOptions {
        pool: "bench".into(),
        slots,
    };
    let result = actix_rt::System::new().block_on(toolslot_actors::sources::remote::run_worker(config, registry, options));
    if let Err(e) = result {
        eprintln!("worker: {e}");
        std::process::exit(2);
    }
    std::process::exit(0);
}

fn start_worker(url: &str, slots: usize) -> Kid {
    start_worker_of(&std::env::current_exe().expect("the bench binary"), url, slots)
}

/// A worker process of `exe` (this bench, or another build of it).
fn start_worker_of(exe: &std::path::Path, url: &str, slots: usize) -> Kid {
    let mut child = Command::new(exe)
        .args(["--as-worker", url, &slots.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("a worker process");
    let stderr = child.stderr.take().expect("its stderr");
    let mut lines = BufReader::new(stderr).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains(" ready (") => break,
            Some(_) => {}
            None => panic!("a worker died before it was ready"),
        }
    }
    // The rest of its stderr is drained so that it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Kid(child)
}

fn start_nats(store: &std::path::Path) -> (Kid, String) {
    let bin = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".test-deps/venv/bin/nats-server");
    assert!(bin.exists(), "{} is missing: run scripts/install-test-deps.sh", bin.display());
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new(bin)
        .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
        .arg(store)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nats-server starts");
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    (Kid(child), format!("nats://127.0.0.1:{port}"))
}

struct Measured {
    calls: usize,
    elapsed: Duration,
    bad: usize,
    latencies: Vec<Duration>,
}

/// `sessions` sessions each submitting rounds of `calls` parallel calls to `tool` until
/// `seconds` have passed (or `rounds` rounds each, when given).
async fn drive(dispatcher: &Dispatcher, tool: &str, sessions: usize, calls: usize, seconds: f64, rounds: Option<usize>) -> Measured {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let body = Arc::new(super::round(tool, calls, |i| json!({"i": i})));
    let bad = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let runs = (0..sessions).map(|_| {
        let s = dispatcher.open_session(SessionOptions {
            workspace: Some(dir.path().to_path_buf()),
            ..Default::default()
        });
        let (body, bad, done) = (Arc::clone(&body), Arc::clone(&bad), Arc::clone(&done));
        async move {
            let mut latencies = Vec::new();
            let mut n = 0;
            while rounds.map_or(Instant::now() < until, |r| n < r) {
                n += 1;
                let (took, ok) = one_round(dispatcher, &s, &body, calls).await;
                latencies.push(took);
                if !ok {
                    bad.fetch_add(1, Ordering::Relaxed);
                }
                done.fetch_add(calls, Ordering::Relaxed);
            }
            let _ = dispatcher.close_session(&s);
            latencies
        }
    });
    let mut latencies: Vec<Duration> = futures::future::join_all(runs).await.into_iter().flatten().collect();
    latencies.sort();
    Measured {
        calls: done.load(Ordering::Relaxed),
        elapsed: start.elapsed(),
        bad: bad.load(Ordering::Relaxed),
        latencies,
    }
}

/// One round of `calls` calls in session `s`: how long it took, and whether it ended in
/// exactly one `RoundComplete` with one successful result per call, in order.
async fn one_round(dispatcher: &Dispatcher, s: &str, body: &[u8], calls: usize) -> (Duration, bool) {
    let t = Instant::now();
    let input = RoundInput::Bytes(Box::pin(futures::stream::iter([Ok(body.to_vec())])));
    let Ok(mut rx) = dispatcher.submit_round(s, input) else {
        return (t.elapsed(), false);
    };
    let mut ok = false;
    let mut completes = 0;
    while let Some(e) = rx.recv().await {
        if let PipelineEvent::RoundComplete { results, .. } = e {
            completes += 1;
            ok = results.len() == calls && results.iter().enumerate().all(|(i, r)| r.index == i && !r.is_error);
            if !ok {
                eprintln!("bad round: {:?}", results.iter().find(|r| r.is_error).map(|r| &r.content));
            }
        }
    }
    (t.elapsed(), ok && completes == 1)
}

/// The remote path's added latency for one call, nothing queued: `rounds` rounds of one call
/// each way, alternated in one session per side, so that each remote round is measured beside
/// an in-process one under the same moment's load. Returns the sorted differences (remote less
/// in-process, in µs, negative where the remote round was the quicker), the two sides' sorted
/// latencies, and the bad rounds.
async fn paired_overhead(
    local: &Dispatcher,
    remote: &Dispatcher,
    tool: &str,
    rounds: usize,
) -> (Vec<f64>, Vec<Duration>, Vec<Duration>, usize) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let body = super::round(tool, 1, |i| json!({"i": i}));
    let open = |d: &Dispatcher| {
        d.open_session(SessionOptions {
            workspace: Some(dir.path().to_path_buf()),
            ..Default::default()
        })
    };
    let (ls, rs) = (open(local), open(remote));
    let (mut added, mut a, mut b, mut bad) = (Vec::new(), Vec::new(), Vec::new(), 0);
    for n in 0..rounds {
        // Which side goes first alternates, so neither always follows the other's wake-ups.
        let ((la, oka), (rb, okb)) = if n % 2 == 0 {
            let l = one_round(local, &ls, &body, 1).await;
            (l, one_round(remote, &rs, &body, 1).await)
        } else {
            let r = one_round(remote, &rs, &body, 1).await;
            (one_round(local, &ls, &body, 1).await, r)
        };
        bad += usize::from(!oka) + usize::from(!okb);
        added.push(rb.as_secs_f64() * 1e6 - la.as_secs_f64() * 1e6);
        a.push(la);
        b.push(rb);
    }
    let _ = local.close_session(&ls);
    let _ = remote.close_session(&rs);
    added.sort_by(f64::total_cmp);
    a.sort();
    b.sort();
    (added, a, b, bad)
}

/// The `p` quantile of `sorted` (zero when it is empty).
fn pct<T: Copy + Default>(sorted: &[T], p: f64) -> T {
    if sorted.is_empty() {
        return T::default();
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn self_cpu_us() -> u64 {
    cpu_us_of(std::process::id())
}

/// The wake-up comparison (`LOAD_BASELINE_WORKER` names another build of this bench,
/// whose workers are the baseline): for N = 8 and 32 (up to `--remote`), N workers of each
/// build in turn, measured with the same dispatcher, under the saturating load and idle (one
/// session, one call per round, so every worker but one has nothing to do: a bell the whole
/// pool hears wakes them all for each call). Returns the number of bad rounds.
async fn compare_wake_ups(remote: &Dispatcher, nats: &Kid, url: &str, baseline: &std::path::Path, args: &RemoteArgs) -> usize {
    let this = std::env::current_exe().expect("the bench binary");
    println!(
        "\nwake-ups: baseline workers `{}` against this build's, the same dispatcher and server",
        baseline.display()
    );
    println!(
        "| workers N | workers' build | saturated calls/s | CPU-µs per call: dispatcher | workers | nats-server | idle: CPU-µs per call: workers | nats-server | idle p50 ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut bad = 0;
    for n in [8usize, 32].into_iter().filter(|&n| n <= args.workers.max(8)) {
        for (label, exe) in [("baseline", baseline), ("this", this.as_path())] {
            let workers: Vec<Kid> = (0..n).map(|_| start_worker_of(exe, url, args.slots)).collect();
            tokio::time::sleep(Duration::from_millis(300)).await;
            let cpu = || {
                (
                    self_cpu_us(),
                    workers.iter().map(|w| cpu_us_of(w.0.id())).sum::<u64>(),
                    cpu_us_of(nats.0.id()),
                )
            };
            let before = cpu();
            let busy = drive(remote, args.tool, 2 * n, args.slots, args.seconds, None).await;
            let mid = cpu();
            let idle = drive(remote, args.tool, 1, 1, 0.0, Some(200)).await;
            let after = cpu();
            bad += busy.bad + idle.bad;
            let per = |a: u64, b: u64, m: &Measured| (b.saturating_sub(a)) as f64 / m.calls.max(1) as f64;
            println!(
                "| {n} | {label} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} |",
                busy.calls as f64 / busy.elapsed.as_secs_f64(),
                per(before.0, mid.0, &busy),
                per(before.1, mid.1, &busy),
                per(before.2, mid.2, &busy),
                per(mid.1, after.1, &idle),
                per(mid.2, after.2, &idle),
                pct(&idle.latencies, 0.5).as_secs_f64() * 1e3,
            );
            drop(workers);
            // The killed workers' announcements and consumers' pending pulls settle.
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    bad
}

/// Runs the comparison; returns the number of bad rounds.
pub fn run(args: RemoteArgs) -> usize {
    let store = tempfile::tempdir().expect("a temporary folder");
    let overflow = tempfile::tempdir().expect("a temporary folder");
    let (nats, url) = start_nats(store.path());
    let config = bench_config(&url, overflow.path(), args.slots);
    let ideal_per_slot = match tool_millis(args.tool) {
        0.0 => f64::INFINITY,
        ms => 1000.0 / ms,
    };
    let mut counts = vec![1usize];
    while counts.last().is_some_and(|&n| n * 2 <= args.workers) {
        counts.push(counts.last().copied().unwrap_or(1) * 2);
    }
    println!(
        "remote load: tool={} slots/worker={} {} s per run; in-flight calls = 2·N·slots",
        args.tool, args.slots, args.seconds
    );
    println!(
        "| workers N | ideal calls/s | in-process calls/s | in-process CPU-µs per call | remote calls/s | remote / ideal | CPU-µs per call: dispatcher | workers | nats-server | dispatcher wake-ups per call | NATS messages per call at the dispatcher (in / out) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut bad_total = 0;
    let mut overhead = None;
    let system = actix_rt::System::new();
    system.block_on(async {
        let hub = RemoteHub::start(&config).await.expect("the bench reaches its nats-server");
        let local = Dispatcher::new(
            Arc::clone(&config),
            Arc::new(RegistryBuilder::new(Arc::clone(&config)).extend(tools()).build()),
        );
        let remote = Dispatcher::new(
            Arc::clone(&config),
            Arc::new(RegistryBuilder::new(Arc::clone(&config)).extend(hub.route(tools())).build()),
        );
        let mut workers: Vec<Kid> = Vec::new();
        for &n in &counts {
            while workers.len() < n {
                workers.push(start_worker(&url, args.slots));
            }
            // The hub hears the new workers' announcements.
            tokio::time::sleep(Duration::from_millis(300)).await;
            let sessions = 2 * n;
            // The same calls in-process cost the process this much: the chain and the ledger,
            // which a remote call pays as well.
            let local_before = self_cpu_us();
            let inproc = drive(&local, args.tool, sessions, args.slots, args.seconds, None).await;
            let local_cpu = self_cpu_us().saturating_sub(local_before) as f64 / inproc.calls.max(1) as f64;
            let cpu = |workers: &[Kid]| (self_cpu_us(), workers.iter().map(|w| cpu_us_of(w.0.id())).sum::<u64>(), cpu_us_of(nats.0.id()));
            // What the dispatcher's connection carries: the figure the machine's noise does not move.
            let messages = || {
                let s = hub.broker().client.statistics();
                (s.in_messages.load(Ordering::Relaxed), s.out_messages.load(Ordering::Relaxed))
            };
            let (before, slept, sent) = (cpu(&workers), sleeps_of(std::process::id()), messages());
            let rem = drive(&remote, args.tool, sessions, args.slots, args.seconds, None).await;
            let (after, sleeps, got) = (cpu(&workers), sleeps_of(std::process::id()).saturating_sub(slept), messages());
            bad_total += inproc.bad + rem.bad;
            let rate = |m: &Measured| m.calls as f64 / m.elapsed.as_secs_f64();
            let ideal = n as f64 * args.slots as f64 * ideal_per_slot;
            let per = |a: u64, b: u64| (b.saturating_sub(a)) as f64 / rem.calls.max(1) as f64;
            println!(
                "| {n} | {ideal:.0} | {:.0} | {local_cpu:.0} | {:.0} | {:.0}% | {:.0} | {:.0} | {:.0} | {:.1} | {:.1} / {:.1} |",
                rate(&inproc),
                rate(&rem),
                100.0 * rate(&rem) / ideal,
                per(before.0, after.0),
                per(before.1, after.1),
                per(before.2, after.2),
                sleeps as f64 / rem.calls.max(1) as f64,
                per(sent.0, got.0),
                per(sent.1, got.1),
            );
            // Overhead: one session, one call per round, nothing queued, one worker (more
            // idle workers would poll beside it and share the two cores with it).
            if n == 1 {
                let rounds = 200;
                let (added, a, b, bad) = paired_overhead(&local, &remote, args.tool, rounds).await;
                bad_total += bad;
                let us = |d: Duration| d.as_secs_f64() * 1e6;
                overhead = Some(format!(
                    "dispatch overhead per call ({rounds} pairs of rounds of one call, remote and in-process alternated, one session each, one worker): p50 {:.0} µs, p99 {:.0} µs of the pairs' differences (remote p50 {:.0} µs / p99 {:.0} µs, in-process p50 {:.0} µs / p99 {:.0} µs)",
                    pct(&added, 0.5),
                    pct(&added, 0.99),
                    us(pct(&b, 0.5)),
                    us(pct(&b, 0.99)),
                    us(pct(&a, 0.5)),
                    us(pct(&a, 0.99)),
                ));
            }
        }
        if let Some(line) = overhead {
            println!("{line}");
        }
        drop(std::mem::take(&mut workers));
        if let Some(baseline) = std::env::var_os("LOAD_BASELINE_WORKER") {
            bad_total += compare_wake_ups(&remote, &nats, &url, std::path::Path::new(&baseline), &args).await;
        }
        println!("rounds with a lost, duplicated or misordered result: {bad_total}");
        drop(workers);
    });
    drop(nats);
    bad_total
}
