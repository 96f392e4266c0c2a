//! Durable sessions against a real nats-server and the real binary: `toolslot serve` killed
//! (SIGKILL) mid-round and started again, a remembered approval that outlives the process,
//! and a second dispatcher that cannot act for a session another one holds.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::nats::*;
use support::{Client, Served, events, free_port, http, signal};

/// What most tests start from: the NATS server (these tests run one at a time), and a folder
/// with a workspace `ws`.
struct Setup {
    _one: std::sync::MutexGuard<'static, ()>,
    nats: Nats,
    dir: tempfile::TempDir,
    ws: PathBuf,
}

fn setup() -> Setup {
    let _one = serial();
    let nats = Nats::start();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    Setup { _one, nats, dir, ws }
}

impl Setup {
    /// `toolslot serve` on `addr`, its config and overflow in the folder `name`.
    fn serve(&self, addr: &str, name: &str) -> Served {
        Served::at(&serve_config(self.dir.path(), &self.nats, addr, name), addr)
    }
}

/// A serve config: no routes (tools run in-process), the session lease short for tests.
fn serve_config(dir: &Path, nats: &Nats, addr: &str, name: &str) -> PathBuf {
    let sub = dir.join(name);
    std::fs::create_dir_all(&sub).unwrap();
    // The audit ledger's default folder is the user's home, which a test must not write to.
    let extra = format!("[server]\nbind = \"{addr}\"\n[execution]\nworkers = 2\n[audit]\nledger_dir = \"\"");
    let config = write_config(&sub, nats, "{}", "auto", &extra);
    // Into `[remote]`, which the overflow section follows.
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("[overflow]", "session_lease_ttl_ms = 3000\n[overflow]");
    std::fs::write(&config, text).unwrap();
    config
}

fn free_addr() -> String {
    format!("127.0.0.1:{}", free_port())
}

/// Posts `body` as a round of session `id` at `addr`: the status and the answer stream.
fn post_round(addr: &str, id: &str, body: &[u8]) -> (u16, String) {
    http(addr, "POST", &format!("/v1/sessions/{id}/rounds"), body)
}

fn open(addr: &str, ws: &Path, mode: &str) -> String {
    Client::new(addr).session_as(ws, mode)
}

fn shell(command: &str) -> (&'static str, Value) {
    ("exec_shell", json!({ "command": command }))
}

/// `GET …/rounds/last`, retried while another dispatcher's lease runs (409), at most `secs`.
fn last_round(addr: &str, id: &str, secs: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let (status, text) = http(addr, "GET", &format!("/v1/sessions/{id}/rounds/last"), b"");
        if status == 200 {
            return serde_json::from_str(&text).unwrap();
        }
        assert_eq!(status, 409, "only a held lease delays it: {text}");
        assert!(Instant::now() < deadline, "the session was never taken over: {text}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn meta(result: &Value) -> Value {
    error_meta(result["content"].as_str().unwrap())
}

#[test]
fn serve_killed_mid_round_leaves_one_result_per_call_and_runs_nothing_twice() {
    let setup = setup();
    let ws = setup.ws.clone();
    let addr = free_addr();
    let mut first = setup.serve(&addr, "a");
    let id = open(&addr, &ws, "full-auto");
    // A file read before the kill may be edited after it (an edit needs a read first).
    std::fs::write(ws.join("notes.txt"), "old text\n").unwrap();
    let read = sse(&[("read_file", json!({"path": "notes.txt"}))]);
    let (status, text) = post_round(&addr, &id, read.as_bytes());
    assert_eq!(status, 200, "{text}");
    let marker = ws.join("marker");
    let later = ws.join("later");
    // 0 reads and finishes; 1 writes, then sleeps past the kill; 2 waits behind 1 (calls that
    // write run one at a time) and never starts.
    let round = sse(&[
        shell("echo first"),
        shell(&format!("echo run >> {}; sleep 30", marker.display())),
        shell(&format!("echo later >> {}", later.display())),
    ]);
    let posting = {
        let (addr, id) = (addr.clone(), id.clone());
        std::thread::spawn(move || post_round(&addr, &id, round.as_bytes()))
    };
    wait_until(30, "the writing call to start", || lines(&marker).len() == 1);
    first.proc.kill();
    let _ = posting.join();

    let _second = setup.serve(&addr, "a");
    // Any request naming the session takes it over once the lease is free: here its catalog.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, text) = http(&addr, "GET", &format!("/v1/sessions/{id}/tools"), b"");
        if status == 200 {
            assert!(text.contains("exec_shell"), "{text}");
            break;
        }
        assert_eq!(status, 409, "{text}");
        assert!(Instant::now() < deadline, "{text}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let last = last_round(&addr, &id, 30);
    assert_eq!(last["type"], "round_complete", "{last}");
    assert_eq!(last["settled"], true, "{last}");
    assert_eq!(last["round"], 2, "{last}");
    let results = last["results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "exactly one result per call: {last}");
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r["index"], i, "{last}");
        assert_eq!(r["tool_use_id"], format!("toolu_{i}"), "{last}");
    }
    assert_eq!(results[0]["is_error"], false, "{last}");
    assert!(results[0]["content"].as_str().unwrap().contains("first"), "the real result: {last}");
    assert_eq!(meta(&results[1])["error"], "outcome_unknown", "{last}");
    assert_eq!(meta(&results[1])["side_effect"], Value::Null, "it started: {last}");
    assert_eq!(meta(&results[2])["error"], "unavailable", "{last}");
    assert_eq!(meta(&results[2])["side_effect"], "not_started", "{last}");
    // The settled round is the record's: asked again, the same answer.
    assert_eq!(last_round(&addr, &id, 5), last);
    // Nothing ran twice, and the call that never started never ran.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(lines(&marker), vec!["run".to_string()]);
    assert!(!later.exists());

    // The session goes on under the new process, with what it read: its next round is round 3.
    let edit = sse(&[
        shell("echo again"),
        ("edit_file", json!({"path": "notes.txt", "search": "old", "replace": "new"})),
    ]);
    let (status, text) = post_round(&addr, &id, edit.as_bytes());
    assert_eq!(status, 200, "{text}");
    let done = events(&text).pop().unwrap();
    assert!(done["results"][0]["content"].as_str().unwrap().contains("again"), "{done}");
    assert_eq!(done["results"][1]["is_error"], false, "{done}");
    assert_eq!(std::fs::read_to_string(ws.join("notes.txt")).unwrap(), "new text\n");
    let last = last_round(&addr, &id, 5);
    assert_eq!(
        (last["round"].as_u64(), last["settled"].as_bool()),
        (Some(3), Some(false)),
        "{last}"
    );
}

#[test]
fn a_remembered_approval_survives_a_restart() {
    let setup = setup();
    let ws = setup.ws.clone();
    let addr = free_addr();
    let mut first = setup.serve(&addr, "a");
    let id = open(&addr, &ws, "ask");
    let marker = ws.join("marker");
    let command = format!("echo ok >> {}", marker.display());
    let round = sse(&[shell(&command)]);
    let posting = {
        let (addr, id, round) = (addr.clone(), id.clone(), round.clone());
        std::thread::spawn(move || post_round(&addr, &id, round.as_bytes()))
    };
    let answer = json!({"decision": "approve_for_session"}).to_string();
    wait_until(30, "the approval request", || {
        http(&addr, "POST", &format!("/v1/sessions/{id}/approvals/0"), answer.as_bytes()).0 == 204
    });
    let (status, text) = posting.join().unwrap();
    assert_eq!(status, 200, "{text}");
    assert_eq!(lines(&marker).len(), 1, "{text}");
    // Written with the decision; the round's end in the record, and a moment for the writes
    // sent with it.
    wait_until(10, "the round in the record", || last_round(&addr, &id, 5)["round"] == 1);
    std::thread::sleep(Duration::from_millis(300));
    first.proc.kill();

    let _second = setup.serve(&addr, "a");
    last_round(&addr, &id, 30);
    let (status, text) = http(&addr, "GET", &format!("/v1/sessions/{id}/approvals/remembered"), b"");
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("exec_shell"), "the remembered approval is listed: {text}");
    let (status, text) = post_round(&addr, &id, round.as_bytes());
    assert_eq!(status, 200, "{text}");
    let evs = events(&text);
    assert!(
        !evs.iter().any(|e| e["type"] == "approval_required"),
        "the restarted dispatcher remembers the approval: {evs:?}"
    );
    assert!(
        evs.iter()
            .any(|e| e["type"] == "approval_decided" && e["decision"] == "cached_approval"),
        "{evs:?}"
    );
    assert_eq!(lines(&marker).len(), 2, "{evs:?}");
    // The loop guard's counts came along too: this is the third identical call of the session.
    let (status, text) = post_round(&addr, &id, round.as_bytes());
    assert_eq!(status, 200, "{text}");
    let done = events(&text).pop().unwrap();
    assert_eq!(meta(&done["results"][0])["error"], "loop_blocked", "{done}");
    assert_eq!(lines(&marker).len(), 2, "{done}");
}

#[test]
fn a_dispatcher_without_the_lease_cannot_act_for_the_session() {
    let setup = setup();
    let ws = setup.ws.clone();
    let (addr_a, addr_b) = (free_addr(), free_addr());
    let a = setup.serve(&addr_a, "a");
    let _b = setup.serve(&addr_b, "b");
    let id = open(&addr_a, &ws, "full-auto");
    let marker = ws.join("marker");
    let write = sse(&[shell(&format!("echo by-b >> {}", marker.display()))]);
    let (status, text) = post_round(&addr_a, &id, sse(&[shell("echo a")]).as_bytes());
    assert_eq!(status, 200, "{text}");

    // While A holds the lease (renewed), B refuses the session, and runs nothing.
    for _ in 0..3 {
        let (status, text) = post_round(&addr_b, &id, write.as_bytes());
        assert_eq!(status, 409, "{text}");
        assert!(text.contains("held by dispatcher"), "{text}");
        let (status, _) = http(&addr_b, "GET", &format!("/v1/sessions/{id}/rounds/last"), b"");
        assert_eq!(status, 409);
        std::thread::sleep(Duration::from_millis(1000));
    }
    assert!(!marker.exists());

    // A stalls past its lease: B takes the session over; A, awake again, is a stale writer
    // and cannot run a call for it.
    signal(a.proc.pid(), libc::SIGSTOP);
    let taken = last_round(&addr_b, &id, 30);
    assert_eq!(taken["round"], 1, "{taken}");
    signal(a.proc.pid(), libc::SIGCONT);
    let stale_marker = ws.join("stale");
    let stale = sse(&[shell(&format!("echo by-a >> {}", stale_marker.display()))]);
    let (status, text) = post_round(&addr_a, &id, stale.as_bytes());
    if status == 200 {
        let done = events(&text).pop().unwrap();
        let m = error_meta(done["results"][0]["content"].as_str().unwrap());
        // Refused when its running mark could not be written, or cancelled before it started
        // when the lost lease was noticed first: either way, not run.
        assert_eq!(m["side_effect"], "not_started", "{done}");
    } else {
        assert_eq!(status, 409, "{text}");
    }
    assert!(!stale_marker.exists(), "a stale dispatcher ran a call");
    // And afterwards A refuses the session outright.
    let (status, text) = post_round(&addr_a, &id, stale.as_bytes());
    assert_eq!(status, 409, "{text}");
    // B holds it and runs it.
    let (status, text) = post_round(&addr_b, &id, write.as_bytes());
    assert_eq!(status, 200, "{text}");
    assert_eq!(lines(&marker), vec!["by-b".to_string()]);
    assert!(!stale_marker.exists());
    // Closed, it is gone from the store: no dispatcher can take it over again.
    let (status, text) = http(&addr_b, "DELETE", &format!("/v1/sessions/{id}"), b"");
    assert_eq!(status, 204, "{text}");
    for addr in [&addr_a, &addr_b] {
        let (status, text) = http(addr, "GET", &format!("/v1/sessions/{id}/rounds/last"), b"");
        assert_eq!(status, 404, "{text}");
    }
}

/// A serve config named `id` (`remote.dispatcher_id`), its lease long enough that a take-over
/// which waited it out could not pass for one at once.
fn named_config(setup: &Setup, addr: &str, dir: &str, id: &str) -> PathBuf {
    let config = serve_config(setup.dir.path(), &setup.nats, addr, dir);
    let text = std::fs::read_to_string(&config).unwrap().replace(
        "session_lease_ttl_ms = 3000",
        &format!("session_lease_ttl_ms = 60000\ndispatcher_id = \"{id}\""),
    );
    std::fs::write(&config, text).unwrap();
    config
}

#[test]
fn a_dispatcher_started_again_under_its_name_takes_its_sessions_back_at_once() {
    let setup = setup();
    let ws = setup.ws.clone();
    let (addr_a, addr_b) = (free_addr(), free_addr());
    let config_a = named_config(&setup, &addr_a, "a", "api-1");
    let mut a = Served::at(&config_a, &addr_a);
    let id = open(&addr_a, &ws, "full-auto");
    let (status, text) = post_round(&addr_a, &id, sse(&[shell("echo a")]).as_bytes());
    assert_eq!(status, 200, "{text}");
    a.proc.kill();

    // Another dispatcher waits for the lease (a minute): 409.
    let _b = Served::at(&named_config(&setup, &addr_b, "b", "api-2"), &addr_b);
    let (status, text) = http(&addr_b, "GET", &format!("/v1/sessions/{id}/rounds/last"), b"");
    assert_eq!(status, 409, "{text}");
    assert!(text.contains("api-1"), "the holder is named: {text}");

    // The same name, started again, takes the session back at its first request.
    let started = Instant::now();
    let _a2 = Served::at(&config_a, &addr_a);
    let (status, text) = http(&addr_a, "GET", &format!("/v1/sessions/{id}/rounds/last"), b"");
    assert_eq!(status, 200, "taken back at once: {text}");
    assert!(started.elapsed() < Duration::from_secs(30), "the lease was not waited out");
    let last: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(last["round"], 1, "{last}");
    let marker = ws.join("marker");
    let write = sse(&[shell(&format!("echo again >> {}", marker.display()))]);
    let (status, text) = post_round(&addr_a, &id, write.as_bytes());
    assert_eq!(status, 200, "{text}");
    assert_eq!(lines(&marker), vec!["again".to_string()]);
    // The other one still waits, and ran nothing.
    let (status, text) = post_round(&addr_b, &id, write.as_bytes());
    assert_eq!(status, 409, "{text}");
    assert_eq!(lines(&marker).len(), 1);
}

/// Puts `value` as session `id`'s lease, as a client on the bus without any key could.
fn forge_lease(nats: &Nats, id: &str, value: &str) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = async_nats::connect(nats.url()).await.unwrap();
        let kv = async_nats::jetstream::new(client).get_key_value("toolslot_leases").await.unwrap();
        kv.put(id, value.to_string().into()).await.unwrap();
    });
}

#[test]
fn with_signing_only_a_lease_sealed_with_the_dispatcher_key_is_taken_back_at_once() {
    let setup = setup();
    let ws = setup.ws.clone();
    let addr = free_addr();
    let config = named_config(&setup, &addr, "a", "api-1");
    let (dispatcher, worker) = (nkeys::KeyPair::new_user(), nkeys::KeyPair::new_user());
    let keys = signing_lines(setup.dir.path(), &dispatcher, &worker, &[&worker]);
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("[remote]\n", &format!("[remote]\n{keys}\n"));
    std::fs::write(&config, text).unwrap();
    let mut a = Served::at(&config, &addr);
    let id = open(&addr, &ws, "full-auto");
    let (status, text) = post_round(&addr, &id, sse(&[shell("echo a")]).as_bytes());
    assert_eq!(status, 200, "{text}");
    a.proc.kill();
    // Signed by its key: taken back at once.
    let mut a = Served::at(&config, &addr);
    let (status, text) = http(&addr, "GET", &format!("/v1/sessions/{id}/rounds/last"), b"");
    assert_eq!(status, 200, "taken back at once: {text}");
    a.proc.kill();
    // A lease naming it that nobody with its key wrote proves nothing: the lease is waited out.
    forge_lease(&setup.nats, &id, "api-1");
    let _a = Served::at(&config, &addr);
    let (status, text) = http(&addr, "GET", &format!("/v1/sessions/{id}/rounds/last"), b"");
    assert_eq!(status, 409, "{text}");
}

#[test]
fn a_sub_agent_session_is_durable_like_its_parent() {
    let setup = setup();
    let ws = setup.ws.clone();
    let addr = free_addr();
    let marker = ws.join("marker");
    // The child's one turn: a call that writes, then sleeps past the kill.
    let child = setup.dir.path().join("child.sse");
    std::fs::write(&child, sse(&[shell(&format!("echo child >> {}; sleep 30", marker.display()))])).unwrap();
    let child = child.display().to_string();
    let config = serve_config(setup.dir.path(), &setup.nats, &addr, "a");
    // Children one level deep only: a child's own tools lack spawn_agent.
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("[audit]", "[subagents]\nmax_depth = 1\n[audit]");
    std::fs::write(&config, text).unwrap();
    let mut first = Served::at_with(&config, &addr, &["--agent-response", &child]);
    let parent = open(&addr, &ws, "full-auto");
    let round = sse(&[("spawn_agent", json!({"task": "leave a note"}))]);
    let posting = {
        let (addr, parent) = (addr.clone(), parent.clone());
        std::thread::spawn(move || http(&addr, "POST", &format!("/v1/sessions/{parent}/rounds"), round.as_bytes()))
    };
    wait_until(30, "the child's call to start", || lines(&marker).len() == 1);
    let (status, text) = http(&addr, "GET", "/v1/sessions", b"");
    assert_eq!(status, 200, "{text}");
    let list: Value = serde_json::from_str(&text).unwrap();
    let children: Vec<String> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session_id"].as_str().unwrap().to_string())
        .filter(|id| *id != parent)
        .collect();
    assert_eq!(children.len(), 1, "the child beside its parent: {text}");
    let child_id = children[0].clone();
    first.proc.kill();
    let _ = posting.join();

    let _second = Served::at_with(&config, &addr, &["--agent-response", &child]);
    // The child's round, settled by the dispatcher that took it over: its running call has
    // its one result, and is not run again.
    let last = last_round(&addr, &child_id, 30);
    assert_eq!(last["type"], "round_complete", "{last}");
    assert_eq!(last["settled"], true, "{last}");
    let results = last["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{last}");
    assert_eq!(meta(&results[0])["error"], "outcome_unknown", "{last}");
    // The parent's spawn_agent call, running at the kill, likewise.
    let last = last_round(&addr, &parent, 30);
    assert_eq!(meta(&last["results"][0])["error"], "outcome_unknown", "{last}");
    // Each taken over with the tools of its depth.
    let tools = |id: &str| {
        let (status, text) = http(&addr, "GET", &format!("/v1/sessions/{id}/tools"), b"");
        assert_eq!(status, 200, "{text}");
        text
    };
    assert!(tools(&parent).contains("spawn_agent"));
    let child_tools = tools(&child_id);
    assert!(
        child_tools.contains("exec_shell") && !child_tools.contains("spawn_agent"),
        "{child_tools}"
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(lines(&marker).len(), 1, "nothing ran twice");
}

#[test]
fn a_session_is_never_taken_over_into_a_workspace_outside_the_new_root() {
    // A opens the session under its workspace root and dies; B, whose root does not hold that
    // workspace, refuses to take the session over (and runs nothing in it); C, whose root
    // does, takes it over as soon as the lease is free.
    let setup = setup();
    let (root_a, root_b) = (setup.dir.path().join("root-a"), setup.dir.path().join("root-b"));
    let ws = root_a.join("project");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&root_b).unwrap();
    let with_root = |name: &str, addr: &str, root: &Path| {
        let config = serve_config(setup.dir.path(), &setup.nats, addr, name);
        let text = std::fs::read_to_string(&config)
            .unwrap()
            .replace("[server]\n", &format!("[server]\nworkspace_root = \"{}\"\n", root.display()));
        std::fs::write(&config, text).unwrap();
        Served::at(&config, addr)
    };
    let addr_a = free_addr();
    let mut a = with_root("a", &addr_a, &root_a);
    let id = open(&addr_a, &ws, "full-auto");
    let (status, text) = post_round(&addr_a, &id, sse(&[shell("echo a")]).as_bytes());
    assert_eq!(status, 200, "{text}");
    a.proc.kill();

    let marker = ws.join("marker");
    let write = sse(&[shell(&format!("echo by-b >> {}", marker.display()))]);
    let addr_b = free_addr();
    let b = with_root("b", &addr_b, &root_b);
    // Refused whether or not A's lease has run out: B may never run this session.
    let (status, text) = post_round(&addr_b, &id, write.as_bytes());
    assert_eq!(status, 403, "{text}");
    assert!(
        text.contains("not taken over") && text.contains("outside server.workspace_root"),
        "{text}"
    );
    std::thread::sleep(Duration::from_millis(3500));
    let (status, text) = http(&addr_b, "GET", &format!("/v1/sessions/{id}/rounds/last"), b"");
    assert_eq!(status, 403, "{text}");
    assert!(!marker.exists(), "a refused take-over ran a call");
    drop(b);

    // B never took the lease: C, under A's root, takes the session over and runs it.
    let addr_c = free_addr();
    let _c = with_root("c", &addr_c, &root_a);
    let (status, text) = post_round(&addr_c, &id, write.as_bytes());
    assert_eq!(status, 200, "{text}");
    assert_eq!(lines(&marker), vec!["by-b".to_string()]);
}

#[test]
fn without_nats_the_last_round_is_kept_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!("[server]\nbind = \"{addr}\"\n[shell]\nsandbox = \"auto\"\n[audit]\nledger_dir = \"\"\n"),
    )
    .unwrap();
    let _serve = Served::at(&config, &addr);
    let id = open(&addr, dir.path(), "full-auto");
    let (status, text) = http(&addr, "GET", &format!("/v1/sessions/{id}/rounds/last"), b"");
    assert_eq!(status, 404, "no round yet: {text}");
    let (status, text) = http(&addr, "GET", "/v1/sessions/0123abcd/rounds/last", b"");
    assert_eq!(status, 404, "{text}");
    let round = sse(&[shell("echo one"), shell("echo two")]);
    let (status, text) = post_round(&addr, &id, round.as_bytes());
    assert_eq!(status, 200, "{text}");
    let mut done = events(&text).pop().unwrap();
    let last = last_round(&addr, &id, 5);
    assert_eq!(
        (last["round"].as_u64(), last["settled"].as_bool()),
        (Some(1), Some(false)),
        "{last}"
    );
    done["round"] = 1.into();
    done["settled"] = false.into();
    assert_eq!(last, done, "the round_complete the host saw");
}

#[test]
fn a_saved_output_reads_back_on_the_dispatcher_that_took_the_session_over() {
    let setup = setup();
    let ws = setup.ws.clone();
    let addr = free_addr();
    let mut first = setup.serve(&addr, "a");
    let id = open(&addr, &ws, "full-auto");
    let (status, text) = post_round(&addr, &id, sse(&[shell("seq 1 200000")]).as_bytes());
    assert_eq!(status, 200, "{text}");
    let done = events(&text).pop().unwrap();
    let content = done["results"][0]["content"].as_str().unwrap().to_string();
    let saved = content
        .split("ref=")
        .nth(1)
        .and_then(|r| r.split(|c: char| !(c.is_ascii_digit() || c == '-')).next())
        .unwrap_or_else(|| panic!("the output was cut and saved: {content}"))
        .to_string();
    assert!(!content.contains("\n100000\n"), "cut: {content}");
    // The record has filed the round once the first dispatcher reports it from the record.
    wait_until(10, "the round in the record", || last_round(&addr, &id, 5)["round"] == 1);
    first.proc.kill();

    // The second dispatcher has its own overflow folder (another machine's disk): the saved
    // output is not there until it takes the session over.
    let _second = setup.serve(&addr, "b");
    let local = |who: &str| {
        walk(&setup.dir.path().join(who).join("overflow"))
            .iter()
            .any(|p| p.to_string_lossy().contains(&saved))
    };
    assert!(local("a") && !local("b"));
    last_round(&addr, &id, 30);
    let read = sse(&[
        (
            "retrieve_tool_result",
            json!({"ref": saved, "mode": "lines", "offset": 99_999, "limit": 2}),
        ),
        ("retrieve_tool_result", json!({"ref": "1-2-3", "mode": "tail"})),
    ]);
    let (status, text) = post_round(&addr, &id, read.as_bytes());
    assert_eq!(status, 200, "{text}");
    let done = events(&text).pop().unwrap();
    let r = &done["results"][0];
    assert_eq!(r["is_error"], false, "{done}");
    assert!(
        r["content"].as_str().unwrap().starts_with("100000\t100000\n100001\t100001\n"),
        "{done}"
    );
    // A ref nobody handed out is still refused.
    assert_eq!(done["results"][1]["is_error"], true, "{done}");
    assert!(local("b"));
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
