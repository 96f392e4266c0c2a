//! Remote execution against a real nats-server and real `toolslot worker` processes, driven
//! through the binary (`toolslot replay`). Every fault test asserts exactly one result per call,
//! and at most one side effect per call that may write (an append-only marker file).

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use support::nats::*;
use support::{Client, Proc, Served, deps, events, free_port, http, signal, toolslot};

const READER: &str = r#"import json, os, sys, time
args = json.load(sys.stdin)
with open(args["marker"], "a") as f:
    f.write(f"{os.getppid()}\n")
time.sleep(float(args.get("secs", 0)))
if "ended" in args:
    with open(args["ended"], "a") as f:
        f.write("ended\n")
print("read ok")
"#;

/// A config routing the shell tools and the read-only extension `slow_read` to pool `shell`.
fn setup_with(nats: &Nats, sandbox: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("reader.py");
    std::fs::write(&script, READER).unwrap();
    let extra = format!(
        r#"[[extensions]]
name = "slow_read"
description = "Reads slowly"
capabilities = ["read_only"]
command = ["python3", "{}"]
input_schema = '{{"type":"object","properties":{{"marker":{{"type":"string"}},"secs":{{"type":"number"}},"ended":{{"type":"string"}}}},"required":["marker"]}}'
parallel = true
"#,
        script.display()
    );
    let config = write_config(dir.path(), nats, SHELL_ROUTES, sandbox, &extra);
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    (dir, config)
}

/// As [`setup_with`], with the OS sandbox on: workers run commands as in-process execution would.
fn setup(nats: &Nats) -> (tempfile::TempDir, std::path::PathBuf) {
    setup_with(nats, "auto")
}

fn shell(command: &str) -> (&'static str, serde_json::Value) {
    ("exec_shell", json!({ "command": command }))
}

/// A worker of pool `mcp` (in its own folder) running the MCP server `name` as `command` (TOML
/// strings), and the dispatcher's config in `dir`; both route `routes` to the pool and add
/// `remote` to their `[remote]` table (a signing key).
fn mcp_worker(dir: &Path, nats: &Nats, routes: &str, name: &str, command: &str, remote: &str) -> (Proc, PathBuf) {
    let worker_dir = dir.join("worker");
    std::fs::create_dir_all(&worker_dir).unwrap();
    let server = format!(
        "[mcp]\ntool_cache_dir = \"\"\nstartup_timeout_ms = 60000\n[[mcp.servers]]\nname = \"{name}\"\ncommand = [{command}]\ndefer = false\nrequired = true\n"
    );
    let worker = worker(&write_config_with(&worker_dir, nats, routes, "auto", &server, remote), "mcp", &[]);
    (worker, write_config_with(dir, nats, routes, "auto", "", remote))
}

#[test]
fn routed_calls_run_on_a_worker_and_large_results_come_back_whole() {
    let _one = serial();
    let nats = Nats::start();
    let (dir, config) = setup(&nats);
    let ws = dir.path().join("ws");
    let _w = worker(&config, "shell", &[("WHO", "the-worker")]);
    // 20 000 lines: more than the shell budget and more than a record holds (4 KiB here).
    let mut replay = Replay::start(&config, &ws, &[sse(&[shell("echo ran by $WHO"), shell("seq 1 20000")])]);
    let results = replay.round(2, 60);
    assert_eq!(results[0]["is_error"], false, "{results:?}");
    assert!(results[0]["content"].as_str().unwrap().contains("ran by the-worker"), "{results:?}");
    let big = results[1]["content"].as_str().unwrap();
    assert!(big.starts_with("1\n2\n3\n") && big.contains("20000"), "head and tail kept");
    // Cut on the worker as it streamed (bounded capture), head and tail kept, and carried back
    // through the object store (it is larger than a record's 4 KiB here).
    assert!(big.len() < 60_000, "cut: {} bytes", big.len());
    assert!(
        !big.contains("retrieve_tool_result ref="),
        "no saved output is promised: workers keep none"
    );
}

#[test]
fn a_pool_without_a_live_worker_answers_unavailable_at_once() {
    let _one = serial();
    let nats = Nats::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &nats,
        r#"{ "exec_shell" = "nobody" }"#,
        "auto",
        "[execution]\ncall_timeout_ms = 600000",
    );
    let marker = dir.path().join("marker");
    let started = std::time::Instant::now();
    let mut replay = Replay::start(&config, dir.path(), &[sse(&[shell(&format!("echo x >> {}", marker.display()))])]);
    let results = replay.round(1, 60);
    let meta = error_meta(results[0]["content"].as_str().unwrap());
    assert_eq!(meta["error"], "unavailable", "{results:?}");
    assert_eq!(meta["side_effect"], "not_started", "{results:?}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "answered long before the call's timeout"
    );
    assert!(lines(&marker).is_empty(), "nothing ran");
}

#[test]
fn a_worker_killed_during_a_writing_call_gives_outcome_unknown_and_no_second_run() {
    let _one = serial();
    let nats = Nats::start();
    let (dir, config) = setup(&nats);
    // Inside the workspace: the only folder an approved command may write in the sandbox.
    let marker = dir.path().join("ws/marker");
    let mut first = worker(&config, "shell", &[]);
    let mut replay = Replay::start(
        &config,
        &dir.path().join("ws"),
        &[sse(&[shell(&format!("echo run >> {}; sleep 30", marker.display()))])],
    );
    wait_until(30, "the command to start", || lines(&marker).len() == 1);
    first.kill();
    // A second worker is there to be tempted: a call that may write is never delivered again.
    let _second = worker(&config, "shell", &[]);
    let results = replay.round(1, 60);
    let content = results[0]["content"].as_str().unwrap();
    assert_eq!(error_meta(content)["error"], "outcome_unknown", "{content}");
    assert!(
        content.contains("was running on worker") && content.contains("check before retrying"),
        "{content}"
    );
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(lines(&marker).len(), 1, "run once, never again");
}

#[test]
fn a_worker_killed_during_a_read_only_call_hands_it_to_another_once() {
    let _one = serial();
    let nats = Nats::start();
    // Without the OS sandbox: a read-only call sees the files read-only there, and this one
    // must leave a mark to count its deliveries.
    let (dir, config) = setup_with(&nats, "none");
    // Inside the workspace: the only folder an approved command may write in the sandbox.
    let marker = dir.path().join("ws/marker");
    let mut a = worker(&config, "shell", &[]);
    let mut b = worker(&config, "shell", &[]);
    let call = ("slow_read", json!({"marker": marker.display().to_string(), "secs": 4}));
    let mut replay = Replay::start(&config, &dir.path().join("ws"), &[sse(&[call])]);
    wait_until(30, "the first delivery", || lines(&marker).len() == 1);
    // The marker names the process that ran the extension: kill that worker.
    let first = lines(&marker)[0].parse::<u32>().unwrap();
    if first == a.pid() {
        a.kill();
    } else {
        assert_eq!(first, b.pid(), "the extension runs under a worker");
        b.kill();
    }
    let results = replay.round(1, 60);
    assert_eq!(results[0]["is_error"], false, "{results:?}");
    assert!(results[0]["content"].as_str().unwrap().contains("read ok"));
    let runs = lines(&marker);
    assert_eq!(runs.len(), 2, "delivered once more, to the other worker: {runs:?}");
    assert_ne!(runs[0], runs[1]);
}

/// A `toolslot worker` of pool `shell` whose log (the bell's wake-ups at debug level) goes to
/// `log`; ready once it has announced itself.
fn logged_worker(config: &Path, log: &Path) -> Proc {
    let file = std::fs::File::create(log).unwrap();
    let w = Proc::spawn(
        toolslot()
            .args(["worker", "--pool", "shell", "--slots", "2", "--config"])
            .arg(config)
            .env("RUST_LOG", "warn,async_nats=off,toolslot_actors::sources::remote::worker=debug")
            .stdout(std::process::Stdio::null())
            .stderr(file),
    );
    wait_until(30, "the worker to be ready", || {
        std::fs::read_to_string(log).unwrap_or_default().contains(" ready (")
    });
    w
}

fn wake_ups(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .matches("woken by the bell")
        .count()
}

#[test]
fn a_call_wakes_one_idle_worker_and_none_is_lost_with_a_woken_worker() {
    let _one = serial();
    let nats = Nats::start();
    let (dir, config) = setup_with(&nats, "none");
    let ws = dir.path().join("ws");
    let logs: Vec<PathBuf> = (0..4).map(|i| dir.path().join(format!("worker{i}.log"))).collect();
    let mut workers: Vec<Proc> = logs.iter().map(|l| logged_worker(&config, l)).collect();
    // Idle long enough that every worker has joined the bell group.
    std::thread::sleep(Duration::from_millis(500));
    let calls = 8;
    let rounds: Vec<String> = (0..calls).map(|i| sse(&[shell(&format!("echo call {i}"))])).collect();
    let mut replay = Replay::start(&config, &ws, &rounds);
    for i in 0..calls {
        let results = replay.round(1, 60);
        assert!(
            results[0]["content"].as_str().unwrap().contains(&format!("call {i}")),
            "{results:?}"
        );
    }
    let woken: Vec<usize> = logs.iter().map(|l| wake_ups(l)).collect();
    let total: usize = woken.iter().sum();
    // One wake-up per call (a whole-pool bell would be four per call).
    assert!(total >= 1 && total <= calls + 1, "wake-ups per worker: {woken:?} for {calls} calls");
    // A woken worker waits at the server only on the queue its bell named: these calls all
    // went to one queue, and a wait at the other, empty one would hold each call for the wait.
    let text: String = logs.iter().map(|l| std::fs::read_to_string(l).unwrap()).collect();
    let queue_of = |line: &str| {
        line.split("queue=")
            .nth(1)
            .map(|q| q.trim_matches('"').split(['"', ' ']).next().unwrap().to_string())
    };
    let rung: Vec<_> = text.lines().filter(|l| l.contains("woken by the bell")).map(queue_of).collect();
    let waited: Vec<_> = text.lines().filter(|l| l.contains("waiting at the server")).map(queue_of).collect();
    assert_eq!(rung.len(), waited.len(), "one wait per bell:\n{text}");
    assert!(
        rung.iter().chain(&waited).all(|q| q.is_some() && *q == rung[0]),
        "bells on {rung:?}, waits on {waited:?}"
    );

    // A worker rung but stopped (it keeps its place in the group) or killed: every call still
    // gets its real result, from the others.
    signal(workers[0].pid(), libc::SIGSTOP);
    workers[1].kill();
    let rounds: Vec<String> = (0..calls).map(|i| sse(&[shell(&format!("echo late {i}"))])).collect();
    let mut replay = Replay::start(&config, &ws, &rounds);
    for i in 0..calls {
        let results = replay.round(1, 60);
        assert_eq!(results[0]["is_error"], false, "{results:?}");
        assert!(
            results[0]["content"].as_str().unwrap().contains(&format!("late {i}")),
            "{results:?}"
        );
    }
    assert!(wake_ups(&logs[0]) == woken[0], "a stopped worker ran nothing");
}

#[test]
fn a_call_queued_for_a_worker_that_died_before_taking_it_is_never_run() {
    let _one = serial();
    let nats = Nats::start();
    let (dir, config) = setup(&nats);
    // Inside the workspace: the only folder an approved command may write in the sandbox.
    let marker = dir.path().join("ws/marker");
    let mut w = worker(&config, "shell", &[]);
    // Killed while its announcement is still fresh: the dispatcher queues the call for it.
    w.kill();
    let mut replay = Replay::start(
        &config,
        &dir.path().join("ws"),
        &[sse(&[shell(&format!("echo run >> {}", marker.display()))])],
    );
    let results = replay.round(1, 60);
    let meta = error_meta(results[0]["content"].as_str().unwrap());
    assert_eq!(meta["error"], "unavailable", "{results:?}");
    assert_eq!(meta["side_effect"], "not_started", "{results:?}");
    // A worker that comes up now finds the call given up, and does not run it.
    let _late = worker(&config, "shell", &[]);
    std::thread::sleep(Duration::from_secs(3));
    assert!(lines(&marker).is_empty(), "never run");
}

#[test]
fn a_worker_stopped_past_the_ack_wait_loses_the_call_and_kills_it_when_it_wakes() {
    let _one = serial();
    let nats = Nats::start();
    let (dir, config) = setup(&nats);
    // Inside the workspace: the only folder an approved command may write in the sandbox.
    let marker = dir.path().join("ws/marker");
    let w = worker(&config, "shell", &[]);
    let command = format!("echo start >> {m}; sleep 6; echo end >> {m}", m = marker.display());
    let mut replay = Replay::start(&config, &dir.path().join("ws"), &[sse(&[shell(&command)])]);
    wait_until(30, "the command to start", || lines(&marker).len() == 1);
    let started = std::time::Instant::now();
    signal(w.pid(), libc::SIGSTOP);
    let results = replay.round(1, 60);
    let content = results[0]["content"].as_str().unwrap();
    assert_eq!(error_meta(content)["error"], "outcome_unknown", "{content}");
    signal(w.pid(), libc::SIGCONT);
    // Awake, the worker finds its claim overwritten and kills the command before it ends.
    std::thread::sleep(Duration::from_secs(8).saturating_sub(started.elapsed()));
    assert_eq!(lines(&marker), vec!["start".to_string()], "stopped before its end");
}

/// A command that marks its start, sleeps `secs` and prints `finished`, with nats-server
/// killed once it has started and restarted `down_ms` later: its real result, run once.
fn across_a_nats_restart(secs: u64, down_ms: u64) {
    let _one = serial();
    let mut nats = Nats::start();
    let (dir, config) = setup(&nats);
    // Inside the workspace: the only folder an approved command may write in the sandbox.
    let marker = dir.path().join("ws/marker");
    let _w = worker(&config, "shell", &[]);
    let command = format!("echo run >> {}; sleep {secs}; echo finished", marker.display());
    let mut replay = Replay::start(&config, &dir.path().join("ws"), &[sse(&[shell(&command)])]);
    wait_until(30, "the command to start", || lines(&marker).len() == 1);
    nats.kill();
    std::thread::sleep(Duration::from_millis(down_ms));
    nats.restart();
    let results = replay.round(1, 90);
    assert_eq!(results[0]["is_error"], false, "{results:?}");
    assert!(results[0]["content"].as_str().unwrap().contains("finished"), "{results:?}");
    assert_eq!(lines(&marker).len(), 1, "run once");
}

#[test]
fn nats_killed_and_restarted_mid_call_loses_nothing() {
    across_a_nats_restart(3, 1000);
}

#[test]
fn a_result_finished_while_nats_was_down_is_found_in_its_record() {
    // It ends while the server is down: the answer its worker publishes has nobody to reach;
    // the `done` it writes, retried, lands once the server is back.
    across_a_nats_restart(1, 2500);
}

/// A nats-server with its monitoring endpoint, which counts what each connection cost.
struct Monitored {
    nats: Nats,
    port: u16,
}

impl Monitored {
    fn start() -> Monitored {
        let port = free_port();
        let nats = Nats::start_with(&["-m", &port.to_string()], &[]);
        Monitored { nats, port }
    }

    /// The connections in `state` (`open`, `closed`) whose name starts with `name`, oldest first.
    fn connections(&self, state: &str, name: &str) -> Vec<serde_json::Value> {
        let path = format!("/connz?state={state}&subs=1&limit=1024");
        let connz = self.get(&path);
        let all = connz["connections"].as_array().cloned().unwrap_or_default();
        all.into_iter()
            .filter(|c| c["name"].as_str().is_some_and(|n| n.starts_with(name)))
            .collect()
    }

    /// The open connection whose name starts with `name`.
    fn open(&self, name: &str) -> serde_json::Value {
        let mut found = self.connections("open", name);
        assert_eq!(found.len(), 1, "one open connection named {name}…: {found:?}");
        found.remove(0)
    }

    /// The subscriptions the server has taken in so far, from every connection.
    fn subscriptions_made(&self) -> u64 {
        self.get("/subsz")["num_inserts"].as_u64().unwrap()
    }

    fn get(&self, path: &str) -> serde_json::Value {
        let (status, text) = http(&format!("127.0.0.1:{}", self.port), "GET", path, b"");
        assert_eq!(status, 200, "{text}");
        serde_json::from_str(&text).unwrap()
    }
}

#[test]
fn a_waiting_call_costs_its_dispatcher_no_subscription_of_its_own() {
    let _one = serial();
    let monitored = Monitored::start();
    let (dir, config) = setup_with(&monitored.nats, "none");
    let ws = dir.path().join("ws");
    let started = dir.path().join("started");
    let _w = worker(&config, "shell", &[]);
    let rounds = [sse(&[shell(&format!("touch {}; sleep 2; echo slept", started.display()))])];
    let mut replay = Replay::start(&config, &ws, &rounds);
    wait_until(30, "the call to start on its worker", || started.exists());
    // While the call waits for its answer: the hub's own subscriptions (answers, every
    // call's progress reports), none made for this call.
    let dispatcher = monitored.open("toolslot-dispatcher");
    let subjects: Vec<&str> = dispatcher["subscriptions_list"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s.as_str())
        .collect();
    assert!(subjects.contains(&"toolslot.progress.>"), "{subjects:?}");
    let own: Vec<&&str> = subjects.iter().filter(|s| s.starts_with("toolslot.progress.shell")).collect();
    assert!(own.is_empty(), "a subscription made for the waiting call: {own:?}");
    let results = replay.round(1, 60);
    assert!(results[0]["content"].as_str().unwrap().contains("slept"), "{results:?}");
}

/// What one of 20 remote calls `call(i)` (their results checked by `answered`) costs, counted
/// by the server: subscriptions made, messages to and from the worker (started with `env`
/// added), messages to the dispatcher.
fn messages_per_call(
    env: &[(&str, &str)],
    call: impl Fn(usize) -> (&'static str, serde_json::Value),
    answered: impl Fn(usize, &str) -> bool,
) -> [f64; 4] {
    let monitored = Monitored::start();
    let (dir, config) = setup_with(&monitored.nats, "none");
    let ws = dir.path().join("ws");
    // Its idle look at the queues (every 200 ms in these tests) would be counted with the calls.
    let env = [env, &[("TOOLSLOT_REMOTE__WORKER_POLL_MS", "600000")]].concat();
    let _w = worker(&config, "shell", &env);
    // What the server counted: subscriptions made, messages to and from the worker. Read once
    // the worker has finished what it was doing (its last `done` and acknowledgement can
    // follow the dispatcher's exit).
    let count = || {
        let mut last = None;
        loop {
            let worker = monitored.open("toolslot-worker-");
            let messages = |k: &str| worker[k].as_u64().unwrap();
            let now = [monitored.subscriptions_made(), messages("out_msgs"), messages("in_msgs")];
            if last == Some(now) {
                return now;
            }
            last = Some(now);
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    // Two dispatchers, one after the other, making 4 and 24 calls: what the second cost beyond
    // the first is what 20 calls cost, start-up left out.
    let mut seen = vec![count()];
    for (run, calls) in [4, 24].into_iter().enumerate() {
        let rounds: Vec<String> = (0..calls).map(|i| sse(&[call(i)])).collect();
        let mut replay = Replay::start(&config, &ws, &rounds);
        for i in 0..calls {
            let results = replay.round(1, 60);
            assert!(answered(i, results[0]["content"].as_str().unwrap()), "{results:?}");
        }
        drop(replay);
        wait_until(10, "the dispatcher's connection to close", || {
            monitored.connections("closed", "toolslot-dispatcher").len() > run
        });
        seen.push(count());
    }
    let per_call = |k: usize| {
        let (first, second) = (seen[1][k] - seen[0][k], seen[2][k] - seen[1][k]);
        (second as f64 - first as f64) / 20.0
    };
    let delivered: Vec<u64> = monitored
        .connections("closed", "toolslot-dispatcher")
        .iter()
        .map(|c| c["out_msgs"].as_u64().unwrap())
        .collect();
    let to_dispatcher = (delivered[1] as f64 - delivered[0] as f64) / 20.0;
    println!("server's counts after each dispatcher: {seen:?}; messages to each dispatcher: {delivered:?}");
    [per_call(0), per_call(1), per_call(2), to_dispatcher]
}

#[test]
fn a_remote_call_costs_the_worker_one_pull_the_dispatcher_two_messages_and_nobody_a_subscription() {
    let _one = serial();
    let echo = |i| shell(&format!("echo call {i}"));
    let [subscriptions, to_worker, from_worker, to_dispatcher] =
        messages_per_call(&[], echo, |i, content| content.contains(&format!("call {i}")));
    // A pull over an inbox of its own (async-nats' `fetch`) or a progress subscription per
    // call would each make twenty or more.
    assert!(subscriptions < 0.5, "{subscriptions:.2} subscriptions per call");
    // A call that may write. To the worker: the bell, the call, the acknowledgements of its
    // claim and of its `done`. From it: one pull, the claim, the answer, the `done`, the
    // call's acknowledgement. Asking both queues again after each call would add two pulls
    // and the server's two "no messages".
    assert!(
        to_worker < 5.0 && from_worker < 6.0,
        "per call: {to_worker:.2} messages to the worker, {from_worker:.2} from it"
    );
    // To the dispatcher: the publish's acknowledgement and the worker's answer; following
    // every record would bring each call's claim and its `done` again (four).
    assert!(to_dispatcher < 3.0, "{to_dispatcher:.2} messages per call reached the dispatcher");
}

#[test]
fn a_read_only_call_that_ends_before_its_claim_is_due_writes_claim_and_result_at_once() {
    let _one = serial();
    let marker = tempfile::NamedTempFile::new().unwrap();
    let path = marker.path().display().to_string();
    // Each with its own arguments, or the loop guard would block the third.
    let read = move |i: usize| ("slow_read", json!({ "marker": path, "secs": i as f64 / 10000.0 }));
    // Its claim due long after a call ends, however slowly python starts on a busy machine
    // (past the default 100 ms, a call is claimed as it runs: the figures below would not hold).
    let later = [("TOOLSLOT_REMOTE__READ_ONLY_CLAIM_AFTER_MS", "60000")];
    let [_, to_worker, from_worker, to_dispatcher] = messages_per_call(&later, read, |_, content| content.contains("read ok"));
    // To the worker: the bell, the call, the acknowledgement of its `done`. From it: one pull,
    // the answer, the `done` (written where there is no record), the call's acknowledgement.
    // Claiming first, as a call that may write does, adds the claim and its acknowledgement.
    assert!(
        to_worker < 3.5 && from_worker < 4.5,
        "per call: {to_worker:.2} messages to the worker, {from_worker:.2} from it"
    );
    assert!(to_dispatcher < 3.0, "{to_dispatcher:.2} messages per call reached the dispatcher");
    assert_eq!(lines(marker.path()).len(), 28, "each call ran once");
}

#[test]
fn background_tasks_stay_on_the_worker_that_started_them() {
    let _one = serial();
    let nats = Nats::start();
    let (dir, config) = setup(&nats);
    let _a = worker(&config, "shell", &[("WHO", "a")]);
    let _b = worker(&config, "shell", &[("WHO", "b")]);
    // Each poll waits a moment first (a command on any worker), so that the task has written.
    let poll = || sse(&[shell("sleep 0.7"), ("shell_output", json!({"task_id": "t1"}))]);
    let rounds = [
        sse(&[("exec_shell", json!({"command": "echo task on $WHO; sleep 1", "background": true}))]),
        poll(),
        poll(),
    ];
    let mut replay = Replay::start(&config, &dir.path().join("ws"), &rounds);
    let started = replay.round(1, 60);
    assert!(started[0]["content"].as_str().unwrap().contains("t1"), "{started:?}");
    let mut output = String::new();
    for _ in 0..2 {
        let r = replay.round(2, 60);
        assert_eq!(r[1]["is_error"], false, "every poll reaches the task's worker: {r:?}");
        output.push_str(r[1]["content"].as_str().unwrap());
    }
    assert!(output.contains("task on a") || output.contains("task on b"), "{output}");
    assert!(output.contains("exited with code 0"), "{output}");
}

#[test]
fn a_call_that_times_out_is_stopped_on_its_worker() {
    let _one = serial();
    let nats = Nats::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &nats, SHELL_ROUTES, "auto", "[execution]\ncall_timeout_ms = 3000");
    let marker = dir.path().join("marker");
    let _w = worker(&config, "shell", &[]);
    // It would end after 4 s: after the call's timeout (3 s, time for a loaded machine's worker
    // to take it), before the worker's own backstop (the timeout plus an ack wait, 5 s).
    let command = format!("echo start >> {m}; sleep 4; echo end >> {m}", m = marker.display());
    let started = std::time::Instant::now();
    let mut replay = Replay::start(&config, dir.path(), &[sse(&[shell(&command)])]);
    let results = replay.round(1, 60);
    assert_eq!(
        error_meta(results[0]["content"].as_str().unwrap())["error"],
        "timeout",
        "{results:?}"
    );
    // The dispatcher's cancellation reaches the worker, which kills the command's process
    // group before it ends.
    std::thread::sleep(Duration::from_millis(4400).saturating_sub(started.elapsed()));
    assert_eq!(lines(&marker), vec!["start".to_string()], "stopped before its end");
}

#[test]
fn a_read_only_call_given_up_before_its_claim_is_stopped_when_the_claim_falls_due() {
    let _one = serial();
    let nats = Nats::start();
    let (dir, _) = setup_with(&nats, "none");
    // The extension of `setup_with`, with the call's timeout shorter than its sleep.
    let text = std::fs::read_to_string(dir.path().join("config.toml")).unwrap();
    let config = dir.path().join("timed.toml");
    std::fs::write(&config, format!("[execution]\ncall_timeout_ms = 3000\n{text}")).unwrap();
    let (marker, ended) = (dir.path().join("ws/marker"), dir.path().join("ws/ended"));
    // Its claim falls due after the call's timeout (3 s, time for a loaded machine's worker to
    // take it) and before the tool's end (4.5 s), which comes before the worker's own backstop
    // (the timeout plus an ack wait, 5 s).
    let _w = worker(&config, "shell", &[("TOOLSLOT_REMOTE__READ_ONLY_CLAIM_AFTER_MS", "3800")]);
    let call = (
        "slow_read",
        json!({"marker": marker.display().to_string(), "secs": 4.5, "ended": ended.display().to_string()}),
    );
    let started = std::time::Instant::now();
    let mut replay = Replay::start(&config, &dir.path().join("ws"), &[sse(&[call])]);
    let results = replay.round(1, 60);
    // An extension's output comes in the external-content envelope.
    let content = results[0]["content"].as_str().unwrap();
    assert!(content.contains(r#"{"error":"timeout"}"#), "{results:?}");
    // It began on the worker, unclaimed (python may still be starting on a busy machine).
    wait_until(4, "the tool's start", || lines(&marker).len() == 1);
    // Given up unclaimed: no worker to tell. When its claim falls due, the worker finds the
    // call given up and stops the tool before it ends; its result is never recorded.
    std::thread::sleep(Duration::from_millis(6000).saturating_sub(started.elapsed()));
    assert!(!ended.exists(), "stopped when its claim fell due, before its end");
    assert_eq!(lines(&marker).len(), 1, "run once");
}

#[test]
fn tools_only_workers_host_are_announced_and_routed() {
    let _one = serial();
    let nats = Nats::start();
    let dir = tempfile::tempdir().unwrap();
    let routes = r#"{ "time__*" = "mcp" }"#;
    // The worker runs the MCP server; the dispatcher knows of it only from the announcement.
    let time = format!(
        "\"{}\", \"--local-timezone=UTC\"",
        deps().join("venv/bin/mcp-server-time").display()
    );
    let (_w, config) = mcp_worker(dir.path(), &nats, routes, "time", &time, "");
    let catalog = toolslot()
        .args(["catalog", "--format", "json", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&catalog.stdout);
    assert!(listed.contains("time__get_current_time"), "{listed}");
    let call = ("time__get_current_time", json!({"timezone": "UTC"}));
    let mut replay = Replay::start(&config, dir.path(), &[sse(&[call])]);
    let results = replay.round(1, 60);
    let content = results[0]["content"].as_str().unwrap();
    assert_eq!(results[0]["is_error"], false, "{content}");
    assert!(
        content.starts_with("<external_content source=\"time__get_current_time\"") && content.contains("UTC"),
        "{content}"
    );
}

#[test]
fn serve_routes_calls_to_workers_from_its_worker_threads() {
    let _one = serial();
    let nats = Nats::start();
    let dir = tempfile::tempdir().unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    // Sessions on two worker threads, the hub's listeners on the server's own.
    let extra = format!("[server]\nbind = \"{addr}\"\n[execution]\nworkers = 2");
    let config = write_config(dir.path(), &nats, SHELL_ROUTES, "auto", &extra);
    let _w = worker(&config, "shell", &[("WHO", "the-worker")]);
    let _serve = Served::at(&config, &addr);
    let ids: Vec<String> = (0..3).map(|_| Client::new(&addr).session(dir.path())).collect();
    for id in &ids {
        let round = sse(&[shell("echo one on $WHO"), shell("echo two on $WHO")]);
        let (status, text) = http(&addr, "POST", &format!("/v1/sessions/{id}/rounds"), round.as_bytes());
        assert_eq!(status, 200, "{text}");
        let last = events(&text).pop().unwrap();
        let results = last["results"].as_array().unwrap();
        assert_eq!(results.len(), 2, "{last}");
        assert!(results[0]["content"].as_str().unwrap().contains("one on the-worker"), "{last}");
        assert!(results[1]["content"].as_str().unwrap().contains("two on the-worker"), "{last}");
    }
}

#[test]
fn a_worker_told_to_stop_finishes_its_call_then_leaves_the_pool() {
    let _one = serial();
    let nats = Nats::start();
    let (dir, config) = setup(&nats);
    // Inside the workspace: the only folder an approved command may write in the sandbox.
    let marker = dir.path().join("ws/marker");
    let mut w = worker(&config, "shell", &[]);
    let command = format!("echo run >> {}; sleep 1; echo finished", marker.display());
    let rounds = [
        sse(&[shell(&command)]),
        sse(&[shell(&format!("echo again >> {}", marker.display()))]),
    ];
    let mut replay = Replay::start(&config, &dir.path().join("ws"), &rounds);
    wait_until(30, "the command to start", || lines(&marker).len() == 1);
    signal(w.pid(), libc::SIGTERM);
    let first = replay.round(1, 60);
    assert!(
        first[0]["content"].as_str().unwrap().contains("finished"),
        "the running call ends normally: {first:?}"
    );
    let status = w.child.wait().unwrap();
    assert!(status.success(), "a clean exit: {status:?}");
    // Gone from the pool: the next call is not run, and says so.
    let second = replay.round(1, 60);
    let meta = error_meta(second[0]["content"].as_str().unwrap());
    assert_eq!(
        (meta["error"].as_str(), meta["side_effect"].as_str()),
        (Some("unavailable"), Some("not_started")),
        "{second:?}"
    );
    assert_eq!(lines(&marker), vec!["run".to_string()]);
}

#[test]
fn an_unreachable_nats_server_is_a_one_line_startup_error() {
    // Alone: a server another test starts could take the free port this one names.
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(&config, format!("[remote]\nnats_url = \"nats://127.0.0.1:{}\"\n", free_port())).unwrap();
    for args in [vec!["catalog"], vec!["worker", "--pool", "shell"]] {
        let out = toolslot().args(&args).arg("--config").arg(&config).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("cannot reach NATS") && !err.contains("panicked"), "{err}");
    }
}

#[test]
fn a_writing_call_longer_than_the_ack_wait_is_kept_alive_by_progress_acks() {
    let _one = serial();
    let nats = Nats::start();
    let (dir, config) = setup(&nats);
    // Inside the workspace: the only folder an approved command may write in the sandbox.
    let marker = dir.path().join("ws/marker");
    let _w = worker(&config, "shell", &[]);
    // Five seconds against an ack wait of two: without in-progress acks the server would count
    // the delivery as lost, and the call would come back `outcome_unknown`.
    let command = format!("echo run >> {}; sleep 5; echo finished", marker.display());
    let mut replay = Replay::start(&config, &dir.path().join("ws"), &[sse(&[shell(&command)])]);
    let results = replay.round(1, 60);
    assert_eq!(results[0]["is_error"], false, "{results:?}");
    assert!(results[0]["content"].as_str().unwrap().contains("finished"), "{results:?}");
    assert_eq!(lines(&marker).len(), 1);
}

#[test]
fn progress_reported_on_a_worker_reaches_the_host() {
    let _one = serial();
    let nats = Nats::start();
    let dir = tempfile::tempdir().unwrap();
    let routes = r#"{ "everything__*" = "mcp" }"#;
    let everything = deps().join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let command = format!("\"node\", \"{}\", \"stdio\"", everything.display());
    // Signed: the reports are signed by the worker's key and checked by the dispatcher
    // against the key that signed the call's claim.
    let (dispatcher, me) = (nkeys::KeyPair::new_user(), nkeys::KeyPair::new_user());
    let signing = signing_lines(dir.path(), &dispatcher, &me, &[&me]);
    let (_w, config) = mcp_worker(dir.path(), &nats, routes, "everything", &command, &signing);
    let call = ("everything__trigger-long-running-operation", json!({"duration": 2, "steps": 4}));
    let mut replay = Replay::start(&config, dir.path(), &[sse(&[call])]);
    let results = replay.round(1, 60);
    assert_eq!(results[0]["is_error"], false, "{results:?}");
    let progress: Vec<f64> = replay
        .seen
        .iter()
        .filter(|e| e["type"] == "progress" && e["index"] == 0 && e["id"] == "toolu_0")
        .map(|e| e["progress"].as_f64().unwrap())
        .collect();
    assert!(progress.len() >= 2, "the worker's progress reports are relayed: {:?}", replay.seen);
    assert!(progress.windows(2).all(|w| w[0] <= w[1]), "{progress:?}");
    // Reported while the call ran: every one before the call's end.
    let finished = replay.seen.iter().position(|e| e["type"] == "call_finished").unwrap();
    let last = replay.seen.iter().rposition(|e| e["type"] == "progress").unwrap();
    assert!(last < finished, "{:?}", replay.seen);
}

/// A server and a config (as [`setup`]) whose workspace (returned last) holds `secret.txt` and
/// `notes.txt`, and the repository's own policy hiding the first from exec_shell: the
/// dispatcher reads that policy, a worker never does.
fn with_a_hidden_secret(nats: &Nats) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (dir, config) = setup(nats);
    let ws = dir.path().join("ws");
    std::fs::write(ws.join("secret.txt"), "TOPSECRET-5150\n").unwrap();
    std::fs::write(ws.join("notes.txt"), "plain notes\n").unwrap();
    std::fs::create_dir_all(ws.join(".toolslot")).unwrap();
    std::fs::write(
        ws.join(".toolslot/policy.toml"),
        "[[policy.rules]]\ntool = \"exec_shell\"\npath = \"secret.txt\"\ndecision = \"deny\"\n",
    )
    .unwrap();
    (dir, config, ws)
}

#[test]
fn what_the_sessions_policy_hides_stays_hidden_from_a_command_run_on_a_worker() {
    let _one = serial();
    let nats = Nats::start();
    let (_dir, config, ws) = with_a_hidden_secret(&nats);
    let _w = worker(&config, "shell", &[("WHO", "the-worker")]);
    // Its words name no hidden path, so the rules let it run; it reads every file it finds.
    let mut replay = Replay::start(&config, &ws, &[sse(&[shell("echo on $WHO; grep -r . .")])]);
    let results = replay.round(1, 60);
    let out = results[0]["content"].as_str().unwrap();
    assert!(out.contains("on the-worker") && out.contains("plain notes"), "{results:?}");
    assert!(!out.contains("TOPSECRET"), "the hidden file was read on the worker: {out}");
}

#[test]
fn a_call_with_hidden_paths_is_not_sent_where_a_worker_too_old_to_hide_them_could_take_it() {
    let _one = serial();
    let nats = Nats::start();
    let (_dir, config, ws) = with_a_hidden_secret(&nats);
    // The dispatcher makes the buckets.
    let out = toolslot().args(["catalog", "--config"]).arg(&config).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Announced as a worker from before `hides` announces itself: it would ignore the paths.
    let announcement = json!({
        "worker": "shell.old", "pool": "shell", "slots": 2, "running": [], "version": "0.0.9",
        "tools": [{"name": "exec_shell", "description": "", "input_schema": {"type": "object"}, "capabilities": [],
                   "parallel": false, "defer": false, "loop_exempt": false, "source": "builtin"}]
    });
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = async_nats::connect(nats.url()).await.unwrap();
        let workers = async_nats::jetstream::new(client).get_key_value("toolslot_workers").await.unwrap();
        workers
            .put("shell.old", serde_json::to_vec(&announcement).unwrap().into())
            .await
            .unwrap();
    });
    let mut replay = Replay::start(&config, &ws, &[sse(&[shell("grep -r . .")])]);
    let results = replay.round(1, 60);
    let content = results[0]["content"].as_str().unwrap();
    assert_eq!(results[0]["is_error"], true, "{results:?}");
    assert!(
        content.contains("`shell.old`") && content.contains("too old to hide them"),
        "{content}"
    );
    assert!(!content.contains("TOPSECRET"), "{content}");
}
