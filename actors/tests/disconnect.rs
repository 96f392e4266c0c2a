//! A round whose client is gone (issue #19), through `toolslot serve` with a real HTTP client
//! that closes its connection at each stage: before the first call, at `approval_required`,
//! during a shell command, during an MCP call. The round is cancelled after
//! `server.disconnect_grace_ms`, a late approval gets 404 and runs nothing, a killed command
//! leaves no side effect and no process, and the session takes the next round at once.
//! Also: a round body that is not a provider stream at all ends with a `stream_error` notice.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;

/// The grace the tests run with (ms), and the keep-alive that lets the server notice a closed
/// connection (ms).
const GRACE_MS: u64 = 400;
const KEEPALIVE_MS: u64 = 100;

/// How long after the client left the session must take a new round: the grace, a few
/// keep-alive periods for the server to notice (the first write after a close may still
/// succeed), and room for a loaded machine. Not a speed check (the issue's second is the
/// server's design; speed is the benches'): it tells a round cancelled for its client apart
/// from one that ends on its own, which here is never sooner than 9 s (a command of 9 s, a
/// question nobody answers, an MCP call of 30 s).
fn freed_within() -> Duration {
    Duration::from_millis(GRACE_MS + 3 * KEEPALIVE_MS + 6000)
}

/// Starts `toolslot serve` with the test's grace and `extra` config (its own tables).
fn serve(bed: &Bed, server_keys: &str, extra: &str) -> Served {
    Serve::in_dir(bed.dir.path(), &bed.ws)
        .config(extra)
        .server(&format!(
            "disconnect_grace_ms = {GRACE_MS}\nstream_keepalive_ms = {KEEPALIVE_MS}\n{server_keys}"
        ))
        .ledger(&bed.dir.path().join("ledger"))
        .start()
}

/// The requests of these tests: rounds read while they run, by a client that may leave.
impl Client {
    /// Sends a request and leaves the connection open.
    fn send(&self, method: &str, path: &str, body: &[u8]) -> TcpStream {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        )
        .unwrap();
        s.write_all(body).unwrap();
        s
    }

    /// Whether the session runs a round, as `GET /v1/sessions` says.
    fn running(&self, id: &str) -> bool {
        let (_, list) = self.http("GET", "/v1/sessions", b"");
        let list: Value = serde_json::from_str(&list).unwrap();
        list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["session_id"] == id && s["running"] == true)
    }

    /// Sends a round and reads its answer until `until` appears; the connection, still open,
    /// and what was read.
    fn round_until(&self, id: &str, body: &str, until: &str) -> (TcpStream, String) {
        let mut c = self.send("POST", &format!("/v1/sessions/{id}/rounds?dialect=openai-chat"), body.as_bytes());
        let mut raw = String::new();
        let mut buf = [0u8; 8192];
        while !raw.contains(until) {
            let n = c.read(&mut buf).unwrap();
            assert!(n > 0, "the answer ended before {until}: {raw}");
            raw.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        (c, raw)
    }

    /// A whole round: its events.
    fn round_sse(&self, id: &str, body: &str) -> (u16, Vec<Value>) {
        let (status, sse) = self.http("POST", &format!("/v1/sessions/{id}/rounds?dialect=openai-chat"), body.as_bytes());
        (status, events(&sse))
    }

    /// Closes `c` (the client going away) and returns how long the session took to be free.
    fn leave(&self, id: &str, c: TcpStream) -> Duration {
        let left = Instant::now();
        drop(c);
        assert!(
            eventually(30, || !self.running(id)),
            "the session stayed running after its client left"
        );
        left.elapsed()
    }
}

/// The events in what was read of an answer, chunk framing and all.
fn events(sse: &str) -> Vec<Value> {
    sse.split("\n\n")
        .filter_map(|f| f.trim_start_matches(|c| c != 'd').strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

/// The audit ledger's outcome records of session `id`, by call index.
fn outcomes(bed: &Bed, id: &str) -> Vec<(u64, String)> {
    let path = bed.dir.path().join("ledger").join(format!("{id}.jsonl"));
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["kind"] == "outcome")
        .map(|r| (r["index"].as_u64().unwrap_or(u64::MAX), r.to_string()))
        .collect()
}

fn shell(command: &str) -> String {
    openai_stream(&[("exec_shell", json!({"command": command}))])
}

#[test]
fn a_client_gone_at_approval_required_cancels_the_round_and_a_late_approve_gets_404() {
    let bed = Bed::new();
    let s = serve(&bed, "", "");
    let id = s.session_as(&bed.ws, "ask");
    let (c, raw) = s.round_until(&id, &shell("touch marker"), "\"type\":\"approval_required\"");
    let request = events(&raw).into_iter().find(|e| e["type"] == "approval_required").unwrap()["request"]
        .as_u64()
        .expect("approval_required names its request");
    let took = s.leave(&id, c);
    assert!(took < freed_within(), "the session was freed {took:?} after its client left");
    // The question ended with the round: a late answer, naming it or not, runs nothing.
    for body in [json!({"decision": "approve"}), json!({"decision": "approve", "request": request})] {
        let (status, text) = s.http("POST", &format!("/v1/sessions/{id}/approvals/0"), body.to_string().as_bytes());
        assert_eq!(status, 404, "{text}");
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(!bed.ws.join("marker").exists(), "the command ran after its round was cancelled");
    // The next round is accepted, and the same command is asked about again: a cancelled
    // question is nobody's rejection.
    let (c, raw) = s.round_until(&id, &shell("touch marker"), "\"type\":\"approval_required\"");
    assert!(!raw.contains("cached_rejection"), "{raw}");
    let next = events(&raw).into_iter().find(|e| e["type"] == "approval_required").unwrap()["request"]
        .as_u64()
        .unwrap();
    assert!(next > request, "question numbers go up: {request} then {next}");
    // An answer naming the old question does not reach the new one about the same index.
    let old = json!({"decision": "approve", "request": request}).to_string();
    assert_eq!(s.http("POST", &format!("/v1/sessions/{id}/approvals/0"), old.as_bytes()).0, 404);
    let reject = json!({"decision": "reject", "request": next}).to_string();
    assert_eq!(s.http("POST", &format!("/v1/sessions/{id}/approvals/0"), reject.as_bytes()).0, 204);
    drop(c);
    assert!(eventually(30, || !s.running(&id)));
    assert!(!bed.ws.join("marker").exists());
}

/// The pids of processes whose command line is exactly `words`.
fn pids_of(words: &[&str]) -> Vec<i32> {
    let want: Vec<u8> = words.iter().flat_map(|w| w.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            (std::fs::read(e.path().join("cmdline")).ok()? == want).then_some(pid)
        })
        .collect()
}

#[test]
fn a_client_gone_during_a_shell_command_kills_its_process_group() {
    let bed = Bed::new();
    let s = serve(&bed, "", "");
    let id = s.session_as(&bed.ws, "full-auto");
    // A length of sleep no other test uses, to find its process.
    let started = Instant::now();
    // A second command behind it, which must never start.
    let body = openai_stream(&[
        ("exec_shell", json!({"command": "sleep 9.173 && touch marker"})),
        ("exec_shell", json!({"command": "touch second"})),
    ]);
    let (c, _) = s.round_until(&id, &body, "\"type\":\"call_started\"");
    let mut sleeping = Vec::new();
    assert!(
        eventually(10, || {
            sleeping = pids_of(&["sleep", "9.173"]);
            !sleeping.is_empty()
        }),
        "the command did not start"
    );
    let took = s.leave(&id, c);
    assert!(took < freed_within(), "the session was freed {took:?} after its client left");
    assert!(
        eventually(5, || sleeping.iter().all(|p| !alive(*p))),
        "the command's process outlived its cancelled round"
    );
    // Past the moment the command would have written its marker.
    std::thread::sleep(Duration::from_millis(10_000).saturating_sub(started.elapsed()));
    assert!(!bed.ws.join("marker").exists(), "the command went on after its round was cancelled");
    assert!(!bed.ws.join("second").exists(), "a call of the cancelled round started after it");
    // Each call of the cancelled round has exactly one outcome on record.
    let recorded = outcomes(&bed, &id);
    for index in [0, 1] {
        let of: Vec<&String> = recorded.iter().filter(|(i, _)| *i == index).map(|(_, r)| r).collect();
        assert_eq!(of.len(), 1, "call {index}: {recorded:?}");
    }
    // The next round runs.
    let (status, ev) = s.round_sse(&id, &shell("echo next"));
    assert_eq!(status, 200);
    let last = ev.last().unwrap();
    assert_eq!(last["type"], "round_complete", "{ev:?}");
    assert!(last["results"][0]["content"].as_str().unwrap().contains("next"), "{last}");
}

#[test]
fn a_client_gone_before_the_first_call_frees_the_session() {
    let bed = Bed::new();
    let s = serve(&bed, "", "");
    let id = s.session_as(&bed.ws, "full-auto");
    // Only the beginning of the body: text, no call yet; the body never ends.
    let text = json!({"choices": [{"index": 0, "delta": {"content": "Let me look"}, "finish_reason": null}]});
    let head = format!("data: {text}\n\n");
    let mut c = TcpStream::connect(&s.addr).unwrap();
    write!(
        c,
        "POST /v1/sessions/{id}/rounds?dialect=openai-chat HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nTransfer-Encoding: chunked\r\n\r\n{:X}\r\n{head}\r\n",
        s.addr,
        head.len()
    )
    .unwrap();
    assert!(eventually(10, || s.running(&id)), "the round did not start");
    let took = s.leave(&id, c);
    assert!(took < freed_within(), "the session was freed {took:?} after its client left");
    let (status, ev) = s.round_sse(&id, &shell("touch after"));
    assert_eq!(status, 200, "the next round was refused");
    assert_eq!(ev.last().unwrap()["results"][0]["is_error"], false, "{ev:?}");
    assert!(bed.ws.join("after").exists());
}

#[test]
fn a_client_gone_during_an_mcp_call_cancels_it_at_the_server() {
    let bed = Bed::new();
    let log = bed.dir.path().join("calls.jsonl");
    let server = mcp_server("sdk", &sdk_server(&["--name", "sdk", "--slow", "--log", log.to_str().unwrap()]), "");
    let s = serve(&bed, "", &server);
    let id = s.session_as(&bed.ws, "full-auto");
    let logged = |event: &str| {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|l| l["tool"] == "slow" && l["event"] == event)
    };
    let body = openai_stream(&[("sdk__slow", json!({"seconds": 30}))]);
    let (c, _) = s.round_until(&id, &body, "\"type\":\"call_started\"");
    assert!(eventually(20, || logged("started")), "the call did not reach the server");
    let took = s.leave(&id, c);
    assert!(took < freed_within(), "the session was freed {took:?} after its client left");
    // The server was told: its handler was interrupted by `notifications/cancelled`.
    assert!(eventually(10, || logged("cancelled")), "the server never heard of the cancellation");
    assert!(!logged("finished"));
    // The server still serves the next round's call.
    let (status, ev) = s.round_sse(&id, &openai_stream(&[("sdk__echo", json!({"text": "again"}))]));
    assert_eq!(status, 200);
    let last = ev.last().unwrap();
    assert!(last["results"][0]["content"].as_str().unwrap().contains("sdk:echo:again"), "{last}");
}

#[test]
fn a_body_that_is_not_a_provider_stream_ends_with_a_stream_error_naming_why() {
    let bed = Bed::new();
    let s = serve(&bed, "", "");
    let id = s.session_as(&bed.ws, "full-auto");
    // Bytes of every value, in an order no stream has, with and without line ends.
    let mut random: Vec<u8> = (0..65536u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    random.retain(|b| *b != b'\n' && *b != b'\r');
    let mut binary = b"\x7fELF\x02\x01\x01\0\0\0".to_vec();
    binary.extend((0..4096u32).map(|i| (i * 7 % 256) as u8));
    let json_doc = json!({"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "exec_shell", "arguments": "{\"command\": \"touch ran\"}"}}]}, "finish_reason": "tool_calls"}]}).to_string();
    // Events no dialect sends are named as such, as frames the dialect cannot read, or (with
    // no dialect given) as a stream whose dialect cannot be told.
    let foreign: &[&str] = &[
        "stream: none of its 1 SSE events",
        "malformed",
        "could not tell the stream's dialect",
    ];
    let cases: Vec<(&str, Vec<u8>, &[&str])> = vec![
        ("random bytes", random, &["hold no SSE `data:` event"]),
        ("a binary file", binary, &["it begins `\\x7fELF"]),
        ("a JSON document", json_doc.into_bytes(), &["a JSON document"]),
        (
            "prose with line ends",
            b"Hello,\nthis is not\nan event stream.\n\n".to_vec(),
            &["hold no SSE `data:` event"],
        ),
        ("events no dialect sends", b"data: {\"hello\": \"world\"}\n\n".to_vec(), foreign),
    ];
    for (what, body, why) in cases {
        for dialect in ["?dialect=openai-chat", "?dialect=anthropic", ""] {
            let (status, sse) = s.http("POST", &format!("/v1/sessions/{id}/rounds{dialect}"), &body);
            assert_eq!(status, 200, "{what}: {sse}");
            let ev = events(&sse);
            let last = ev.last().unwrap_or_else(|| panic!("{what}{dialect}: no events: {sse}"));
            assert_eq!(last["type"], "round_complete", "{what}{dialect}: {sse}");
            let errors: Vec<&str> = ev
                .iter()
                .filter(|e| e["type"] == "notice" && e["kind"] == "stream_error")
                .filter_map(|e| e["message"].as_str())
                .collect();
            assert!(
                errors.iter().any(|m| why.iter().any(|w| m.contains(w))),
                "{what}{dialect}: {errors:?}"
            );
        }
    }
    assert!(!bed.ws.join("ran").exists(), "a call inside a JSON document ran");
}

/// Opens `GET /v1/sessions/{id}/events` and reads its opening comment.
fn watch(s: &Served, id: &str) -> TcpStream {
    let mut c = TcpStream::connect(&s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        c,
        "GET /v1/sessions/{id}/events HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n",
        s.addr
    )
    .unwrap();
    let mut raw = String::new();
    let mut buf = [0u8; 4096];
    while !raw.contains(": watching") {
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0, "the events stream ended: {raw}");
        raw.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    c
}

#[test]
fn a_reader_of_the_sessions_events_keeps_a_round_whose_client_left() {
    let bed = Bed::new();
    let s = serve(&bed, "", "");
    let id = s.session_as(&bed.ws, "ask");
    let reader = watch(&s, &id);
    let (c, raw) = s.round_until(&id, &shell("touch kept"), "\"type\":\"approval_required\"");
    let request = events(&raw).into_iter().find(|e| e["type"] == "approval_required").unwrap()["request"].clone();
    drop(c);
    // Several graces later the round still waits, and the reader's side can approve it.
    std::thread::sleep(Duration::from_millis(4 * GRACE_MS + 4 * KEEPALIVE_MS));
    assert!(s.running(&id), "the round was cancelled although its events were read");
    let approve = json!({"decision": "approve", "request": request}).to_string();
    assert_eq!(s.http("POST", &format!("/v1/sessions/{id}/approvals/0"), approve.as_bytes()).0, 204);
    assert!(eventually(10, || bed.ws.join("kept").exists()), "the approved command did not run");
    assert!(eventually(10, || !s.running(&id)));
    // Once the reader leaves too, the next abandoned round is cancelled after the grace.
    let (c, _) = s.round_until(&id, &shell("touch dropped"), "\"type\":\"approval_required\"");
    drop(c);
    std::thread::sleep(Duration::from_millis(3 * GRACE_MS));
    assert!(s.running(&id), "the round was cancelled although its events were read");
    let took = s.leave(&id, reader);
    assert!(took < freed_within(), "the session was freed {took:?} after its last reader left");
    // A bare answer: refused (two questions of the session have asked about call 0, so it
    // must name one), and nothing runs.
    assert_eq!(
        s.http("POST", &format!("/v1/sessions/{id}/approvals/0"), br#"{"decision": "approve"}"#)
            .0,
        400
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(!bed.ws.join("dropped").exists());
}
