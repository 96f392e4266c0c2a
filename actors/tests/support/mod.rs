//! Driving the binary as an attacker would: `toolslot replay` on a stream that calls tools,
//! and `toolslot serve` over HTTP (support/serve.rs), with a config written for the test; the
//! NATS side in support/nats.rs.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub mod nats;
pub mod serve;

pub use serve::*;

/// The binary, as it is.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_toolslot"))
}

/// The binary. The audit ledger is off: its default folder is the user's home, which a test
/// must not write to (the ledger's own tests, in policy.rs and approvals.rs, give it a folder).
pub fn toolslot() -> Command {
    let mut cmd = bin();
    cmd.env("TOOLSLOT_AUDIT__LEDGER_DIR", "");
    cmd
}

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().unwrap()
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

/// Writes `rounds` (provider streams) to `round-N.sse` files in `dir`; their paths.
pub fn round_files(dir: &Path, rounds: &[String]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for (n, body) in rounds.iter().enumerate() {
        let file = dir.join(format!("round-{n}.sse"));
        std::fs::write(&file, body).unwrap();
        files.push(file);
    }
    files
}

/// Runs `cmd` (the binary, with a test's environment) as `toolslot replay` of `rounds` (their
/// files written in `dir`) in workspace `ws` with `config`, approvals answered `approve`.
pub fn replay_with(mut cmd: Command, dir: &Path, ws: &Path, config: &Path, approve: &str, rounds: &[String]) -> std::process::Output {
    let files = round_files(dir, rounds);
    cmd.args(["replay", "--approve", approve, "--workspace"])
        .arg(ws)
        .arg("--config")
        .arg(config)
        .args(&files)
        .output()
        .unwrap()
}

/// `toolslot replay` of `rounds` of calls (one session) in workspace `dir/ws`, made if missing,
/// with `config`, saved outputs in `dir/overflow`, approvals answered `approve`; checks that it
/// exits 0, and returns every event.
pub fn replay_calls(dir: &Path, config: &Path, approve: &str, rounds: &[Vec<(&str, Value)>]) -> Vec<Value> {
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut cmd = toolslot();
    cmd.env("TOOLSLOT_OVERFLOW__DIR", dir.join("overflow"));
    let rounds: Vec<String> = rounds.iter().map(|calls| openai_stream(calls)).collect();
    let out = replay_with(cmd, dir, &ws, config, approve, &rounds);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    json_lines(&out.stdout)
}

/// The results of each round of a replay's events.
pub fn results_by_round(events: &[Value]) -> Vec<Vec<Value>> {
    events
        .iter()
        .filter(|e| e["type"] == "round_complete")
        .map(|e| e["results"].as_array().unwrap().clone())
        .collect()
}

/// The results of every round of a replay's events, in order.
pub fn round_results(events: &[Value]) -> Vec<Value> {
    results_by_round(events).into_iter().flatten().collect()
}

/// The JSON lines a command printed (every line must be one).
pub fn json_lines(stdout: &[u8]) -> Vec<Value> {
    std::str::from_utf8(stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A loopback port nothing listens on (yet).
/// `tests/data/mcp_server_client.py` (the official MCP Python SDK as a client) against
/// `target` (the binary, or a server's base URL), in `workspace`, for `scenario` in `mode`.
pub fn mcp_client(target: &str, workspace: &Path, scenario: &str, mode: &str) -> Command {
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("tests/data/mcp_server_client.py"))
        .arg(target)
        .arg(workspace)
        .arg(scenario)
        .arg(mode);
    cmd
}

/// The JSON object a successful client script printed last (what it saw), or a panic naming
/// `what` with everything it printed.
pub fn printed_json(what: &str, out: &std::process::Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what} failed:\n{stdout}\n{stderr}");
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{what} printed no JSON ({e}):\n{stdout}\n{stderr}"))
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Whether something accepts connections on loopback port `port`.
pub fn listening(port: u16) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
}

/// Sends `signal` to `pid`.
pub fn signal(pid: u32, signal: i32) {
    // SAFETY: kill only sends a signal to a process this test started.
    unsafe {
        libc::kill(pid as i32, signal);
    }
}

/// A child process killed (SIGKILL, by pid, woken first if it was stopped) and reaped when
/// dropped, also when a test fails.
pub struct Proc {
    pub child: Child,
}

impl Proc {
    pub fn spawn(cmd: &mut Command) -> Proc {
        Proc {
            child: cmd.spawn().unwrap(),
        }
    }
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
    pub fn kill(&mut self) {
        // Only while it has not been reaped: its pid could be another process's by then.
        if let Ok(None) = self.child.try_wait() {
            signal(self.pid(), libc::SIGCONT);
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits until `child` (its stderr piped) writes a line holding `needle` to stderr, for up to
/// `within`, then keeps reading its stderr so the child never blocks on a full pipe.
pub fn await_line(child: &mut Child, needle: &str, within: Duration) {
    let stderr = child.stderr.take().expect("the child's stderr is piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + within;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return,
            Ok(line) => seen.push(line),
            Err(_) => panic!("`{needle}` did not come within {within:?}: {seen:?}"),
        }
    }
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
        let streams: Vec<String> = rounds.iter().map(|calls| openai_stream(calls)).collect();
        let streams = round_files(self.dir.path(), &streams);
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

impl Bed {
    /// Starts `toolslot serve` with `config` (a bind address and token are added).
    pub fn serve(&self, config: &str) -> Served {
        Serve::in_dir(self.dir.path(), &self.ws).config(config).start()
    }
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

/// Runs `git ARGS` in `dir` as a fixed user on branch `main`, and checks that it succeeded.
pub fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A stand-in program `name` in `bin` (put it first on the PATH): it says it ran on stdout
/// (`STAND-IN NAME RAN: ARGS`, the name in capitals) and appends its arguments to `marker`
/// wherever it may write.
pub fn stand_in(bin: &Path, name: &str, marker: &Path) -> PathBuf {
    let path = bin.join(name);
    let shown = name.to_uppercase();
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\necho \"STAND-IN {shown} RAN: $@\"\necho \"$@\" >> '{}'\n",
            marker.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}
