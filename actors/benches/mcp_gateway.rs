//! What toolslot adds to an MCP call when it stands between a client and the server: the same
//! MCP client (toolslot's own) calls server-everything's `echo` directly and through toolslot,
//! alternately, call by call (`toolslot mcp` over stdio with server-everything on stdio as its upstream; then
//! 32 clients at once, directly to server-everything over Streamable HTTP against `/mcp` of
//! `toolslot serve` whose upstream is that same server), and the percentiles of both are
//! printed side by side. Every call through toolslot goes through the whole chain (validation, policy, loop
//! guard, approval in `full-auto`, the external-content envelope); the ledger is off, as a
//! gateway measured for latency alone.
//!
//! Needs `bash scripts/install-test-deps.sh`. Run:
//! `cargo bench -p toolslot-actors --bench mcp_gateway` (CALLS=N, CLIENTS=N, RATE=calls/s per
//! client of the open load to change it).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolslot::config::McpServerConfig;
use toolslot::mcp::client::{ConnectOptions, McpClient, connect};

#[path = "../../benches/support/proc_stat.rs"]
mod proc_stat;
use proc_stat::{cpu_us_of, sleeps_of};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn everything() -> String {
    repo()
        .join(".test-deps/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
        .display()
        .to_string()
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn server(value: serde_json::Value) -> McpServerConfig {
    serde_json::from_value(value).expect("a server entry")
}

async fn client(cfg: &McpServerConfig) -> McpClient {
    let mcp = toolslot::config::Config::builtin().mcp.clone();
    connect(cfg, ConnectOptions::of(&mcp, Duration::from_secs(30), None))
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", cfg.name))
}

/// When a paced client calls: every `every`, its first call `phase` after the warm-up.
#[derive(Clone, Copy)]
struct Pace {
    every: Duration,
    phase: Duration,
}

/// One client's two ways to the same server: straight to it, and through toolslot.
struct Pair {
    direct: McpClient,
    via: McpClient,
}

/// The latencies of each way, in the order called.
#[derive(Default)]
struct Took {
    direct: Vec<Duration>,
    via: Vec<Duration>,
}

/// `calls` calls of the server's `echo` (each with its own message, so the loop guard sees no
/// repeat) after a warm-up, alternating between the two ways: each call through toolslot is
/// measured beside a direct one, under the same load and in the same second, so a server whose
/// own speed drifts between minutes (node's does by 1.5x on this machine) moves both sides
/// alike. One call every `pace.every` when given (an open load below saturation), else each call
/// as soon as the last one answered (a closed loop: the load the machine can take).
async fn paced(pair: &Pair, calls: usize, tag: usize, pace: Option<Pace>) -> Took {
    let call = |via: bool, i: usize| {
        let (client, tool) = if via {
            (&pair.via, "everything__echo")
        } else {
            (&pair.direct, "echo")
        };
        client.call(tool, json!({"message": format!("m{tag}-{i}")}), Duration::from_secs(30))
    };
    for i in 0..calls / 10 {
        call(i % 2 == 1, usize::MAX - i).await.expect("a warm-up call");
    }
    // Made after the warm-up, and late ticks delayed rather than caught up in a burst, so the
    // load is the pace asked for.
    let mut tick = pace.map(|p| {
        let mut t = tokio::time::interval_at(tokio::time::Instant::now() + p.phase, p.every);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    });
    let mut took = Took::default();
    for i in 0..calls {
        if let Some(tick) = tick.as_mut() {
            tick.tick().await;
        }
        // Which way goes first alternates too, so neither always follows the other.
        let via = (i + tag) % 2 == 1;
        let started = Instant::now();
        let result = call(via, i).await.expect("a call");
        let elapsed = started.elapsed();
        assert!(result.to_string().contains(&format!("m{tag}-{i}")), "the echo came back: {result}");
        if via { took.via.push(elapsed) } else { took.direct.push(elapsed) }
    }
    took
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

/// Prints both ways' percentiles side by side (sorting each in place).
fn report(label: &str, took: &mut Took) {
    took.direct.sort();
    took.via.sort();
    let (direct, via) = (&took.direct, &took.via);
    let (d50, v50) = (percentile(direct, 0.5), percentile(via, 0.5));
    println!(
        "{label}: direct p50 {d50:.3} ms p90 {:.3} p99 {:.3} | through toolslot p50 {v50:.3} ms p90 {:.3} p99 {:.3} | added p50 {:.3} ms ({} calls each, all answered)",
        percentile(direct, 0.9),
        percentile(direct, 0.99),
        percentile(via, 0.9),
        percentile(via, 0.99),
        v50 - d50,
        direct.len()
    );
}

/// A free loopback port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a port")
}

/// Waits until something accepts connections on `port`.
fn await_port(port: u16) {
    for _ in 0..300 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("nothing listens on {port}");
}

/// CPU-µs per call `pid` spent since `since` (µs).
fn cpu_per_call(pid: u32, since: u64, calls: usize) -> f64 {
    cpu_us_of(pid).saturating_sub(since) as f64 / calls.max(1) as f64
}

/// A child process killed when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every client at once, client `n` tagging its messages `n + tags` (no two runs repeat one).
/// Paced clients call in step (`spread` false: every client's call in the same instant, a
/// burst of 32 each period) or spread over the period (independent clients, as users are).
async fn many(clients: &[Arc<Pair>], calls: usize, tags: usize, every: Option<Duration>, spread: bool) -> Took {
    let mut tasks = Vec::new();
    let count = clients.len().max(1) as u32;
    for (n, c) in clients.iter().enumerate() {
        let c = Arc::clone(c);
        let pace = every.map(|every| Pace {
            every,
            phase: if spread { every * n as u32 / count } else { Duration::ZERO },
        });
        tasks.push(tokio::spawn(async move { paced(&c, calls, n + tags, pace).await }));
    }
    let mut all = Took::default();
    for t in tasks {
        let took = t.await.expect("a client");
        all.direct.extend(took.direct);
        all.via.extend(took.via);
    }
    all
}

fn main() {
    // `cargo bench` passes `--bench`; nothing here is filtered.
    let calls = env_or("CALLS", 2000);
    let clients = env_or("CLIENTS", 32);
    let dir = tempfile::tempdir().expect("a folder");
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).expect("a workspace");
    let config = dir.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[approval]\nmode = \"full-auto\"\n[overflow]\ndir = \"{}\"\n[mcp]\ntool_cache_dir = \"\"\n[[mcp.servers]]\nname = \"everything\"\ncommand = [\"node\", \"{}\", \"stdio\"]\ndefer = false\n",
            dir.path().join("overflow").display(),
            everything()
        ),
    )
    .expect("the config");
    let toolslot = env!("CARGO_BIN_EXE_toolslot");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    // SAFETY: set before any thread of this process reads the environment.
    unsafe { std::env::set_var("TOOLSLOT_AUDIT__LEDGER_DIR", "") };

    runtime.block_on(async {
        // One client over stdio.
        let stdio = Pair {
            direct: client(&server(json!({"name": "everything", "command": ["node", everything(), "stdio"]}))).await,
            via: client(&server(json!({
                "name": "toolslot",
                "command": [toolslot, "mcp", "--workspace", ws, "--config", config],
            })))
            .await,
        };
        report("1 client, stdio", &mut paced(&stdio, calls * 2, 0, None).await);
        stdio.direct.close().await;
        stdio.via.close().await;

        // Many clients at once over Streamable HTTP.
        let port = free_port();
        let upstream = Child(
            std::process::Command::new("node")
                .args([everything().as_str(), "streamableHttp"])
                .env("PORT", port.to_string())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("server-everything"),
        );
        await_port(port);
        let serve_port = free_port();
        let serve_config = dir.path().join("serve.toml");
        // The same upstream as the direct clients': server-everything over HTTP.
        let text = format!(
            "[approval]\nmode = \"full-auto\"\n[overflow]\ndir = \"{}\"\n[mcp]\ntool_cache_dir = \"\"\n[[mcp.servers]]\nname = \"everything\"\nurl = \"http://127.0.0.1:{port}/mcp\"\ndefer = false\n[server]\nbind = \"127.0.0.1:{serve_port}\"\n",
            dir.path().join("overflow").display()
        );
        std::fs::write(&serve_config, text).expect("the serve config");
        let serve = Child(
            std::process::Command::new(toolslot)
                .args(["serve", "--config"])
                .arg(&serve_config)
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("toolslot serve"),
        );
        await_port(serve_port);
        let per_client = (calls / clients).max(20);
        let mut pairs = Vec::new();
        for n in 0..clients {
            pairs.push(Arc::new(Pair {
                direct: client(&server(json!({"name": format!("d{n}"), "url": format!("http://127.0.0.1:{port}/mcp")}))).await,
                via: client(&server(json!({
                    "name": format!("v{n}"),
                    "url": format!("http://127.0.0.1:{serve_port}/mcp?workspace={}&session={n}", ws.display()),
                })))
                .await,
            }));
        }
        let (up, gw) = (upstream.0.id(), serve.0.id());
        // The CPU each side spends per call beside the latency: the upstream's over both
        // ways' calls, toolslot's over the calls through it.
        let cost = |label: &str, up_before: u64, gw_before: u64, sleeps_before: u64, took: &Took| {
            let (all, via) = (took.direct.len() + took.via.len(), took.via.len().max(1));
            println!(
                "  {label}: upstream {:.0} CPU-µs per call; toolslot {:.0} CPU-µs and {:.1} thread wake-ups per call through it",
                cpu_per_call(up, up_before, all),
                cpu_per_call(gw, gw_before, via),
                sleeps_of(gw).saturating_sub(sleeps_before) as f64 / via as f64,
            );
        };
        let (u0, g0, s0) = (cpu_us_of(up), cpu_us_of(gw), sleeps_of(gw));
        let mut took = paced(&pairs[0], calls, clients, None).await;
        report("1 client, Streamable HTTP", &mut took);
        cost("1 client", u0, g0, s0, &took);
        // Each client a call every 1/RATE s: 32 connections at once, below what two cores
        // take, so the difference is what toolslot adds to a call rather than to a queue.
        let every = Duration::from_secs_f64(1.0 / env_or("RATE", 5) as f64);
        let phases: [(&str, Option<Duration>, bool, usize); 3] = [
            ("spread", Some(every), true, 1000),
            // The worst case of the same load: every client's call in the same instant.
            ("in step", Some(every), false, 3000),
            // As fast as they can: the machine saturated, latency is mostly queueing.
            ("closed loop (saturated)", None, false, 2000),
        ];
        for (label, pace, spread, tags) in phases {
            let (u0, g0, s0) = (cpu_us_of(up), cpu_us_of(gw), sleeps_of(gw));
            let mut took = many(&pairs, per_client * 2, tags, pace, spread).await;
            let load = match pace {
                Some(every) => format!("each a call every {every:?}, {label}"),
                None => label.to_string(),
            };
            report(&format!("{clients} clients at once, {load}, Streamable HTTP"), &mut took);
            cost(label, u0, g0, s0, &took);
        }
    });
}
