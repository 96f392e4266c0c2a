//! Results in each provider's own format (docs/CONTRACT.md, "Results as the provider's
//! messages"): every recorded stream replayed through the binary with `--results`, and the
//! server's `?format=` on a round and on `rounds/last`. Each `round_complete`'s `messages`
//! must answer exactly its calls: the ids of the calls assembled, in their order, errors as
//! errors, refused, repaired and truncated calls included.

mod support;

use std::collections::VecDeque;
use std::path::PathBuf;

use serde_json::Value;
use support::*;

const FORMATS: [&str; 4] = ["anthropic", "openai-chat", "openai-responses", "gemini"];

/// Every recording the repository holds, one folder at a time (one session per folder).
fn recordings() -> Vec<Vec<PathBuf>> {
    let mut folders: Vec<PathBuf> = std::fs::read_dir(repo().join("tests/data/recorded"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    folders.push(repo().join("examples/streams"));
    folders.sort();
    folders
        .into_iter()
        .map(|dir| {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "sse" || e == "jsonl"))
                .collect();
            files.sort();
            files
        })
        .collect()
}

/// What one message or block says of one call: its id (None: Gemini's, for an id toolslot
/// invented), whether it is an error (None: the format has no flag) and its text.
#[derive(Debug, PartialEq)]
struct Answer {
    id: Option<String>,
    is_error: Option<bool>,
    text: String,
    name: Option<String>,
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts[0]["text"].as_str().unwrap().to_string(),
        other => panic!("content neither text nor parts: {other}"),
    }
}

/// Reads `messages` back into one answer per call, checking the format's envelope.
fn answers(format: &str, messages: &[Value]) -> Vec<Answer> {
    let s = |v: &Value| v.as_str().map(str::to_string);
    match format {
        "anthropic" => {
            assert!(messages.len() <= 1, "{messages:?}");
            messages
                .iter()
                .flat_map(|m| {
                    assert_eq!(m["role"], "user");
                    m["content"].as_array().unwrap().clone()
                })
                .map(|b| {
                    assert_eq!(b["type"], "tool_result");
                    Answer {
                        id: s(&b["tool_use_id"]),
                        is_error: b["is_error"].as_bool(),
                        text: text_of(&b["content"]),
                        name: None,
                    }
                })
                .collect()
        }
        "openai-chat" => messages
            .iter()
            .map(|m| {
                assert_eq!(m["role"], "tool");
                Answer {
                    id: s(&m["tool_call_id"]),
                    is_error: None,
                    text: text_of(&m["content"]),
                    name: None,
                }
            })
            .collect(),
        "openai-responses" => messages
            .iter()
            .map(|m| {
                assert_eq!(m["type"], "function_call_output");
                Answer {
                    id: s(&m["call_id"]),
                    is_error: None,
                    text: text_of(&m["output"]),
                    name: None,
                }
            })
            .collect(),
        "gemini" => {
            assert!(messages.len() <= 1, "{messages:?}");
            messages
                .iter()
                .flat_map(|m| {
                    assert_eq!(m["role"], "user");
                    m["parts"].as_array().unwrap().clone()
                })
                .map(|p| {
                    let f = &p["functionResponse"];
                    let response = f["response"].as_object().unwrap();
                    assert_eq!(response.len(), 1, "{f}");
                    let (key, text) = response.iter().next().unwrap();
                    Answer {
                        id: s(&f["id"]),
                        is_error: Some(key == "error"),
                        text: text.as_str().unwrap().to_string(),
                        name: s(&f["name"]),
                    }
                })
                .collect()
        }
        other => panic!("no such format {other}"),
    }
}

/// What the recordings showed, across every round checked.
#[derive(Default, Debug)]
struct Seen {
    errors: usize,
    repaired: usize,
    truncated: usize,
    calls: usize,
}

/// Checks a session's events: each `round_complete`'s `messages` answer its results one to
/// one, and the results answer the calls assembled, in the order they were assembled.
fn check_session(format: &str, events: &[Value], seen: &mut Seen) {
    let mut assembled: VecDeque<(u64, String, String)> = VecDeque::new();
    for event in events {
        match event["type"].as_str().unwrap() {
            "call_assembled" => {
                if !event["repair"].is_null() {
                    seen.repaired += 1;
                }
                assembled.push_back((
                    event["index"].as_u64().unwrap(),
                    event["id"].as_str().unwrap().to_string(),
                    event["name"].as_str().unwrap().to_string(),
                ));
            }
            "notice" if event["kind"] == "round_truncated" => seen.truncated += 1,
            "round_complete" => {
                let results = event["results"].as_array().unwrap();
                let got = answers(format, event["messages"].as_array().unwrap());
                assert_eq!(got.len(), results.len(), "{format}: {event}");
                for (i, (r, a)) in results.iter().zip(&got).enumerate() {
                    // One answer per call, by index, under the id the model gave the call.
                    assert_eq!(r["index"].as_u64(), Some(i as u64), "{event}");
                    let (index, id, sent_name) = assembled.pop_front().unwrap_or_else(|| panic!("a result without a call: {event}"));
                    assert_eq!((index, id.as_str()), (i as u64, r["tool_use_id"].as_str().unwrap()), "{event}");
                    let invented = format == "gemini" && id.strip_prefix("call_").is_some_and(|n| n.parse::<u64>().is_ok());
                    assert_eq!(a.id.as_deref(), (!invented).then_some(id.as_str()), "{format}: {event}");
                    assert_eq!(a.text, r["content"].as_str().unwrap(), "{format}");
                    if let Some(is_error) = a.is_error {
                        assert_eq!(Some(is_error), r["is_error"].as_bool(), "{format}: {event}");
                    }
                    if format == "gemini" {
                        assert_eq!(a.name.as_deref(), Some(sent_name.as_str()), "{event}");
                    }
                    seen.errors += usize::from(r["is_error"] == true);
                    seen.calls += 1;
                }
            }
            _ => {}
        }
    }
    assert!(assembled.is_empty(), "calls without a result: {assembled:?}");
}

#[test]
fn every_recording_gets_its_results_in_every_format() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "a note\n").unwrap();
    for format in FORMATS {
        let mut seen = Seen::default();
        for files in recordings() {
            let out = toolslot()
                .args(["replay", "--approve", "none", "--results", format, "--workspace"])
                .arg(ws.path())
                .args(&files)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "{files:?}: {err}");
            check_session(format, &json_lines(&out.stdout), &mut seen);
        }
        // The recordings hold refused calls, repaired ones and a round cut by the output limit:
        // a check that never met them would prove nothing about them.
        assert!(
            seen.calls >= 40 && seen.errors >= 5 && seen.repaired >= 2 && seen.truncated >= 1,
            "{format}: {seen:?}"
        );
    }
}

#[test]
fn an_unknown_results_format_is_exit_2_with_one_line() {
    let out = toolslot()
        .args(["replay", "--results", "openai"])
        .arg(repo().join("examples/streams/repaired.sse"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("unknown result format `openai`"), "{err}");
}

#[test]
fn the_server_gives_results_in_the_format_asked_for() {
    let s = Serve::new().start();
    std::fs::write(s.workspace.join("notes.txt"), "a note\n").unwrap();
    let id = s.session_as(&s.workspace, "read-only");
    let body = std::fs::read(repo().join("examples/streams/repaired.sse")).unwrap();
    let (status, sse) = s.http("POST", &format!("/v1/sessions/{id}/rounds?format=openai-chat"), &body);
    assert_eq!(status, 200, "{sse}");
    let events = events(&sse);
    let mut seen = Seen::default();
    check_session("openai-chat", &events, &mut seen);
    assert!(seen.calls >= 2 && seen.repaired >= 1, "{seen:?}");

    // The same round again, as Anthropic's, from the record of the last round.
    let (status, last) = s.http("GET", &format!("/v1/sessions/{id}/rounds/last?format=anthropic"), b"");
    assert_eq!(status, 200, "{last}");
    let last: Value = serde_json::from_str(&last).unwrap();
    let results = events.last().unwrap()["results"].as_array().unwrap();
    let got = answers("anthropic", last["messages"].as_array().unwrap());
    let ids: Vec<_> = results.iter().map(|r| r["tool_use_id"].as_str().map(str::to_string)).collect();
    assert_eq!(got.iter().map(|a| a.id.clone()).collect::<Vec<_>>(), ids);
    assert_eq!(
        got.iter().map(|a| a.is_error).collect::<Vec<_>>(),
        results.iter().map(|r| r["is_error"].as_bool()).collect::<Vec<_>>()
    );

    // Without `format`, no `messages`; an unknown one is refused before anything runs.
    let (_, plain) = s.http("GET", &format!("/v1/sessions/{id}/rounds/last"), b"");
    assert!(serde_json::from_str::<Value>(&plain).unwrap().get("messages").is_none(), "{plain}");
    let (status, refused) = s.http("GET", &format!("/v1/sessions/{id}/rounds/last?format=xml"), b"");
    assert_eq!(status, 400, "{refused}");
    assert!(refused.contains("unknown result format `xml`"), "{refused}");
    let (status, _) = s.http("POST", &format!("/v1/sessions/{id}/rounds?format=xml"), &body);
    assert_eq!(status, 400);
}
