//! `/mcp` of `toolslot serve` as an MCP client sees it: the official MCP Python SDK
//! (tests/data/mcp_server_client.py) over Streamable HTTP, on the newest revision (`auto`:
//! 2026-07-28, no connections) and on the handshake (`legacy`: a session per connection,
//! `Mcp-Session-Id`, ended by `DELETE`), under the server's token.

mod support;

use std::process::Command;

use serde_json::Value;
use support::*;

/// A server whose workspace root is its own folder, with `notes.txt` in the workspace.
fn served(config: &str) -> Served {
    let serve = Serve::new();
    std::fs::write(serve.workspace().join("notes.txt"), "some notes\n").unwrap();
    let root = serve.dir().to_path_buf();
    serve
        .config(config)
        .server(&format!("workspace_root = \"{}\"", root.display()))
        .env("TOOLSLOT_AUDIT__LEDGER_DIR", "")
        .start()
}

/// The client script against `served` for `scenario` in `mode`, presenting the server's token.
fn client(served: &Served, scenario: &str, mode: &str) -> Command {
    let mut cmd = mcp_client(&format!("http://{}", served.addr), &served.workspace, scenario, mode);
    cmd.env("MCP_TOKEN", TOKEN).env_remove("MCP_SESSION");
    cmd
}

/// Runs `scenario` of the client script against `served` in `mode`, and returns what it printed.
fn run(served: &Served, scenario: &str, mode: &str) -> Value {
    printed_json(&format!("{scenario} ({mode})"), &client(served, scenario, mode).output().unwrap())
}

fn text(v: &Value) -> &str {
    v["text"].as_str().unwrap_or_default()
}

/// The sessions the server has open.
fn sessions(served: &Served) -> Vec<Value> {
    let (status, body) = served.http("GET", "/v1/sessions", b"");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str::<Value>(&body).unwrap()["sessions"]
        .as_array()
        .unwrap()
        .clone()
}

/// The sessions the server has open once none is left, or after `tries` looks 100 ms apart.
fn sessions_within(served: &Served, tries: usize) -> Vec<Value> {
    let mut open = sessions(served);
    for _ in 0..tries {
        if open.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        open = sessions(served);
    }
    open
}

const DENY_WRITE: &str = "[[policy.rules]]\ntool = \"write_file\"\ndecision = \"deny\"\n";

fn lists_without_denied_tools(mode: &str, protocol: &str) {
    let s = served(DENY_WRITE);
    let v = run(&s, "list", mode);
    assert_eq!(v["protocol"], protocol, "{v}");
    let tools = v["tools"].as_object().unwrap();
    assert!(tools.contains_key("read_file"), "{v}");
    assert!(tools.contains_key("exec_shell"), "{v}");
    assert!(
        !tools.contains_key("write_file"),
        "a tool a rule denies outright is not listed: {v}"
    );
    assert_eq!(tools["read_file"]["readOnlyHint"], true, "{v}");
}

#[test]
fn the_newest_revision_lists_the_catalog_over_http() {
    lists_without_denied_tools("auto", "2026-07-28");
}

#[test]
fn a_handshake_client_lists_the_catalog_over_http() {
    lists_without_denied_tools("legacy", "2025-11-25");
}

#[test]
fn a_read_only_call_runs_over_http() {
    let s = served("");
    for mode in ["auto", "legacy"] {
        let v = run(&s, "read", mode);
        assert_eq!(v["is_error"], false, "{mode}: {v}");
        assert!(text(&v).contains("some notes"), "{mode}: {v}");
    }
}

#[test]
fn without_the_token_nothing_is_served() {
    let s = served("");
    let out = client(&s, "read", "legacy").env("MCP_TOKEN", "wrong-token").output().unwrap();
    assert!(!out.status.success(), "a wrong token is refused");
    assert!(sessions(&s).is_empty(), "no session was opened");
    // And a page of another origin cannot post to it.
    let (status, body) = s.request(
        "POST",
        "/mcp",
        &[
            ("Host", s.addr.as_str()),
            ("Authorization", &format!("Bearer {TOKEN}")),
            ("Origin", "https://evil.example"),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ],
        br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#,
    );
    assert_eq!(status, 403, "{body}");
}

fn approval_over_http(mode: &str, decision: &str, ran: bool) {
    let s = served("");
    let marker = s.workspace.join("marker");
    let v = run(&s, decision, mode);
    assert_eq!(v["asked"].as_array().map(Vec::len), Some(1), "{mode}: {v}");
    assert_eq!(v["is_error"], !ran, "{mode}: {v}");
    assert_eq!(v["marker"], ran, "{mode}: {v}");
    assert_eq!(marker.exists(), ran, "{mode}");
}

#[test]
fn an_approval_answered_over_http_runs_the_call() {
    approval_over_http("auto", "approve", true);
    approval_over_http("legacy", "approve", true);
}

#[test]
fn a_rejection_over_http_runs_nothing() {
    approval_over_http("auto", "reject", false);
    approval_over_http("legacy", "reject", false);
}

#[test]
fn an_approval_nobody_answers_over_http_expires() {
    let s = served("[approval]\ntimeout_ms = 1500\n");
    for mode in ["auto", "legacy"] {
        let v = run(&s, "timeout", mode);
        assert_eq!(v["is_error"], true, "{mode}: {v}");
        assert_eq!(v["marker"], false, "{mode}: an answer after the deadline runs nothing: {v}");
        assert!(text(&v).contains("Not approved"), "{mode}: {v}");
    }
    assert!(!s.workspace.join("marker").exists());
}

#[test]
fn a_handshake_session_ends_with_its_connection() {
    let s = served("");
    let v = run(&s, "read", "legacy");
    assert_eq!(v["is_error"], false, "{v}");
    // The client's DELETE ended the MCP session, and toolslot's with it.
    assert_eq!(sessions_within(&s, 50), Vec::<Value>::new(), "the session was closed");
}

#[test]
fn calls_of_the_newest_revision_share_one_session_per_workspace_and_token() {
    let s = served("");
    run(&s, "read", "auto");
    run(&s, "read", "auto");
    let open = sessions(&s);
    assert_eq!(open.len(), 1, "{open:?}");
    // A client that names a session of its own gets one.
    let out = client(&s, "read", "auto").env("MCP_SESSION", "agent-2").output().unwrap();
    assert!(out.status.success());
    assert_eq!(sessions(&s).len(), 2);
    // A session closed by someone else is not handed to its client again: the next call gets
    // a new one, and runs.
    let id = open[0]["session_id"].as_str().unwrap().to_string();
    let (status, body) = s.http("DELETE", &format!("/v1/sessions/{id}"), b"");
    assert!(status == 200 || status == 204, "{status} {body}");
    let v = run(&s, "read", "auto");
    assert!(v.to_string().contains("some notes"), "{v}");
    let now: Vec<String> = sessions(&s).iter().map(|x| x["session_id"].as_str().unwrap().to_string()).collect();
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(!now.contains(&id), "the closed session came back: {now:?}");
}

#[test]
fn a_workspace_missing_or_outside_the_root_is_a_clear_error() {
    let s = served("");
    for mode in ["auto", "legacy"] {
        let v = run(&s, "noworkspace", mode);
        assert!(
            v["outside"].as_str().unwrap().contains("outside server.workspace_root"),
            "{mode}: {v}"
        );
    }
    // Without a root, an endpoint that names no workspace is refused, saying how to name one.
    let bare = Serve::new().env("TOOLSLOT_AUDIT__LEDGER_DIR", "").start();
    for mode in ["auto", "legacy"] {
        let v = run(&bare, "noworkspace", mode);
        assert!(v["none"].as_str().unwrap().contains("/mcp?workspace="), "{mode}: {v}");
    }
}

#[test]
fn many_clients_at_once_each_get_their_answer() {
    let s = served("");
    for i in 0..4 {
        std::fs::write(s.workspace.join(format!("notes{i}.txt")), "some notes\n").unwrap();
    }
    for mode in ["auto", "legacy"] {
        let v = run(&s, "two", mode);
        let results = v["results"].as_array().unwrap();
        assert_eq!(results.len(), 4, "{mode}: {v}");
        for r in results {
            assert_eq!(r["is_error"], false, "{mode}: {v}");
            assert!(r["text"].as_str().unwrap().contains("some notes"), "{mode}: {v}");
        }
    }
}

#[test]
fn cancelling_a_call_over_http_kills_its_command() {
    let s = served("");
    for mode in ["legacy", "auto"] {
        let v = run(&s, "cancel", mode);
        assert_eq!(v["started"], true, "{mode}: {v}");
        assert_eq!(v["cancelled"], true, "{mode}: {v}");
        assert_eq!(
            v["alive_after"],
            serde_json::json!([]),
            "{mode}: the command's processes are gone: {v}"
        );
        assert_eq!(v["marker"], false, "{mode}: {v}");
        assert_eq!(v["next_call_ok"], true, "{mode}: the session takes the next call: {v}");
    }
}

/// server-everything, from npm, in front of which toolslot stands.
fn everything() -> String {
    format!(
        "[mcp]\ntool_cache_dir = \"\"\nstartup_timeout_ms = 60000\n[[mcp.servers]]\nname = \"everything\"\ncommand = [\"node\", \"{}\", \"stdio\"]\ndefer = false\n",
        deps()
            .join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
            .display()
    )
}

#[test]
fn an_upstream_tool_is_listed_governed_and_reports_progress() {
    let s = served(&everything());
    for mode in ["auto", "legacy"] {
        let v = run(&s, "progress", mode);
        assert_eq!(v["listed"], true, "{mode}: {v}");
        assert_eq!(v["is_error"], false, "{mode}: {v}");
        let progress = v["progress"].as_array().unwrap();
        assert!(progress.len() >= 2, "{mode}: progress reaches the client: {v}");
        assert!(text(&v).contains("<external_content"), "{mode}: upstream text is enveloped: {v}");
    }
}

#[test]
fn a_question_of_an_mcp_client_waits_in_the_console_too_and_the_first_answer_wins() {
    let s = served("[approval]\ntimeout_ms = 30000\n");
    // A client that cannot show forms: the question waits for someone else.
    let asking = client(&s, "unasked", "legacy")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut pending = Value::Null;
    for _ in 0..200 {
        let (status, body) = s.http("GET", "/v1/approvals/pending", b"");
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        if let Some(first) = v["pending"].as_array().and_then(|p| p.first()) {
            pending = first.clone();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(pending["tool"], "exec_shell", "the question shows at the server: {pending}");
    assert_eq!(pending["input"]["command"], "touch marker", "{pending}");
    let path = format!(
        "/v1/sessions/{}/approvals/{}",
        pending["session_id"].as_str().unwrap(),
        pending["index"]
    );
    let body = serde_json::json!({"decision": "approve", "request": pending["request"]}).to_string();
    let (status, answer) = s.http("POST", &path, body.as_bytes());
    assert_eq!(status, 204, "{answer}");
    let v = printed_json("unasked (legacy)", &asking.wait_with_output().unwrap());
    assert_eq!(v["is_error"], false, "approved at the server, the call ran: {v}");
    assert_eq!(v["marker"], true, "{v}");
    // A second answer finds the question gone and changes nothing.
    let (status, _) = s.http("POST", &path, body.as_bytes());
    assert_eq!(status, 404);
}

#[test]
fn an_idle_keyed_session_is_closed_by_the_servers_sweep_and_the_next_call_gets_a_new_one() {
    let serve = Serve::new();
    std::fs::write(serve.workspace().join("notes.txt"), "some notes\n").unwrap();
    let root = serve.dir().to_path_buf();
    let s = serve
        .server(&format!(
            "workspace_root = \"{}\"\nidle_session_secs = 5\nreap_interval_secs = 1",
            root.display()
        ))
        .env("TOOLSLOT_AUDIT__LEDGER_DIR", "")
        .start();
    run(&s, "read", "auto");
    let first = sessions(&s);
    assert_eq!(first.len(), 1, "{first:?}");
    // Idle for its five seconds (long enough for the list above to be read first on a slow
    // machine), then swept within the next period: nothing else closes it.
    assert_eq!(
        sessions_within(&s, 300),
        Vec::<Value>::new(),
        "the idle session was closed by the sweep"
    );
    let v = run(&s, "read", "auto");
    assert!(v.to_string().contains("some notes"), "{v}");
    let now = sessions(&s);
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now[0]["session_id"], first[0]["session_id"], "a new session, not the closed one");
}

#[test]
fn a_message_that_cannot_be_read_gets_the_json_rpc_error_that_names_why() {
    let s = served("");
    let path = format!("/mcp?workspace={}", s.workspace.display());
    let auth = format!("Bearer {TOKEN}");
    let post = |extra: &[(&str, &str)], body: &[u8]| {
        let mut headers = vec![
            ("Host", s.addr.as_str()),
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        headers.extend_from_slice(extra);
        let (status, body) = s.request("POST", &path, &headers, body);
        (
            status,
            serde_json::from_str::<Value>(&body).unwrap_or_else(|e| panic!("{status}: {body}: {e}")),
        )
    };
    for (body, code, says) in [
        (
            &b"{\"jsonrpc\": \"2.0\", \"id\": 1,"[..],
            -32700,
            "parse error: the body is not JSON",
        ),
        (
            b"[{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}]",
            -32600,
            "a batch (a JSON array) is not accepted",
        ),
        (b"{\"id\":1,\"method\":\"tools/list\"}", -32600, "not a JSON-RPC 2.0 message"),
    ] {
        let (status, answer) = post(&[], body);
        assert_eq!(status, 400, "{answer}");
        assert_eq!(answer["error"]["code"], code, "{answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains(says), "{answer}");
    }
    // A batch of requests (which older revisions allowed): each request is told under its id.
    let (status, answer) = post(
        &[],
        b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},{\"jsonrpc\":\"2.0\",\"id\":\"two\",\"method\":\"tools/list\"}]",
    );
    assert_eq!(status, 400, "{answer}");
    let ids: Vec<Value> = answer
        .as_array()
        .map(|a| a.iter().map(|m| m["id"].clone()).collect())
        .unwrap_or_default();
    assert_eq!(ids, [serde_json::json!(1), serde_json::json!("two")], "{answer}");
    assert!(answer[0]["error"]["message"].as_str().unwrap().contains("a batch"), "{answer}");
    // A call whose params do not fit `tools/call` is told which field, not "method not found";
    // and nothing ran for it.
    let meta = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let newest = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "exec_shell"),
    ];
    let marker = s.workspace.join("ran");
    for (params, says) in [
        (
            serde_json::json!({"name": "exec_shell", "arguments": ["touch ran"], "_meta": meta}),
            "`arguments` in `tools/call` params must be an object of the tool's arguments by name (got an array)",
        ),
        (
            serde_json::json!({"arguments": {"command": "touch ran"}, "_meta": meta}),
            "`tools/call` params have no `name`",
        ),
    ] {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
        let (_, answer) = post(&newest, body.to_string().as_bytes());
        assert_eq!(answer["id"], 7, "{answer}");
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        assert!(answer["error"]["message"].as_str().unwrap().starts_with(says), "{answer}");
    }
    assert!(!marker.exists(), "a malformed call ran");
}

#[test]
fn stopping_the_server_ends_its_sessions_with_an_upstream_server() {
    // server-everything over HTTP, logging each session it opens and each one a client ends.
    let log_dir = tempfile::tempdir().unwrap();
    let log = log_dir.path().join("everything.log");
    let port = free_port();
    let _upstream = Proc::spawn(
        Command::new("node")
            .arg(deps().join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::process::Stdio::null()),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !listening(port) {
        assert!(std::time::Instant::now() < deadline, "server-everything did not listen");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let mut s = served(&format!(
        "[approval]\nmode = \"full-auto\"\n[mcp]\ntool_cache_dir = \"\"\n[[mcp.servers]]\nname = \"everything\"\nurl = \"http://127.0.0.1:{port}/mcp\"\ndefer = false\n"
    ));
    // Calls over a while: the first over the server's shared connection, the later ones over
    // the connection the session's thread opens of its own.
    let path = format!("/mcp?workspace={}", s.workspace.display());
    let auth = format!("Bearer {TOKEN}");
    let meta = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    // Fifteen calls at least, and more until the thread's own connection is open at the server
    // (it opens in the background: slowly on a loaded machine), within half a minute; so none
    // is still opening when the server is stopped.
    let opened_now = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .matches("Session initialized with ID")
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    for n in 0.. {
        if n >= 15 && (opened_now() >= 2 || std::time::Instant::now() > deadline) {
            break;
        }
        let body = serde_json::json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
            "params": {"name": "everything__echo", "arguments": {"message": format!("hi {n}")}, "_meta": meta}});
        let (status, answer) = s.request(
            "POST",
            &path,
            &[
                ("Host", s.addr.as_str()),
                ("Authorization", auth.as_str()),
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", "everything__echo"),
            ],
            body.to_string().as_bytes(),
        );
        assert!(status == 200 && answer.contains(&format!("Echo: hi {n}")), "{status}: {answer}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    signal(s.proc.pid(), libc::SIGTERM);
    let status = s.proc.child.wait().unwrap();
    assert!(status.success(), "{status}");
    let text = std::fs::read_to_string(&log).unwrap();
    let opened = text.matches("Session initialized with ID").count();
    let ended = text.matches("Received session termination request").count();
    assert!(opened >= 2, "a connection of the session's thread's own was opened:\n{text}");
    assert_eq!(ended, opened, "every session toolslot opened is ended when it stops:\n{text}");
}
