//! `toolslot serve` against docs/CONTRACT.md: the HTTP API, its limits, the OpenAPI document
//! (fuzzed with schemathesis), the approval console in a real Chromium, graceful shutdown.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;

/// A server in a folder of its own, with `server_keys` in `[server]` (or tables of its own).
fn start(server_keys: &str) -> Served {
    Serve::new().server(server_keys).start()
}

fn open_session(s: &Served, mode: &str) -> String {
    let id = s.session_as(&s.workspace, mode);
    assert_eq!(id.len(), 32, "128 random bits in hex");
    id
}

/// `toolslot serve` with `config` alone, which must refuse to start: what it did.
fn refused(config: &str) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("serve.toml");
    std::fs::write(&path, config).unwrap();
    toolslot().args(["serve", "--config"]).arg(&path).output().unwrap()
}

fn write_round(path: &str) -> String {
    let call = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c0", "type": "function", "function": {"name": "write_file", "arguments": json!({"path": path, "content": "hi"}).to_string()}}]}, "finish_reason": null}]});
    format!("data: {call}\n\ndata: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"tool_calls\"}}]}}\n\ndata: [DONE]\n\n")
}

#[test]
fn every_request_needs_the_token() {
    let s = start("");
    for (m, p) in [
        ("GET", "/healthz"),
        ("GET", "/v1/tools"),
        ("POST", "/v1/sessions"),
        ("GET", "/metrics"),
    ] {
        let (status, body) = s.http_as(None, m, p, b"");
        assert_eq!(status, 401, "{m} {p}: {body}");
        assert!(body.contains("bearer token"));
        assert_eq!(s.http_as(Some("wrong"), m, p, b"").0, 401);
    }
    assert_eq!(s.http("GET", "/healthz", b"").0, 200);
    // The console page is a login form without the cookie, whatever the address says.
    let (status, page) = s.http_as(None, "GET", &format!("/?token={TOKEN}"), b"");
    assert_eq!(status, 200);
    assert!(page.contains("action=\"/login\"") && !page.contains("id=\"sessions\""), "{page}");
    // The login sets an HttpOnly, SameSite=Strict cookie that then opens everything.
    let raw = |request: String| {
        let mut c = TcpStream::connect(&s.addr).unwrap();
        c.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        c.read_to_string(&mut answer).unwrap();
        answer
    };
    let form = |token: &str| {
        let body = format!("token={token}");
        format!(
            "POST /login HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            s.addr,
            body.len()
        )
    };
    assert!(raw(form("wrong")).starts_with("HTTP/1.1 401"));
    let answer = raw(form(TOKEN));
    assert!(answer.starts_with("HTTP/1.1 303"), "{answer}");
    let cookie = answer
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .expect("a cookie is set")
        .to_string();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    let pair = cookie.split_once(':').unwrap().1.trim().split(';').next().unwrap().to_string();
    for path in ["/", "/v1/tools"] {
        let answer = raw(format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nCookie: {pair}\r\nConnection: close\r\n\r\n",
            s.addr
        ));
        assert!(answer.starts_with("HTTP/1.1 200"), "{path}: {answer}");
        if path == "/" {
            assert!(answer.contains("id=\"sessions\""), "the console itself");
        }
    }
}

#[test]
fn a_round_streams_events_and_refusals_are_4xx() {
    let s = start("");
    std::fs::write(s.workspace.join("a.txt"), "alpha\n").unwrap();
    let id = open_session(&s, "ask");
    let body = std::fs::read(repo().join("examples/streams/parallel-reads.sse")).unwrap();
    std::fs::write(s.workspace.join("README.md"), "# demo workspace\n").unwrap();
    std::fs::create_dir(s.workspace.join("src")).unwrap();
    std::fs::write(s.workspace.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
    let (status, sse) = s.http("POST", &format!("/v1/sessions/{id}/rounds"), &body);
    assert_eq!(status, 200);
    let ev = events(&sse);
    assert_eq!(ev.last().unwrap()["type"], "round_complete");
    assert_eq!(ev.last().unwrap()["results"].as_array().unwrap().len(), 4);
    assert!(
        ev.last().unwrap()["results"][0]["content"]
            .as_str()
            .unwrap()
            .contains("demo workspace")
    );
    let cases: Vec<(&str, String, &[u8], u16)> = vec![
        ("POST", "/v1/sessions".into(), b"{not json", 400),
        ("POST", "/v1/sessions".into(), br#"{"approval_mode": "yolo"}"#, 400),
        ("POST", "/v1/sessions".into(), br#"{"workspace": "/no/such/dir"}"#, 400),
        ("POST", "/v1/sessions".into(), br#"{"surprise": 1}"#, 400),
        ("POST", format!("/v1/sessions/{id}/rounds?dialect=klingon"), b"", 400),
        ("POST", "/v1/sessions/nope/rounds".into(), b"data: x\n\n", 404),
        ("POST", format!("/v1/sessions/{id}/approvals/0"), br#"{"decision": "approve"}"#, 404),
        ("POST", format!("/v1/sessions/{id}/approvals/0"), br#"{"decision": "maybe"}"#, 400),
        ("POST", format!("/v1/sessions/{id}/approvals/x"), br#"{"decision": "approve"}"#, 404),
        ("GET", "/v1/tools?format=yaml".into(), b"", 400),
        ("GET", "/v1/nothing".into(), b"", 404),
    ];
    for (m, p, b, want) in cases {
        let (status, text) = s.http(m, &p, b);
        assert_eq!(status, want, "{m} {p}: {text}");
        assert!(
            serde_json::from_str::<Value>(&text).unwrap()["error"].is_string(),
            "{m} {p}: one-line reason: {text}"
        );
    }
    let (status, metrics) = s.http("GET", "/metrics", b"");
    assert_eq!(status, 200);
    assert!(metrics.contains("toolslot_rounds_total 1"), "{metrics}");
    assert!(
        metrics.contains("toolslot_calls_total{tool=\"read_file\",outcome=\"ok\"} 2"),
        "{metrics}"
    );
    assert_eq!(s.http("DELETE", &format!("/v1/sessions/{id}"), b"").0, 204);
    assert_eq!(s.http("DELETE", &format!("/v1/sessions/{id}"), b"").0, 404);
}

#[test]
fn approvals_over_http_and_one_round_at_a_time() {
    let s = start("");
    let id = open_session(&s, "ask");
    let (api, path) = (s.api.clone(), format!("/v1/sessions/{id}/rounds"));
    let round = std::thread::spawn(move || api.http("POST", &path, write_round("made.txt").as_bytes()));
    // While the round waits for approval, a second round is refused.
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let (_, list) = s.http("GET", "/v1/sessions", b"");
        if serde_json::from_str::<Value>(&list).unwrap()["sessions"][0]["running"] == true {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let conflict = s.http("POST", &format!("/v1/sessions/{id}/rounds"), b"").0 == 409;
    let mut approved = false;
    while Instant::now() < deadline && !approved {
        approved = s
            .http("POST", &format!("/v1/sessions/{id}/approvals/0"), br#"{"decision": "approve"}"#)
            .0
            == 204;
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(approved && conflict);
    let (status, sse) = round.join().unwrap();
    assert_eq!(status, 200);
    let ev = events(&sse);
    assert!(ev.iter().any(|e| e["type"] == "approval_decided" && e["decision"] == "approved"));
    assert_eq!(ev.last().unwrap()["results"][0]["is_error"], false);
    let (_, metrics) = s.http("GET", "/metrics", b"");
    assert!(metrics.contains("toolslot_approval_wait_seconds_count 1"), "{metrics}");
    assert_eq!(std::fs::read_to_string(s.workspace.join("made.txt")).unwrap(), "hi");
}

#[test]
fn limits_refuse_with_4xx() {
    let s = start("max_body_bytes = 100\nmax_sessions = 1\nmax_rounds_per_session = 1");
    let id = open_session(&s, "read-only");
    assert_eq!(s.http("POST", "/v1/sessions", b"").0, 429, "one session at most");
    let big = vec![b'x'; 500];
    assert_eq!(s.http("POST", &format!("/v1/sessions/{id}/rounds"), &big).0, 413);
    let small = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n";
    assert_eq!(s.http("POST", &format!("/v1/sessions/{id}/rounds"), small).0, 200);
    assert_eq!(
        s.http("POST", &format!("/v1/sessions/{id}/rounds"), small).0,
        429,
        "one round per session"
    );
}

#[test]
fn the_openapi_document_survives_schemathesis() {
    let deps = deps();
    let s = start("");
    let (status, doc) = s.http("GET", "/v1/openapi.json", b"");
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&doc).unwrap();
    assert!(doc["paths"]["/v1/sessions/{id}/rounds"]["post"].is_object());
    // Each parameter is where the server reads it: a path parameter is one of its path's
    // `{…}`, and every `{…}` has one; the rest are optional queries (`?format=`, `?dialect=`).
    for (path, ops) in doc["paths"].as_object().unwrap() {
        let templated: std::collections::BTreeSet<&str> = path
            .split('{')
            .skip(1)
            .filter_map(|rest| rest.split_once('}').map(|(name, _)| name))
            .collect();
        for (method, op) in ops.as_object().unwrap() {
            let params = op["parameters"].as_array().cloned().unwrap_or_default();
            let in_path: std::collections::BTreeSet<&str> = params
                .iter()
                .filter(|p| p["in"] == "path")
                .map(|p| p["name"].as_str().unwrap())
                .collect();
            assert_eq!(in_path, templated, "{method} {path}: path parameters");
            for p in params.iter().filter(|p| p["in"] != "path") {
                assert_eq!((&p["in"], &p["required"]), (&json!("query"), &json!(false)), "{method} {path}: {p}");
            }
        }
    }
    let rounds = doc["paths"]["/v1/sessions/{id}/rounds"]["post"]["parameters"].as_array().unwrap();
    assert!(rounds.iter().any(|p| p["name"] == "dialect" && p["in"] == "query"), "{rounds:?}");
    let out = Command::new(deps.join("venv/bin/schemathesis"))
        .args([
            "run",
            &format!("http://{}/v1/openapi.json", s.addr),
            "-H",
            &format!("Authorization: Bearer {TOKEN}"),
        ])
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
        ])
        .args(["-n", "40", "--request-timeout", "10", "--phases", "coverage,fuzzing", "--no-color"])
        // Its caches go to a temporary folder, not into the repository.
        .current_dir(&s.dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "schemathesis found problems:\n{text}");
    assert!(text.contains("passed"));
}

#[test]
fn the_console_approves_a_call_in_a_real_browser() {
    let s = start("");
    let id = open_session(&s, "ask");
    let mut node = s.console_watching("console_test.mjs", &id);
    // The page watches: now a round that needs an approval arrives.
    let (status, sse) = s.http(
        "POST",
        &format!("/v1/sessions/{id}/rounds"),
        write_round("from-browser.txt").as_bytes(),
    );
    assert_eq!(status, 200);
    assert!(node.wait().unwrap().success(), "the console test failed");
    assert!(
        events(&sse)
            .iter()
            .any(|e| e["type"] == "approval_decided" && e["decision"] == "approved")
    );
    assert!(s.workspace.join("from-browser.txt").exists());
}

#[test]
fn sigterm_lets_the_running_round_complete() {
    let mut s = start("[approval]\nmode = \"full-auto\"\n");
    let id = open_session(&s, "full-auto");
    let call = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c0", "type": "function", "function": {"name": "exec_shell", "arguments": "{\"command\": \"touch started; sleep 1; echo done\"}"}}]}, "finish_reason": "tool_calls"}]});
    let body = format!("data: {call}\n\ndata: [DONE]\n\n");
    let api = s.api.clone();
    let round = std::thread::spawn(move || api.http("POST", &format!("/v1/sessions/{id}/rounds"), body.as_bytes()));
    // The signal comes while the command runs, however long the round took to get there.
    let started = s.workspace.join("started");
    for _ in 0..400 {
        if started.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(started.exists(), "the command never started");
    let _ = Command::new("kill").args(["-TERM", &s.proc.child.id().to_string()]).status();
    let (status, sse) = round.join().unwrap();
    assert_eq!(status, 200);
    let last = events(&sse).pop().unwrap();
    assert_eq!(last["type"], "round_complete");
    assert!(last["results"][0]["content"].as_str().unwrap().starts_with("done"), "{last}");
    assert!(s.proc.child.wait().unwrap().success(), "exits cleanly after the grace");
}

#[test]
fn the_python_example_client_runs_a_round_with_an_approval() {
    let deps = deps();
    let s = start("");
    let out = Command::new(deps.join("venv/bin/python"))
        .arg(repo().join("examples/client.py"))
        .arg(repo().join("examples/streams/shell-approval.sse"))
        .args(["--url", &format!("http://{}", s.addr), "--token", TOKEN, "--workspace"])
        .arg(&s.workspace)
        .arg("--approve")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("\"decision\": \"approved\""), "{text}");
    assert!(text.contains("result #1 exec_shell error=False"), "{text}");
    assert!(s.workspace.join("made-by-the-model.txt").exists());
}

#[test]
fn sessions_stay_inside_the_workspace_root() {
    let serve = Serve::new();
    let root = format!("workspace_root = \"{}\"", serve.workspace().display());
    let s = serve.server(&root).start();
    let inside = s.workspace.join("project");
    std::fs::create_dir(&inside).unwrap();
    let outside = s.workspace.parent().unwrap().join("elsewhere");
    std::fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, s.workspace.join("escape")).unwrap();
    let ask = |w: &std::path::Path| {
        let body = serde_json::json!({"workspace": w}).to_string();
        s.http("POST", "/v1/sessions", body.as_bytes())
    };
    assert_eq!(ask(&inside).0, 200);
    for refused in [
        outside.clone(),
        s.workspace.join("escape"),
        s.workspace.join("project/../../elsewhere"),
    ] {
        let (status, body) = ask(&refused);
        assert_eq!(status, 400, "{}: {body}", refused.display());
        assert!(body.contains("outside server.workspace_root"), "{body}");
    }
    // No workspace named: the root.
    let (status, _) = s.http("POST", "/v1/sessions", b"{}");
    assert_eq!(status, 200);
}

#[test]
fn a_missing_workspace_root_stops_the_server_at_start() {
    let out = refused("[server]\nbind = \"127.0.0.1:0\"\nworkspace_root = \"/no/such/root\"\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/root"));
}

#[test]
fn mcp_servers_report_their_state() {
    let d = deps();
    let s = start(&format!(
        "[mcp]\ntool_cache_dir = \"\"\n[[mcp.servers]]\nname = \"time\"\ncommand = [\"{}\", \"--local-timezone=UTC\"]\n[[mcp.servers]]\nname = \"ghost\"\ncommand = [\"/no/such/server\"]\n",
        d.join("venv/bin/mcp-server-time").display()
    ));
    let (status, body) = s.http("GET", "/v1/mcp/servers", b"");
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["servers"][0], serde_json::json!({"name": "time", "state": "ready"}));
    assert_eq!(v["servers"][1]["name"], "ghost");
    assert_eq!(v["servers"][1]["state"], "failed");
    assert!(v["servers"][1]["reason"].as_str().unwrap().contains("/no/such/server"), "{v}");
    assert_eq!(s.http_as(None, "GET", "/v1/mcp/servers", b"").0, 401);

    // A session's catalog grows with what tool_search activates; the shared one does not.
    let id = open_session(&s, "full-auto");
    let path = format!("/v1/sessions/{id}/tools");
    let (_, before) = s.http("GET", &path, b"");
    let (_, shared) = s.http("GET", "/v1/tools", b"");
    assert_eq!(before, shared);
    assert!(!before.contains("time__get_current_time"), "server tools are deferred");
    let call = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c0", "type": "function", "function": {"name": "tool_search", "arguments": json!({"query": "current time in a timezone"}).to_string()}}]}, "finish_reason": null}]});
    let round = format!(
        "data: {call}\n\ndata: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"tool_calls\"}}]}}\n\ndata: [DONE]\n\n"
    );
    let (status, _) = s.http("POST", &format!("/v1/sessions/{id}/rounds"), round.as_bytes());
    assert_eq!(status, 200);
    let (status, after) = s.http("GET", &path, b"");
    assert_eq!(status, 200);
    assert!(after.contains("time__get_current_time"), "{after}");
    assert!(after.starts_with(&before[..before.len() - 1]), "appended, never inserted");
    let (_, shared) = s.http("GET", "/v1/tools", b"");
    assert!(!shared.contains("time__get_current_time"));
    assert_eq!(s.http("GET", "/v1/sessions/nope/tools", b"").0, 404);
}

fn session_count(s: &Served, token: Option<&str>) -> usize {
    let (status, list) = s.http_as(token, "GET", "/v1/sessions", b"");
    assert_eq!(status, 200, "{list}");
    serde_json::from_str::<Value>(&list).unwrap()["sessions"].as_array().unwrap().len()
}

/// A shell call as a Chat Completions round.
fn shell_round(command: &str) -> String {
    let call = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c0", "type": "function", "function": {"name": "exec_shell", "arguments": json!({"command": command}).to_string()}}]}, "finish_reason": null}]});
    format!("data: {call}\n\ndata: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"tool_calls\"}}]}}\n\ndata: [DONE]\n\n")
}

#[test]
fn a_hostile_page_reaches_nothing_through_dns_rebinding_or_cross_site_posts() {
    // The default: no token, as a user who runs `toolslot serve` on a laptop has.
    let s = Serve::new()
        .no_token()
        .server("allowed_hosts = [\"toolslot.internal\"]\nallowed_origins = [\"https://ui.example\"]")
        .start();
    let port = s.addr.rsplit(':').next().unwrap().to_string();
    let marker = s.workspace.join("pwned");
    let rebound = format!("attacker.example:{port}");
    // DNS rebinding: the page's own name now resolves here; its requests name it in Host.
    for (method, path, body) in [
        ("GET", "/v1/sessions", &b""[..]),
        ("GET", "/healthz", b""),
        ("POST", "/v1/sessions", b"{}"),
    ] {
        let (status, text) = s.request(method, path, &[("Host", &rebound), ("Content-Type", "application/json")], body);
        assert_eq!(status, 403, "{method} {path}: {text}");
        assert!(
            serde_json::from_str::<Value>(&text).unwrap()["error"]
                .as_str()
                .unwrap()
                .contains("Host")
        );
    }
    assert!(matches!(s.request("GET", "/healthz", &[], b"").0, 400 | 403), "no Host at all");
    assert_eq!(s.request("GET", "/healthz", &[("Host", "127.0.0.1:1")], b"").0, 403, "another port");
    for good in [s.addr.clone(), format!("localhost:{port}"), format!("toolslot.internal:{port}")] {
        assert_eq!(s.request("GET", "/healthz", &[("Host", &good)], b"").0, 200, "{good}");
    }
    assert_eq!(session_count(&s, None), 0);
    // A cross-site form post (text/plain needs no preflight): refused, and nothing is created.
    let origin_evil = [
        ("Host", s.addr.as_str()),
        ("Origin", "http://attacker.example"),
        ("Content-Type", "text/plain"),
    ];
    let (status, text) = s.request("POST", "/v1/sessions", &origin_evil, br#"{"approval_mode": "full-auto"}"#);
    assert_eq!(status, 403, "{text}");
    let evil_json = [
        ("Host", s.addr.as_str()),
        ("Origin", "http://attacker.example"),
        ("Content-Type", "application/json"),
    ];
    assert_eq!(s.request("POST", "/v1/sessions", &evil_json, b"{}").0, 403);
    assert_eq!(
        s.request(
            "POST",
            "/v1/sessions",
            &[("Host", s.addr.as_str()), ("Origin", "null"), ("Content-Type", "application/json")],
            b"{}"
        )
        .0,
        403
    );
    // Without an Origin (not a browser), a text/plain body is still not JSON.
    for ct in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
        let (status, text) = s.request(
            "POST",
            "/v1/sessions",
            &[("Host", &s.addr), ("Content-Type", ct)],
            br#"{"approval_mode": "full-auto"}"#,
        );
        assert_eq!(status, 415, "{ct}: {text}");
    }
    assert_eq!(
        s.request("POST", "/v1/sessions", &[("Host", &s.addr)], br#"{}"#).0,
        415,
        "a body without a content type"
    );
    assert_eq!(session_count(&s, None), 0, "no refused request opened a session");
    // A session exists (opened properly); the attacker's page still cannot run a round in it.
    let id = open_session(&s, "full-auto");
    let round = shell_round(&format!("touch {}", marker.display()));
    let (status, _) = s.request("POST", &format!("/v1/sessions/{id}/rounds"), &origin_evil, round.as_bytes());
    assert_eq!(status, 403);
    let (status, _) = s.request("DELETE", &format!("/v1/sessions/{id}"), &origin_evil, b"");
    assert_eq!(status, 403);
    for (path, body) in [
        (format!("/v1/sessions/{id}/approvals/0"), &br#"{"decision": "approve"}"#[..]),
        ("/v1/tools/search".to_string(), br#"{"query": "x"}"#),
    ] {
        let (status, text) = s.request("POST", &path, &[("Host", &s.addr), ("Content-Type", "text/plain")], body);
        assert_eq!(status, 415, "{path}: {text}");
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(!marker.exists(), "the page's command ran");
    // The server's own pages, and the origins the host allows, may post.
    for origin in [format!("http://{}", s.addr), "https://ui.example".to_string()] {
        let headers = [
            ("Host", s.addr.as_str()),
            ("Origin", origin.as_str()),
            ("Content-Type", "application/json"),
        ];
        assert_eq!(s.request("POST", "/v1/sessions", &headers, b"{}").0, 200, "{origin}");
    }
    assert_eq!(session_count(&s, None), 3);
}

#[test]
fn a_reachable_bind_without_a_token_refuses_to_start() {
    for bind in ["0.0.0.0:0", "[::]:0"] {
        let out = refused(&format!("[server]\nbind = \"{bind}\"\n"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bind}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.contains("server.token") && err.contains(bind), "{err}");
    }
}

#[test]
fn a_bind_address_in_use_is_named_in_one_line() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let out = refused(&format!("[server]\nbind = \"{addr}\"\n"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(err.contains(&format!("cannot listen on {addr} (server.bind)")), "{err}");
}

#[test]
fn wrong_tokens_are_throttled_per_address() {
    let s = start("auth_failures_per_minute = 3");
    let login = |token: &str| {
        let body = format!("token={token}");
        s.request(
            "POST",
            "/login",
            &[("Host", &s.addr), ("Content-Type", "application/x-www-form-urlencoded")],
            body.as_bytes(),
        )
        .0
    };
    assert_eq!(login("guess-1"), 401);
    assert_eq!(
        s.http_as(Some("guess-2"), "GET", "/v1/tools", b"").0,
        401,
        "a wrong bearer token counts too"
    );
    assert_eq!(login("guess-3"), 401);
    // Over the limit: refused before the token is even compared, the right one included.
    let (status, text) = s.http_as(Some("guess-4"), "GET", "/v1/tools", b"");
    assert_eq!(status, 429, "{text}");
    assert!(text.contains("auth_failures_per_minute"), "{text}");
    assert_eq!(login(TOKEN), 429);
    assert_eq!(s.http("GET", "/v1/tools", b"").0, 429);
    // Asking without a token is not a guess, and the console page still shows its form.
    assert_eq!(s.request("GET", "/", &[("Host", &s.addr)], b"").0, 200);
}

#[test]
fn rounds_for_unknown_sessions_leave_nothing_behind() {
    let s = start("");
    let tracked = |s: &Served| -> u64 {
        let (_, metrics) = s.http("GET", "/metrics", b"");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix("toolslot_server_tracked_sessions "))
            .unwrap_or_else(|| panic!("no gauge in {metrics}"))
            .parse()
            .unwrap()
    };
    assert_eq!(tracked(&s), 0);
    let long = "f".repeat(4000);
    for i in 0..300 {
        let id = format!("{long}{i}");
        for path in [
            format!("/v1/sessions/{id}/rounds"),
            format!("/v1/sessions/{id}/tools"),
            format!("/v1/sessions/{id}/approvals/0"),
        ] {
            let body: &[u8] = if path.ends_with("/0") {
                br#"{"decision": "approve"}"#
            } else {
                b"data: {}\n\n"
            };
            let method = if path.ends_with("/tools") { "GET" } else { "POST" };
            assert_eq!(s.http(method, &path, body).0, 404, "{path}");
        }
    }
    assert_eq!(tracked(&s), 0, "unknown ids were remembered");
    let id = open_session(&s, "read-only");
    assert_eq!(tracked(&s), 1);
    assert_eq!(s.http("DELETE", &format!("/v1/sessions/{id}"), b"").0, 204);
    assert_eq!(tracked(&s), 0);
}

/// Sends a round as a chunked body whose last chunk (the end of the body) is not sent yet, as a
/// proxy that forwards a provider's stream sends it: the model's message ends, toolslot
/// completes the round, and the body's end follows a moment later.
fn send_round(s: &Served, id: &str, body: &[u8]) -> TcpStream {
    let mut c = TcpStream::connect(&s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        c,
        "POST /v1/sessions/{id}/rounds HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nTransfer-Encoding: chunked\r\n\r\n{:X}\r\n",
        s.addr,
        body.len()
    )
    .unwrap();
    c.write_all(body).unwrap();
    c.write_all(b"\r\n").unwrap();
    c
}

/// Reads a round's answer until `round_complete`, answering its approval request; returns
/// what was read (the connection stays open).
fn read_until_complete(s: &Served, id: &str, c: &mut TcpStream) -> String {
    let mut raw = String::new();
    let mut buf = [0u8; 8192];
    let mut answered = false;
    loop {
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0, "the answer ended before round_complete: {raw:?}");
        raw.push_str(&String::from_utf8_lossy(&buf[..n]));
        if raw.starts_with("HTTP/1.1 409") {
            return raw;
        }
        // The event is whole once its frame ends; its `request` names the question (a bare
        // answer is refused once two questions of the session have asked about call 0).
        if !answered
            && let Some(at) = raw.find("\"type\":\"approval_required\"")
            && let Some(end) = raw[at..].find("\n\n")
        {
            answered = true;
            let frame = &raw[at..at + end];
            let request: u64 = frame
                .split("\"request\":")
                .nth(1)
                .map(|rest| rest.chars().take_while(char::is_ascii_digit).collect::<String>())
                .and_then(|digits| digits.parse().ok())
                .unwrap_or_else(|| panic!("approval_required names its request: {frame}"));
            let body = format!("{{\"decision\": \"approve\", \"request\": {request}}}");
            let (status, text) = s.http("POST", &format!("/v1/sessions/{id}/approvals/0"), body.as_bytes());
            assert_eq!(status, 204, "{text}");
        }
        if let Some(at) = raw.find("\"type\":\"round_complete\"")
            && raw[at..].contains("}\n\n")
        {
            return raw;
        }
    }
}

#[test]
fn the_next_round_can_be_sent_the_moment_round_complete_arrives() {
    let s = start("");
    let id = open_session(&s, "ask");
    let mut conflicts = 0;
    let mut previous: Option<TcpStream> = None;
    for i in 0..100 {
        // A command that writes, so that it needs the approval.
        let mut c = send_round(&s, &id, shell_round(&format!("touch made-{i} && echo round-{i}")).as_bytes());
        // Only now does the previous body end.
        if let Some(mut p) = previous.take() {
            p.write_all(b"0\r\n\r\n").unwrap();
        }
        let raw = read_until_complete(&s, &id, &mut c);
        if raw.starts_with("HTTP/1.1 409") {
            conflicts += 1;
            c.write_all(b"0\r\n\r\n").unwrap();
            continue;
        }
        assert!(raw.contains(&format!("round-{i}")), "{raw}");
        assert!(raw.contains("\"decision\":\"approved\""), "{raw}");
        assert!(s.workspace.join(format!("made-{i}")).exists());
        previous = Some(c);
    }
    assert_eq!(conflicts, 0, "rounds sent right after round_complete were refused");
}
