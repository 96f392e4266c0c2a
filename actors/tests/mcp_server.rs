//! `toolslot mcp` as an MCP client sees it: the official MCP Python SDK
//! (tests/data/mcp_server_client.py) starts the binary over stdio, as a desktop client's
//! configuration would, and reports what it saw; each test judges one behaviour, on the newest
//! revision (`auto`: 2026-07-28, approvals as `input_required` results) and, where the
//! revisions differ, on the `initialize` handshake too (`legacy`: approvals as
//! `elicitation/create` requests).

mod support;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::*;

/// A test's folder: the workspace (with `notes.txt`), saved outputs, ledgers.
struct Bed {
    dir: tempfile::TempDir,
    ws: PathBuf,
}

fn bed() -> Bed {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "some notes\n").unwrap();
    Bed { dir, ws }
}

/// The deny rules of the listing and ledger tests: one names a tool alone, one some commands.
const DENY_RULES: &str = "[[policy.rules]]\ntool = \"write_file\"\ndecision = \"deny\"\n\n\
[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"deny\"\ncommand = [\"rm\", \"*\"]\n";

/// An approval that expires quickly.
const SHORT_TIMEOUT: &str = "[approval]\ntimeout_ms = 1500\n";

impl Bed {
    /// Runs `scenario` of the client script in `mode` with `config` (when not empty) and the
    /// variables `env`, and returns what it printed. The ledger is off unless `env` sets it.
    fn run(&self, scenario: &str, mode: &str, config: &str, env: &[(&str, &Path)]) -> Value {
        let mut cmd = mcp_client(env!("CARGO_BIN_EXE_toolslot"), &self.ws, scenario, mode);
        if !config.is_empty() {
            let file = self.dir.path().join(format!("{scenario}-{mode}.toml"));
            std::fs::write(&file, config).unwrap();
            cmd.arg(file);
        }
        cmd.env("TOOLSLOT_AUDIT__LEDGER_DIR", "")
            .env("TOOLSLOT_OVERFLOW__DIR", self.dir.path().join("overflow"));
        for (key, value) in env {
            cmd.env(key, value);
        }
        printed_json(&format!("{scenario} ({mode})"), &cmd.output().unwrap())
    }
}

impl Bed {
    /// `toolslot mcp` on this workspace with `env`, its stdin and stdout piped for a test that
    /// writes the protocol's lines itself; the ledger off.
    fn raw_client(&self, env: &[(&str, &str)]) -> std::process::Child {
        std::process::Command::new(env!("CARGO_BIN_EXE_toolslot"))
            .args(["mcp", "--workspace"])
            .arg(&self.ws)
            .env("TOOLSLOT_AUDIT__LEDGER_DIR", "")
            .env("TOOLSLOT_OVERFLOW__DIR", self.dir.path().join("overflow"))
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    }
}

fn text(v: &Value) -> &str {
    v["text"].as_str().unwrap_or_default()
}

#[test]
fn the_newest_revision_is_negotiated_and_the_catalog_listed_without_denied_tools() {
    let b = bed();
    let v = b.run("list", "auto", DENY_RULES, &[]);
    assert_eq!(v["protocol"], "2026-07-28", "{v}");
    let tools = v["tools"].as_object().unwrap();
    assert!(
        !tools.contains_key("write_file"),
        "a tool a rule denies outright is not listed: {v}"
    );
    assert!(
        tools.contains_key("exec_shell"),
        "a rule that denies some commands leaves the tool: {v}"
    );
    assert!(tools.contains_key("tool_search"), "{v}");
    // Hints from the capabilities toolslot judges the tools by.
    assert_eq!(
        tools["read_file"],
        json!({"readOnlyHint": true, "destructiveHint": false, "openWorldHint": false, "outputSchema": false})
    );
    assert_eq!(tools["exec_shell"]["readOnlyHint"], false);
    assert_eq!(tools["exec_shell"]["destructiveHint"], true);
    assert_eq!(tools["fetch_url"]["openWorldHint"], true);
    let instructions = v["instructions"].as_str().unwrap();
    assert!(instructions.contains("elicitation"), "{instructions}");
}

#[test]
fn a_handshake_client_gets_the_newest_revision_with_initialize() {
    let v = bed().run("list", "legacy", DENY_RULES, &[]);
    assert_eq!(v["protocol"], "2025-11-25", "{v}");
    assert!(!v["tools"].as_object().unwrap().contains_key("write_file"), "{v}");
}

#[test]
fn a_read_only_call_runs_unasked() {
    let v = bed().run("read", "auto", "", &[]);
    assert_eq!(v["is_error"], false, "{v}");
    assert!(text(&v).contains("some notes"), "{v}");
}

fn approved_runs(mode: &str) {
    let b = bed();
    let v = b.run("approve", mode, "", &[]);
    assert_eq!(v["is_error"], false, "{v}");
    assert_eq!(v["marker"], true, "{v}");
    let asked = v["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{v}");
    // The form names the tool, shows the exact input and says why it asks.
    let message = asked[0]["message"].as_str().unwrap();
    assert!(message.contains("`exec_shell`"), "{message}");
    assert!(message.contains("\"command\": \"touch marker\""), "{message}");
    assert!(message.contains("Why it asks:"), "{message}");
    let offered: Vec<&str> = asked[0]["schema"]["properties"]["decision"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["const"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["approve", "approve_for_session", "reject"]);
}

#[test]
fn an_approval_answered_through_elicitation_runs_the_call() {
    approved_runs("auto");
}

#[test]
fn an_approval_answered_through_an_elicitation_request_runs_the_call() {
    approved_runs("legacy");
}

fn rejected_runs_nothing(mode: &str) {
    let v = bed().run("reject", mode, "", &[]);
    assert_eq!(v["is_error"], true, "{v}");
    assert_eq!(v["marker"], false, "{v}");
    assert!(text(&v).contains("\"not_approved\""), "{v}");
}

#[test]
fn a_rejection_runs_nothing() {
    rejected_runs_nothing("auto");
}

#[test]
fn a_rejection_through_an_elicitation_request_runs_nothing() {
    rejected_runs_nothing("legacy");
}

fn unanswered_expires(mode: &str) {
    let v = bed().run("timeout", mode, SHORT_TIMEOUT, &[]);
    assert_eq!(v["is_error"], true, "{v}");
    assert_eq!(v["marker"], false, "an answer after the deadline runs nothing: {v}");
    assert!(
        text(&v).contains("Not approved: nobody decided on `exec_shell` within 1500 ms"),
        "{v}"
    );
    assert!(text(&v).contains("\"not_approved\""), "{v}");
    // The form carries the deadline of the session's pending approval: what is left of the
    // 1,500 ms when the form is written, in whole seconds (1 s on a machine slow to write it).
    let message = v["asked"][0]["message"].as_str().unwrap_or_default();
    assert!(
        ["1", "2"]
            .iter()
            .any(|n| message.contains(&format!("Without an answer within {n} s it is refused"))),
        "{message}"
    );
}

#[test]
fn an_approval_nobody_answers_in_time_expires_and_runs_nothing() {
    unanswered_expires("auto");
}

#[test]
fn an_elicitation_request_nobody_answers_in_time_expires_and_runs_nothing() {
    unanswered_expires("legacy");
}

#[test]
fn approval_for_the_session_is_asked_once() {
    let v = bed().run("session", "auto", "", &[]);
    assert_eq!(v["asked"], 1, "{v}");
    assert_eq!(v["errors"], json!([false, false]), "{v}");
    assert_eq!(v["marker"], true, "{v}");
}

#[test]
fn a_client_that_cannot_elicit_is_told_and_its_calls_are_refused() {
    let v = bed().run("unasked", "legacy", SHORT_TIMEOUT, &[]);
    let instructions = v["instructions"].as_str().unwrap();
    assert!(instructions.contains("cannot show a form"), "{instructions}");
    assert!(
        instructions.contains("refused after approval.timeout_ms (1500 ms)"),
        "{instructions}"
    );
    assert_eq!(v["is_error"], true, "{v}");
    assert_eq!(v["marker"], false, "{v}");
    assert!(text(&v).contains("toolslot could not ask a person about this call"), "{v}");
}

fn cancelled_kills(mode: &str) {
    let v = bed().run("cancel", mode, "", &[]);
    assert_eq!(v["started"], true, "{v}");
    assert_eq!(v["cancelled"], true, "{v}");
    assert_eq!(v["alive_after"], json!([]), "the command's processes are gone: {v}");
    assert_eq!(v["marker"], false, "{v}");
    assert_eq!(v["next_call_ok"], true, "the session takes the next call: {v}");
}

#[test]
fn cancelling_a_call_kills_its_command() {
    cancelled_kills("auto");
}

#[test]
fn cancelling_a_call_on_a_handshake_connection_kills_its_command() {
    cancelled_kills("legacy");
}

fn time_server() -> String {
    format!(
        "[mcp]\ntool_cache_dir = \"\"\nstartup_timeout_ms = 60000\n[[mcp.servers]]\nname = \"time\"\ncommand = [\"{}\", \"--local-timezone=UTC\"]\n",
        deps().join("venv/bin/mcp-server-time").display()
    )
}

fn deferred_tools_appear(mode: &str) {
    let v = bed().run("deferred", mode, &time_server(), &[]);
    let before = v["before"].as_object().unwrap();
    assert!(!before.contains_key("time__get_current_time"), "deferred until activated: {v}");
    assert!(v["search"].as_str().unwrap().contains("time__get_current_time"), "{v}");
    assert_eq!(v["changed"], true, "the activation is announced: {v}");
    let after = &v["after"]["time__get_current_time"];
    // Its server's word is not believed (trust_annotations is off): it may do anything.
    assert_eq!(after["readOnlyHint"], false, "{v}");
    assert_eq!(after["openWorldHint"], true, "{v}");
    assert_eq!(after["outputSchema"], true, "the server's outputSchema passes through: {v}");
    // Called (approved through the form), its structured value comes through whole, and its
    // text is enveloped as external content.
    assert_eq!(v["call"]["is_error"], false, "{v}");
    assert_eq!(v["call"]["structured"]["timezone"], "UTC", "{v}");
    assert!(v["call"]["text"].as_str().unwrap().contains("<external_content"), "{v}");
}

#[test]
fn activated_deferred_tools_are_announced_and_listed() {
    deferred_tools_appear("auto");
}

#[test]
fn activated_deferred_tools_are_announced_to_a_handshake_client() {
    deferred_tools_appear("legacy");
}

/// The decision fields of a ledger's call records (everything but ids, times and MACs).
fn decisions(ledger: &Path) -> Vec<Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(ledger)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    assert_eq!(files.len(), 1, "one session, one ledger: {files:?}");
    let text = std::fs::read_to_string(files.remove(0)).unwrap();
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] != "close")
        .map(|r| {
            json!({
                "kind": r["kind"], "tool": r["tool"], "index": r["index"], "input_sha256": r["input_sha256"],
                "decision": r["decision"], "source": r["source"], "rule": r["rule"],
                "outcome": r["outcome"], "detail": r["detail"],
            })
        })
        .collect()
}

#[test]
fn a_call_over_mcp_is_decided_as_the_same_call_in_a_provider_stream() {
    let b = bed();
    let key = b.dir.path().join("key/ledger.key");
    let over_mcp = b.dir.path().join("ledger-mcp");
    let v = b.run(
        "ledger",
        "auto",
        DENY_RULES,
        &[("TOOLSLOT_AUDIT__LEDGER_DIR", &over_mcp), ("TOOLSLOT_AUDIT__KEY_FILE", &key)],
    );
    assert_eq!(v["errors"], json!([false, false, true]), "{v}");

    // The same calls, one round each, in a provider's stream, every question approved.
    let replayed = tempfile::tempdir().unwrap();
    let ws = replayed.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "some notes\n").unwrap();
    // The very file the server was given, so that the rules have the same place.
    let config = b.dir.path().join("ledger-auto.toml");
    let in_stream = replayed.path().join("ledger-replay");
    let rounds = [
        openai_stream(&[("read_file", json!({"path": "notes.txt"}))]),
        openai_stream(&[("exec_shell", json!({"command": "touch marker"}))]),
        openai_stream(&[("exec_shell", json!({"command": "rm -f notes.txt"}))]),
    ];
    let mut cmd = toolslot();
    cmd.env("TOOLSLOT_AUDIT__LEDGER_DIR", &in_stream)
        .env("TOOLSLOT_AUDIT__KEY_FILE", &key)
        .env("TOOLSLOT_OVERFLOW__DIR", replayed.path().join("overflow"));
    let out = replay_with(cmd, replayed.path(), &ws, &config, "all", &rounds);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    let mcp = decisions(&over_mcp);
    assert_eq!(
        mcp.len(),
        5,
        "read (decision, outcome), approved command (both), denied command (decision): {mcp:#?}"
    );
    assert_eq!(mcp, decisions(&in_stream));
    assert_eq!(mcp[2]["source"], "host", "{mcp:#?}");
    assert_eq!(mcp[4]["decision"], "deny", "{mcp:#?}");
}

#[test]
fn a_request_whose_params_do_not_fit_its_method_is_told_which_field() {
    use std::io::{BufRead, BufReader, Write};
    let bed = bed();
    let mut child = bed.raw_client(&[]);
    let mut stdin = child.stdin.take().unwrap();
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "exec_shell", "arguments": ["touch ran"]}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"arguments": {"path": "notes.txt"}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": ["read_file"]}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/cal", "params": {"name": "read_file"}}),
        json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": "notes.txt"}}}),
    ];
    for line in &lines {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    let mut answers = std::collections::HashMap::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let id = v["id"].as_i64().unwrap();
        answers.insert(id, v);
        if answers.len() == 6 {
            break;
        }
    }
    drop(stdin);
    let _ = child.wait();
    for (id, code, says) in [
        (
            2,
            -32602,
            "`arguments` in `tools/call` params must be an object of the tool's arguments by name (got an array)",
        ),
        (3, -32602, "`tools/call` params have no `name` (the tool to call)"),
        (4, -32602, "`name` in `tools/call` params must be a string (got an array)"),
        (5, -32601, "method not found: `tools/cal`"),
    ] {
        let answer = &answers[&id];
        assert_eq!(answer["error"]["code"], code, "{answer}");
        assert!(answer["error"]["message"].as_str().unwrap().starts_with(says), "{answer}");
    }
    // The session goes on: a well-formed call after them runs.
    assert_eq!(answers[&6]["result"]["isError"], false, "{}", answers[&6]);
    assert!(!bed.ws.join("ran").exists(), "a malformed call ran");
}

#[test]
fn a_request_that_cannot_be_read_is_answered_under_its_id() {
    // rmcp's transport dropped a message over its limit without a word, and answered one it
    // could not read without its id: the client waited for ever either way.
    use std::io::{BufRead, BufReader, Write};
    let bed = bed();
    let mut child = bed.raw_client(&[
        ("TOOLSLOT_MCP__MAX_MESSAGE_BYTES", "4096"),
        ("TOOLSLOT_APPROVAL__MODE", "full-auto"),
    ]);
    let mut stdin = child.stdin.take().unwrap();
    let big = "x".repeat(8000);
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}).to_string(),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        "this line is not JSON".to_string(),
        json!({"id": 7, "method": "tools/list"}).to_string(),
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": [1]}).to_string(),
        json!({"jsonrpc": "2.0", "id": 10, "method": 5}).to_string(),
        json!({"jsonrpc": "2.0", "id": "big", "method": "tools/call", "params": {"name": "write_file", "arguments": {"path": "big.txt", "content": big}}}).to_string(),
        // A batch (older revisions had them): its request is told so, and does not run.
        json!([{"jsonrpc": "2.0", "id": "batched", "method": "tools/call", "params": {"name": "write_file", "arguments": {"path": "batched.txt", "content": "x"}}}]).to_string(),
        json!({"jsonrpc": "2.0", "id": 12, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": "notes.txt"}}}).to_string(),
    ];
    for line in &lines {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    // Read on a thread, so a request left unanswered fails the test instead of hanging it.
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut answers = std::collections::HashMap::new();
    while answers.len() < 7 {
        let Ok(line) = rx.recv_timeout(std::time::Duration::from_secs(30)) else {
            let _ = child.kill();
            panic!("requests left unanswered; answered: {answers:?}");
        };
        let v: Value = serde_json::from_str(&line).unwrap();
        answers.insert(v["id"].to_string(), v);
    }
    drop(stdin);
    let _ = child.wait();
    for (id, code, says) in [
        ("7", -32600, "invalid request: not a JSON-RPC 2.0 message"),
        ("9", -32602, "`tools/call` needs params: an object"),
        ("10", -32600, "invalid request: `method` must be a string"),
        (
            "\"big\"",
            -32600,
            "invalid request: the message is over mcp.max_message_bytes (4096 bytes)",
        ),
        ("\"batched\"", -32600, "invalid request: a batch (a JSON array) is not accepted"),
    ] {
        let answer = answers.get(id).unwrap_or_else(|| panic!("no answer for {id}: {answers:?}"));
        assert_eq!(answer["error"]["code"], code, "{answer}");
        assert!(answer["error"]["message"].as_str().unwrap().starts_with(says), "{answer}");
    }
    // The session goes on, and what was not read did not run.
    assert_eq!(answers["12"]["result"]["isError"], false, "{}", answers["12"]);
    assert!(!bed.ws.join("big.txt").exists(), "an unread call ran");
    assert!(!bed.ws.join("batched.txt").exists(), "a batched call ran");
}

#[test]
fn a_client_that_goes_away_has_its_running_command_stopped() {
    use std::io::{BufRead, BufReader, Write};
    let bed = bed();
    let mut child = bed.raw_client(&[("TOOLSLOT_APPROVAL__MODE", "full-auto")]);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    writeln!(stdin, "{init}").unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("\"id\":1"), "{line}");
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "exec_shell", "arguments": {"command": "touch started; sleep 3; touch ran"}}});
    writeln!(stdin, "{call}").unwrap();
    stdin.flush().unwrap();
    let started = bed.ws.join("started");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !started.exists() {
        assert!(std::time::Instant::now() < deadline, "the command did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The client quits: both its pipes close.
    drop(stdin);
    drop(stdout);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    // Past the time the command would have taken: it was stopped, not left to finish.
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert!(!bed.ws.join("ran").exists(), "the command went on after its client had gone");
}
