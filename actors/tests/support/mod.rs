//! Driving the binary as an attacker would: `toolslot replay` on a stream that calls tools,
//! and `toolslot serve` over HTTP, with a config written for the test.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The binary. The audit ledger is off: its default folder is the user's home, which a test
/// must not write to (the ledger's own tests, in policy.rs and approvals.rs, give it a folder).
pub fn toolslot() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolslot"));
    cmd.env("TOOLSLOT_AUDIT__LEDGER_DIR", "");
    cmd
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The test dependencies (installed on first use on a fresh machine, by CI beforehand).
pub fn deps() -> PathBuf {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let ok = Command::new("bash")
            .arg(repo().join("scripts/install-test-deps.sh"))
            .status()
            .expect("bash runs")
            .success();
        assert!(ok, "installing the test dependencies failed");
    });
    repo().join(".test-deps")
}

/// The Python of the test dependencies, with the official MCP SDK.
pub fn python() -> PathBuf {
    deps().join("venv/bin/python")
}

/// A hostile program of tests/data/hostile.
pub fn hostile(name: &str) -> PathBuf {
    repo().join("tests/data/hostile").join(name)
}

/// An OpenAI Chat response calling `calls` (name, arguments), as SSE.
pub fn openai_stream(calls: &[(&str, Value)]) -> String {
    let mut out = String::new();
    for (n, (name, args)) in calls.iter().enumerate() {
        let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": n, "id": format!("call_{n}"), "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}, "finish_reason": null}]});
        out.push_str(&format!("data: {chunk}\n\n"));
    }
    out.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n");
    out
}

/// A folder for one test: a workspace (`ws`), and room for config, overflow and caches.
pub struct Bed {
    pub dir: tempfile::TempDir,
    pub ws: PathBuf,
}

impl Bed {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        Self { dir, ws }
    }

    /// Where truncated outputs are saved.
    pub fn overflow(&self) -> PathBuf {
        self.dir.path().join("overflow")
    }

    /// Writes the config file (overlaying the defaults) and returns its path.
    pub fn config(&self, text: &str) -> PathBuf {
        let path = self.dir.path().join("config.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Runs `toolslot replay` of one round calling `calls`, all approved, with `config`;
    /// returns the exit status, every event, and stderr.
    pub fn replay(&self, config: &str, calls: &[(&str, Value)]) -> Replayed {
        self.replay_with(config, calls, |_| {})
    }

    /// As [`Bed::replay`], with the command adjusted first (environment variables).
    pub fn replay_with(&self, config: &str, calls: &[(&str, Value)], adjust: impl FnOnce(&mut Command)) -> Replayed {
        self.replay_rounds(config, &[calls.to_vec()], adjust)
    }

    /// Runs `toolslot replay` of successive rounds of one session, every approval granted.
    pub fn replay_rounds(&self, config: &str, rounds: &[Vec<(&str, Value)>], adjust: impl FnOnce(&mut Command)) -> Replayed {
        self.replay_answering("all", config, rounds, adjust)
    }

    /// As [`Bed::replay_rounds`], answering approvals with `approve` (`all` or `none`).
    pub fn replay_answering(
        &self,
        approve: &str,
        config: &str,
        rounds: &[Vec<(&str, Value)>],
        adjust: impl FnOnce(&mut Command),
    ) -> Replayed {
        let streams: Vec<PathBuf> = rounds
            .iter()
            .enumerate()
            .map(|(i, calls)| {
                let stream = self.dir.path().join(format!("round{i}.sse"));
                std::fs::write(&stream, openai_stream(calls)).unwrap();
                stream
            })
            .collect();
        let config = self.config(config);
        let mut cmd = toolslot();
        cmd.env("TOOLSLOT_OVERFLOW__DIR", self.overflow())
            .env("TOOLSLOT_MCP__TOOL_CACHE_DIR", "")
            .args(["replay", "--approve", approve, "--workspace"])
            .arg(&self.ws)
            .arg("--config")
            .arg(&config)
            .args(&streams)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        adjust(&mut cmd);
        let started = Instant::now();
        let child = cmd.spawn().unwrap();
        let pid = child.id() as i32;
        // The peak resident memory, watched while it runs (the kernel's high-water mark).
        let watching = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let watch = {
            let watching = std::sync::Arc::clone(&watching);
            std::thread::spawn(move || {
                let mut peak = 0u64;
                while watching.load(std::sync::atomic::Ordering::SeqCst) {
                    if let Some(kb) = high_water_kb(pid) {
                        peak = peak.max(kb);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                peak
            })
        };
        let out = wait_at_most(child, Duration::from_secs(180));
        watching.store(false, std::sync::atomic::Ordering::SeqCst);
        let peak_rss_kb = watch.join().unwrap();
        let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        Replayed {
            code: out.status.code(),
            events,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            elapsed: started.elapsed(),
            peak_rss_kb,
        }
    }
}

/// The child's output once it exits; killed (and the test failed) when it runs past `limit`,
/// as a replay that hangs on a FIFO or waits on a server never would end.
fn wait_at_most(mut child: Child, limit: Duration) -> std::process::Output {
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stdout.read_to_end(&mut b);
        b
    });
    let err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        b
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("toolslot did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    std::process::Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// `VmHWM` of a live process, in kB.
fn high_water_kb(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// What a replay printed.
pub struct Replayed {
    pub code: Option<i32>,
    pub events: Vec<Value>,
    pub stderr: String,
    pub elapsed: Duration,
    /// The highest resident memory seen while it ran (kB).
    pub peak_rss_kb: u64,
}

impl Replayed {
    /// The results of the (last) round; panics, with stderr, when there is none.
    pub fn results(&self) -> Vec<Value> {
        let last = self
            .events
            .iter()
            .rev()
            .find(|e| e["type"] == "round_complete")
            .unwrap_or_else(|| panic!("no round_complete (exit {:?}): {}", self.code, self.stderr));
        last["results"].as_array().unwrap().clone()
    }

    /// The content of result `i`.
    pub fn content(&self, i: usize) -> String {
        self.results()[i]["content"].as_str().unwrap().to_string()
    }

    /// Every notice's message of `kind`.
    pub fn notices(&self, kind: &str) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e["type"] == "notice" && e["kind"] == kind)
            .map(|e| e["message"].as_str().unwrap_or("").to_string())
            .collect()
    }
}

/// Waits until `toolslot serve` (a child with its stderr piped) says it is listening, for up to
/// `within`, then keeps reading its stderr so the server never blocks on a full pipe.
pub fn await_listening(child: &mut Child, within: Duration) {
    let mut err = BufReader::new(child.stderr.take().expect("the server's stderr is piped"));
    let mut line = String::new();
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        line.clear();
        if err.read_line(&mut line).unwrap() == 0 || line.contains("listening on") {
            break;
        }
    }
    assert!(line.contains("listening on"), "the server did not start: {line}");
    std::thread::spawn(move || for _ in err.lines() {});
}

/// The bearer token of [`Served`] servers.
pub const TOKEN: &str = "bounded-test-token";

/// A running `toolslot serve`, killed when dropped.
pub struct Served {
    pub child: Child,
    pub addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Bed {
    /// Starts `toolslot serve` with `config` (a bind address and token are added).
    pub fn serve(&self, config: &str) -> Served {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let path = self.config(&format!(
            "{config}\n[server]\nbind = \"127.0.0.1:{port}\"\ntoken = \"{TOKEN}\"\n[overflow]\ndir = \"{}\"\n",
            self.overflow().display()
        ));
        let mut child = toolslot()
            .env("TOOLSLOT_MCP__TOOL_CACHE_DIR", "")
            .args(["serve", "--config"])
            .arg(&path)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        await_listening(&mut child, Duration::from_secs(30));
        Served {
            child,
            addr: format!("127.0.0.1:{port}"),
        }
    }
}

impl Served {
    /// One HTTP/1.1 request; the status and the (de-chunked) body.
    pub fn http(&self, method: &str, path: &str, body: &[u8]) -> (u16, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.addr,
            body.len()
        )
        .unwrap();
        s.write_all(body).unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let text = String::from_utf8_lossy(&raw).to_string();
        let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
            dechunk(rest)
        } else {
            rest.to_string()
        };
        (status, body)
    }

    /// Opens a full-auto session on `ws`.
    pub fn session(&self, ws: &Path) -> String {
        let body = json!({"workspace": ws, "approval_mode": "full-auto"}).to_string();
        let (status, text) = self.http("POST", "/v1/sessions", body.as_bytes());
        assert_eq!(status, 200, "{text}");
        serde_json::from_str::<Value>(&text).unwrap()["session_id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Runs one round calling `calls` in `session`; its results.
    pub fn round(&self, session: &str, calls: &[(&str, Value)]) -> Vec<Value> {
        let (status, sse) = self.http(
            "POST",
            &format!("/v1/sessions/{session}/rounds?dialect=openai-chat"),
            openai_stream(calls).as_bytes(),
        );
        assert_eq!(status, 200, "{sse}");
        let events: Vec<Value> = sse
            .split("\n\n")
            .filter_map(|f| f.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str(d).ok())
            .collect();
        let last = events.last().unwrap_or_else(|| panic!("no events: {sse}"));
        assert_eq!(last["type"], "round_complete", "{sse}");
        last["results"].as_array().unwrap().clone()
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A `[[mcp.servers]]` table for a server run as `command`, started at start-up, its tools
/// in the catalog (not deferred).
pub fn mcp_server(name: &str, command: &[String], extra: &str) -> String {
    let command: Vec<String> = command.iter().map(|c| format!("{c:?}")).collect();
    format!(
        "[[mcp.servers]]\nname = {name:?}\ncommand = [{}]\nrequired = true\ndefer = false\nstartup_timeout_ms = 60000\n{extra}\n",
        command.join(", ")
    )
}

/// The command of `tests/data/hostile/raw_server.py` with `args`.
pub fn raw_server(args: &[&str]) -> Vec<String> {
    let mut c = vec![python().display().to_string(), hostile("raw_server.py").display().to_string()];
    c.extend(args.iter().map(|a| a.to_string()));
    c
}

/// The command of `tests/data/hostile/sdk_server.py` with `args`.
pub fn sdk_server(args: &[&str]) -> Vec<String> {
    let mut c = vec![python().display().to_string(), hostile("sdk_server.py").display().to_string()];
    c.extend(args.iter().map(|a| a.to_string()));
    c
}

/// The pids written to `dir` (`NAME.pid` files), by file name.
pub fn pids_in(dir: &Path) -> Vec<(String, i32)> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let pid = std::fs::read_to_string(e.path()).ok()?.trim().parse().ok()?;
                    name.ends_with(".pid").then_some((name, pid))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a process `pid` exists (a zombie counts as gone).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits up to `secs` for `done`.
pub fn eventually(secs: u64, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

pub mod nats;
