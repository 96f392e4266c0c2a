//! A call posted straight to servers that answer it badly: each gets the failure that says
//! why, never a panic or a wait for the timeout.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::super::RequestFailure;
use super::super::remembered::Remembering;
use super::{Direct, Failure, Hooks, Opened};

/// A server that answers one request with `answer` (status line, headers and body as given)
/// and then closes: its address, and the future that serves (to be run beside the call, since
/// the slot spawns no tasks), which gives back what it was sent.
async fn answering(answer: Vec<u8>) -> (String, impl std::future::Future<Output = Vec<u8>>) {
    let (url, serve) = answering_each(vec![answer]).await;
    (url, async move { serve.await.concat() })
}

/// As [`answering`], one connection after another, each answered with the next of `answers`.
async fn answering_each(answers: Vec<Vec<u8>>) -> (String, impl std::future::Future<Output = Vec<Vec<u8>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let serve = async move {
        let mut all = Vec::new();
        for answer in answers {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            // The request's head, then as much body as it says it has.
            loop {
                let n = socket.read(&mut buf).await.unwrap();
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text[..end]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap())
                        })
                        .unwrap_or(0);
                    if got.len() >= end + 4 + length || n == 0 {
                        break;
                    }
                }
            }
            let _ = socket.write_all(&answer).await;
            let _ = socket.shutdown().await;
            all.push(got);
        }
        all
    };
    (url, serve)
}

fn request_failure(result: Result<Value, Failure>) -> Result<Value, RequestFailure> {
    result.map_err(|f| match f {
        Failure::Request(r) => r,
        Failure::SessionGone => RequestFailure::Closed("(test) the session is gone".into()),
    })
}

fn hooks() -> Hooks {
    Hooks {
        server: "s".into(),
        progress: None,
        ask: None,
    }
}

fn http(status: &str, kind: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

fn direct(url: &str, max_bytes: usize) -> Direct {
    // The client a server is reached with (reqwest is built here without a crypto provider).
    let cfg: crate::config::McpServerConfig = serde_json::from_value(json!({"name": "s", "url": url})).unwrap();
    let http = crate::mcp::http::client_for(&cfg, 0, Duration::ZERO).unwrap();
    let (_, session) = Remembering::new(http.clone());
    Direct::new(Opened {
        http,
        url: url.to_string(),
        custom: Default::default(),
        bearer: Some("sesame".into()),
        revision: "2025-11-25".into(),
        session,
        max_bytes,
        max_depth: 8,
        resume_attempts: 2,
        resume_wait: Duration::from_millis(10),
        grace: Duration::from_millis(500),
        on_tools_changed: None,
    })
    .unwrap()
}

async fn call(answer: Vec<u8>, max_bytes: usize) -> (Result<Value, RequestFailure>, String) {
    let (url, sent) = answering(answer).await;
    let d = direct(&url, max_bytes);
    let id = d.next_id();
    let args = json!({"message": "hi"});
    let body = Direct::call_body(&id, "echo", args.as_object(), None).unwrap();
    let hooks = Hooks {
        server: "s".into(),
        progress: None,
        ask: None,
    };
    let (result, sent) = tokio::time::timeout(Duration::from_secs(10), async { tokio::join!(d.call(&id, body, &hooks), sent) })
        .await
        .unwrap();
    (request_failure(result), String::from_utf8(sent).unwrap())
}

#[tokio::test]
async fn an_answer_as_one_json_body_is_read_and_the_request_carries_the_session_headers() {
    let body = br#"{"jsonrpc":"2.0","id":"toolslot-1","result":{"content":[{"type":"text","text":"Echo: hi"}]}}"#;
    let (result, sent) = call(http("200 OK", "application/json", body), 1 << 20).await;
    assert_eq!(result.unwrap()["content"][0]["text"], "Echo: hi");
    let lower = sent.to_ascii_lowercase();
    assert!(lower.contains("mcp-protocol-version: 2025-11-25"), "{sent}");
    assert!(lower.contains("authorization: bearer sesame"), "{sent}");
    assert!(lower.contains("accept: application/json, text/event-stream"), "{sent}");
    assert!(
        sent.contains(r#""method":"tools/call""#) && sent.contains(r#""progressToken":"toolslot-1""#),
        "{sent}"
    );
}

#[tokio::test]
async fn an_event_stream_is_read_past_notifications_to_the_answer() {
    let body = concat!(
        "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n",
        ": a comment\n\n",
        "data: {\"jsonrpc\":\"2.0\",\"id\":\"toolslot-1\",\"result\":{\"content\":[],\"isError\":true}}\n\n",
    );
    let (result, _) = call(http("200 OK", "text/event-stream", body.as_bytes()), 1 << 20).await;
    assert_eq!(result.unwrap()["isError"], true);
}

/// What a bad answer must come back as.
type Expected = fn(&RequestFailure) -> bool;

#[tokio::test]
async fn bad_answers_are_named_not_waited_for() {
    let long = format!(
        r#"{{"jsonrpc":"2.0","id":"toolslot-1","result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
        "x".repeat(5000)
    );
    let cases: Vec<(Vec<u8>, Expected, &str)> = vec![
        (
            http("200 OK", "application/json", long.as_bytes()),
            |e| matches!(e, RequestFailure::Unreadable(m) if m.contains("mcp.max_message_bytes")),
            "too long",
        ),
        (
            http("200 OK", "application/json", b"<html>"),
            |e| matches!(e, RequestFailure::Unreadable(m) if m.contains("not JSON-RPC")),
            "not JSON",
        ),
        (
            http("200 OK", "application/json", br#"{"jsonrpc":"2.0","id":7,"result":{}}"#),
            |e| matches!(e, RequestFailure::Unreadable(_)),
            "another id",
        ),
        (
            http(
                "200 OK",
                "application/json",
                br#"{"jsonrpc":"2.0","id":"toolslot-1","result":{"content":"nope"}}"#,
            ),
            |e| matches!(e, RequestFailure::Unreadable(m) if m.contains("not a tool result")),
            "not a tool result",
        ),
        (
            http("200 OK", "text/plain", b"hello"),
            |e| matches!(e, RequestFailure::Unreadable(m) if m.contains("neither JSON nor an event stream")),
            "text",
        ),
        (
            http(
                "200 OK",
                "text/event-stream",
                b"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n",
            ),
            |e| matches!(e, RequestFailure::Closed(m) if m.contains("without its answer")),
            "stream without answer",
        ),
        (
            http(
                "500 Internal Server Error",
                "application/json",
                br#"{"jsonrpc":"2.0","id":"toolslot-1","error":{"code":-32603,"message":"the disk is full"}}"#,
            ),
            |e| matches!(e, RequestFailure::Rpc(m) if m == "the disk is full"),
            "JSON-RPC error",
        ),
        (
            http("502 Bad Gateway", "text/html", b"<h1>bad</h1>"),
            |e| matches!(e, RequestFailure::Closed(m) if m.contains("HTTP 502")),
            "HTTP error",
        ),
        (
            b"not http at all\r\n\r\n".to_vec(),
            |e| matches!(e, RequestFailure::Closed(_)),
            "not HTTP",
        ),
    ];
    for (answer, expected, what) in cases {
        let (result, _) = call(answer, 4096).await;
        let e = result.expect_err(what);
        assert!(expected(&e), "{what}: {e:?}");
    }
}

#[tokio::test]
async fn a_result_nested_too_deep_is_flattened_not_lost() {
    let deep = format!("{}1{}", "[".repeat(40), "]".repeat(40));
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":"toolslot-1","result":{{"content":[{{"type":"text","text":"deep"}}],"structuredContent":{{"v":{deep}}}}}}}"#
    );
    let (result, _) = call(http("200 OK", "application/json", body.as_bytes()), 1 << 20).await;
    let result = result.unwrap();
    assert_eq!(result["content"][0]["text"], "deep");
    assert!(result.to_string().contains(crate::mcp::frame::TOO_DEEP), "{result}");
}

#[tokio::test]
async fn a_server_that_is_not_there_is_a_closed_connection() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let d = direct(&format!("http://127.0.0.1:{port}/mcp"), 4096);
    let hooks = Hooks {
        server: "s".into(),
        progress: None,
        ask: None,
    };
    let body = Direct::call_body("toolslot-1", "echo", None, None).unwrap();
    let e = request_failure(d.call("toolslot-1", body, &hooks).await).unwrap_err();
    assert!(
        matches!(&e, RequestFailure::Closed(m) if m.contains("refused") || m.contains("connect")),
        "{e:?}"
    );
}

#[tokio::test]
async fn a_stream_the_server_ends_early_is_resumed_after_its_last_event() {
    let first = concat!(
        "id: ev-1\nretry: 5\ndata:\n\n",
        "id: ev-2\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"toolslot-1\",\"progress\":1}}\n\n",
    );
    let rest = concat!(
        "data: not json at all\n\n",
        "data: {\"jsonrpc\":\"2.0\",\"id\":\"toolslot-1\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"resumed\"}]}}\n\n",
    );
    let (url, sent) = answering_each(vec![
        http("200 OK", "text/event-stream", first.as_bytes()),
        http("200 OK", "text/event-stream", rest.as_bytes()),
    ])
    .await;
    let d = direct(&url, 1 << 20);
    d.session.noting("s-1");
    let id = d.next_id();
    let body = Direct::call_body(&id, "echo", None, None).unwrap();
    let hooks = hooks();
    let (result, sent) = tokio::join!(d.call(&id, body, &hooks), sent);
    let result = request_failure(result).unwrap();
    assert_eq!(result["content"][0]["text"], "resumed");
    let resumed = String::from_utf8_lossy(&sent[1]).to_ascii_lowercase();
    assert!(resumed.starts_with("get /mcp"), "{resumed}");
    assert!(
        resumed.contains("last-event-id: ev-2") && resumed.contains("mcp-session-id: s-1"),
        "{resumed}"
    );
    assert!(resumed.contains("accept: text/event-stream"), "{resumed}");
}

#[tokio::test]
async fn a_stream_that_keeps_ending_early_ends_the_call_after_the_attempts() {
    let early = http("200 OK", "text/event-stream", b"id: ev-1\ndata:\n\n");
    let (url, sent) = answering_each(vec![early.clone(), early.clone(), early]).await;
    let d = direct(&url, 1 << 20);
    let id = d.next_id();
    let body = Direct::call_body(&id, "echo", None, None).unwrap();
    let hooks = hooks();
    let (result, _) = tokio::join!(d.call(&id, body, &hooks), sent);
    let e = request_failure(result).unwrap_err();
    assert!(matches!(&e, RequestFailure::Closed(m) if m.contains("resumed 2 times")), "{e:?}");
}

#[tokio::test]
async fn a_session_the_server_no_longer_knows_is_told_apart() {
    // The call never ran: the caller may send it again in a new session.
    let (url, sent) = answering(http("404 Not Found", "text/plain", b"no such session")).await;
    let d = direct(&url, 4096);
    d.session.noting("s-old");
    let body = Direct::call_body("toolslot-1", "echo", None, None).unwrap();
    let hooks = hooks();
    let (result, _) = tokio::join!(d.call("toolslot-1", body, &hooks), sent);
    assert!(matches!(result, Err(Failure::SessionGone)));
}

#[tokio::test]
async fn an_answer_that_cannot_be_read_is_cancelled_at_the_server() {
    let long = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":\"toolslot-1\",\"result\":{{\"content\":[],\"x\":\"{}\"}}}}",
        "x".repeat(9000)
    );
    let accepted = http("202 Accepted", "text/plain", b"");
    let (url, sent) = answering_each(vec![http("200 OK", "application/json", long.as_bytes()), accepted]).await;
    let d = direct(&url, 4096);
    let body = Direct::call_body("toolslot-1", "echo", None, None).unwrap();
    let hooks = hooks();
    let (result, sent) = tokio::join!(d.call("toolslot-1", body, &hooks), sent);
    assert!(matches!(request_failure(result), Err(RequestFailure::Unreadable(_))));
    let cancel = String::from_utf8_lossy(&sent[1]).to_string();
    assert!(
        cancel.contains("notifications/cancelled") && cancel.contains("\"requestId\":\"toolslot-1\""),
        "{cancel}"
    );
}
