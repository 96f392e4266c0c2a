//! Approvals over `toolslot serve`: what waits is listed (per session and across sessions, with
//! its deadline, the text that led to it and the session's workspace), remembered decisions are
//! listed and revoked (a revoked one asks again), and a call nobody decides on in time is
//! refused and runs nothing.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;

/// A server in a folder of its own, which is also its HOME and holds its ledger and managed
/// policy file.
fn start(extra: &str) -> Served {
    let serve = Serve::new();
    let dir = serve.dir().to_path_buf();
    let policy = format!("[policy]\nmanaged_file = \"{}\"\n{extra}", dir.join("managed.toml").display());
    serve.ledger(&dir.join("ledger")).env("HOME", &dir).config(&policy).start()
}

fn json_of(s: &Served, method: &str, path: &str) -> Value {
    let (status, body) = s.http(method, path, b"");
    assert_eq!(status, 200, "{method} {path}: {body}");
    serde_json::from_str(&body).unwrap()
}

fn open_session(s: &Served) -> String {
    s.session_as(&s.workspace, "ask")
}

/// A round that says why, then writes `path` (which needs approval in ask mode).
fn write_round(path: &str) -> String {
    write_round_of(path, "hi")
}

/// The same with `content` (a repeated identical call would meet the loop guard).
fn write_round_of(path: &str, content: &str) -> String {
    let text = json!({"choices": [{"index": 0, "delta": {"content": "I will note this in a file."}, "finish_reason": null}]});
    let call = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c0", "type": "function", "function": {"name": "write_file", "arguments": json!({"path": path, "content": content}).to_string()}}]}, "finish_reason": null}]});
    format!(
        "data: {text}\n\ndata: {call}\n\ndata: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"tool_calls\"}}]}}\n\ndata: [DONE]\n\n"
    )
}

/// Starts a round in a thread; its events when it completes.
fn round(s: &Served, id: &str, body: String) -> std::thread::JoinHandle<Vec<Value>> {
    let addr = s.addr.clone();
    let path = format!("/v1/sessions/{id}/rounds");
    std::thread::spawn(move || {
        let mut c = TcpStream::connect(&addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        write!(
            c,
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut raw = Vec::new();
        c.read_to_end(&mut raw).unwrap();
        let text = String::from_utf8_lossy(&raw).to_string();
        // The SSE frames survive chunking markers between them well enough to be found.
        let frames: String = text
            .split("\r\n")
            .filter(|l| l.starts_with("data: ") || l.is_empty() || l.starts_with('\n'))
            .collect::<Vec<_>>()
            .join("\n");
        events(&frames.replace("\n\n\n", "\n\n"))
    })
}

/// Waits until something of the session waits for a decision; returns it as the cross-session
/// list shows it.
fn wait_pending(s: &Served, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let all = json_of(s, "GET", "/v1/approvals/pending");
        if let Some(p) = all["pending"].as_array().unwrap().iter().find(|p| p["session_id"] == id) {
            return p.clone();
        }
        std::thread::sleep(Duration::from_millis(30));
    }
    panic!("nothing came to wait for a decision");
}

/// Answers the question waiting in session `id`, naming it (once two questions of a session
/// have asked about call 0, an answer must say which it answers).
fn answer(s: &Served, id: &str, decision: &str) {
    let request = wait_pending(s, id)["request"].clone();
    let body = json!({"decision": decision, "request": request}).to_string();
    let (status, text) = s.http("POST", &format!("/v1/sessions/{id}/approvals/0"), body.as_bytes());
    assert_eq!(status, 204, "{text}");
}

/// Percent-encodes a path segment.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn pending_approvals_are_listed_and_remembered_ones_revoked() {
    let s = start("");
    let id = open_session(&s);
    assert_eq!(
        json_of(&s, "GET", &format!("/v1/sessions/{id}/approvals/pending"))["pending"],
        json!([])
    );

    let first = round(&s, &id, write_round("a.txt"));
    let p = wait_pending(&s, &id);
    assert_eq!(p["tool"], "write_file");
    assert_eq!(p["input"]["path"], "a.txt");
    assert_eq!(p["workspace"], s.workspace.display().to_string());
    assert_eq!(p["text_before"], "I will note this in a file.");
    assert!(p["deadline_ms"].is_null(), "{p}");
    assert!(p["asked_at_ms"].as_u64().unwrap() > 0);
    let mine = json_of(&s, "GET", &format!("/v1/sessions/{id}/approvals/pending"));
    assert_eq!(mine["pending"][0]["index"], 0, "{mine}");
    answer(&s, &id, "approve_for_session");
    let ev = first.join().unwrap();
    assert!(ev.iter().any(|e| e["type"] == "round_complete"), "{ev:?}");
    assert!(s.workspace.join("a.txt").exists());

    let remembered = json_of(&s, "GET", &format!("/v1/sessions/{id}/approvals/remembered"));
    let list = remembered["remembered"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{remembered}");
    assert_eq!(
        (list[0]["decision"].as_str(), list[0]["scope"].as_str()),
        (Some("approve"), Some("session"))
    );
    let key = list[0]["key"].as_str().unwrap().to_string();

    // Covered: not asked.
    let ev = round(&s, &id, write_round_of("a.txt", "second")).join().unwrap();
    assert!(!ev.iter().any(|e| e["type"] == "approval_required"), "{ev:?}");
    assert!(
        ev.iter()
            .any(|e| e["type"] == "approval_decided" && e["decision"] == "cached_approval")
    );

    // Revoked: asked again.
    let (status, text) = s.http("DELETE", &format!("/v1/sessions/{id}/approvals/remembered/{}", encode(&key)), b"");
    assert_eq!(status, 204, "{text}");
    let (status, _) = s.http("DELETE", &format!("/v1/sessions/{id}/approvals/remembered/{}", encode(&key)), b"");
    assert_eq!(status, 404);
    assert_eq!(
        json_of(&s, "GET", &format!("/v1/sessions/{id}/approvals/remembered"))["remembered"],
        json!([])
    );
    std::fs::remove_file(s.workspace.join("a.txt")).unwrap();
    let third = round(&s, &id, write_round_of("a.txt", "third"));
    wait_pending(&s, &id);
    answer(&s, &id, "reject");
    let ev = third.join().unwrap();
    assert!(
        ev.iter().any(|e| e["type"] == "approval_decided" && e["decision"] == "rejected"),
        "{ev:?}"
    );
    assert!(!s.workspace.join("a.txt").exists());
    // The one-off rejection is remembered for that exact call; revoking all forgets it.
    let revoked = json_of(&s, "DELETE", &format!("/v1/sessions/{id}/approvals/remembered"));
    assert_eq!(revoked["revoked"], 1, "{revoked}");

    // Unknown decisions and sessions are refused.
    let (status, _) = s.http("POST", &format!("/v1/sessions/{id}/approvals/0"), br#"{"decision": "maybe"}"#);
    assert_eq!(status, 400);
    let (status, _) = s.http("GET", "/v1/sessions/nope/approvals/remembered", b"");
    assert_eq!(status, 404);
}

#[test]
fn an_approval_nobody_gives_in_time_expires_and_runs_nothing() {
    let s = start("[approval]\ntimeout_ms = 400\n");
    let id = open_session(&s);
    let ev = round(&s, &id, write_round("never.txt")).join().unwrap();
    let expired = ev
        .iter()
        .find(|e| e["type"] == "approval_expired")
        .unwrap_or_else(|| panic!("no approval_expired: {ev:?}"));
    assert_eq!(expired["timeout_ms"], 400);
    let done = ev.iter().find(|e| e["type"] == "round_complete").unwrap();
    let content = done["results"][0]["content"].as_str().unwrap();
    assert!(content.contains("nobody decided on `write_file` within 400 ms"), "{content}");
    assert!(!s.workspace.join("never.txt").exists());
    // Not remembered as anything, and recorded as a timeout, never as a grant.
    assert_eq!(
        json_of(&s, "GET", &format!("/v1/sessions/{id}/approvals/remembered"))["remembered"],
        json!([])
    );
    let ledger = std::fs::read_to_string(s.dir.join(format!("ledger/{id}.jsonl"))).unwrap();
    let records: Vec<Value> = ledger.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records.len(), 1, "{ledger}");
    assert_eq!(
        (records[0]["decision"].as_str(), records[0]["source"].as_str()),
        (Some("deny"), Some("timeout"))
    );

    // With a deadline, the pending list shows it: on a server whose deadline is long enough
    // for the list to be read before it passes, however slow the machine.
    drop(s);
    let s = start("[approval]\ntimeout_ms = 600000\n");
    let id = open_session(&s);
    let waiting = round(&s, &id, write_round("later.txt"));
    let p = wait_pending(&s, &id);
    let (asked, deadline) = (p["asked_at_ms"].as_u64().unwrap(), p["deadline_ms"].as_u64().unwrap());
    assert_eq!(deadline - asked, 600_000, "{p}");
    answer(&s, &id, "reject");
    waiting.join().unwrap();
    assert!(!s.workspace.join("later.txt").exists());
}

#[test]
fn the_console_shows_what_waited_before_it_opened_and_revokes_in_a_real_browser() {
    let s = start("[approval]\ntimeout_ms = 120000\n");
    let id = open_session(&s);
    let waiting = round(&s, &id, write_round("late.txt"));
    wait_pending(&s, &id);
    // Only now does the page open.
    let status = s.console("pending_test.mjs", &id).arg(&s.workspace).status().unwrap();
    assert!(status.success(), "the console test failed");
    let ev = waiting.join().unwrap();
    assert!(
        ev.iter()
            .any(|e| e["type"] == "approval_decided" && e["decision"] == "approved_for_session"),
        "{ev:?}"
    );
    assert!(s.workspace.join("late.txt").exists());
    assert_eq!(
        json_of(&s, "GET", &format!("/v1/sessions/{id}/approvals/remembered"))["remembered"],
        json!([])
    );
}

#[test]
fn approve_for_project_over_http_reaches_the_next_session() {
    let s = start("");
    let id = open_session(&s);
    let first = round(&s, &id, write_round("notes.txt"));
    wait_pending(&s, &id);
    answer(&s, &id, "approve_for_project");
    let ev = first.join().unwrap();
    assert!(
        ev.iter().any(|e| e["type"] == "notice" && e["kind"] == "project_rule_added"),
        "{ev:?}"
    );
    let policy = std::fs::read_to_string(s.workspace.join(".toolslot/policy.toml")).unwrap();
    assert!(policy.contains("decision = \"allow\"") && policy.contains("write_file"), "{policy}");
    // Another session in the workspace runs it without asking.
    let other = open_session(&s);
    std::fs::remove_file(s.workspace.join("notes.txt")).unwrap();
    let ev = round(&s, &other, write_round_of("notes.txt", "again")).join().unwrap();
    assert!(!ev.iter().any(|e| e["type"] == "approval_required"), "{ev:?}");
    assert_eq!(std::fs::read_to_string(s.workspace.join("notes.txt")).unwrap(), "again");
}
