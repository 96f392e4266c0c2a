//! Oversized structured results become handles, through the binary: the model reads a
//! structural summary, a later call passes a part of the value as `{"$handle", "path"}` (which
//! the tool, the approval request and the host see substituted), and retrieve_tool_result reads
//! it by JSON pointer.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use support::{Proc, eventually, free_port, listening, replay_calls, results_by_round as results};

/// Every event of a replay of `rounds` (one session), in a workspace inside `dir`.
fn replay(dir: &Path, config: &str, approve: &str, rounds: &[Vec<(&str, Value)>]) -> Vec<Value> {
    let file = dir.join("handles.toml");
    std::fs::write(&file, config).unwrap();
    replay_calls(dir, &file, approve, rounds)
}

/// Two extensions: one answers 3,000 records as JSON, the other echoes its arguments (and
/// needs approval).
const EXTENSIONS: &str = r#"
[[extensions]]
name = "list_records"
description = "Lists the records"
capabilities = ["read_only"]
command = ["python3", "-c", "import json; print(json.dumps({'records': [{'id': i, 'name': 'record %d' % i, 'tags': ['t'] * 3} for i in range(3000)], 'total': 3000}))"]
input_schema = '{"type":"object","properties":{}}'

[[extensions]]
name = "echo_args"
description = "Echoes its arguments"
capabilities = ["requires_approval"]
command = ["python3", "-c", "import sys; print('got ' + sys.stdin.read())"]
input_schema = '{"type":"object","properties":{"id":{"type":"integer"},"tags":{"type":"array"}},"required":["id"],"additionalProperties":false}'
"#;

#[test]
fn a_large_structured_result_is_summarized_and_its_parts_are_used_by_handle() {
    let dir = tempfile::tempdir().unwrap();
    let events = replay(
        dir.path(),
        EXTENSIONS,
        "all",
        &[
            vec![("list_records", json!({}))],
            vec![
                (
                    "echo_args",
                    json!({"id": {"$handle": "h1", "path": "/records/2/id"}, "tags": {"$handle": "h1", "path": "/records/2/tags"}}),
                ),
                ("retrieve_tool_result", json!({"ref": "h1", "path": "/records/2999"})),
                ("echo_args", json!({"id": {"$handle": "h1", "path": "/records/3000/id"}})),
                ("echo_args", json!({"id": {"$handle": "h7"}})),
                (
                    "retrieve_tool_result",
                    json!({"ref": "h1", "mode": "grep", "pattern": "record 2999\""}),
                ),
            ],
        ],
    );
    let rounds = results(&events);
    let listed = rounds[0][0]["content"].as_str().unwrap();
    // An extension's words are external content; inside, the summary.
    assert!(listed.starts_with("<external_content source=\"list_records\""), "{listed}");
    assert!(listed.contains("\n[JSON object {records: array, total: number}"), "{listed}");
    assert!(
        listed.contains("\"records\": array of 3000 × object {id: number, name: string, tags: array}; first 3: {\"id\":0,"),
        "{listed}"
    );
    assert!(
        listed.contains("[handle h1: ") && listed.contains(r#"pass {"$handle": "h1", "path": "/records/0/id"}"#),
        "{listed}"
    );
    assert!(listed.len() < 3000, "a summary, not a byte cut: {} bytes", listed.len());

    // The tool, the approval request and call_started all see the value, not the reference.
    let echoed = rounds[1][0]["content"].as_str().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(echoed.lines().find_map(|l| l.strip_prefix("got ")).unwrap()).unwrap(),
        json!({"id": 2, "tags": ["t", "t", "t"]})
    );
    let asked = events
        .iter()
        .find(|e| e["type"] == "approval_required" && e["name"] == "echo_args")
        .unwrap_or_else(|| panic!("no approval asked: {events:?}"));
    assert_eq!(
        asked["input"],
        json!({"id": 2, "tags": ["t", "t", "t"]}),
        "approval sees the real input"
    );

    let part: Value = serde_json::from_str(rounds[1][1]["content"].as_str().unwrap()).unwrap();
    assert_eq!(part["name"], "record 2999");

    for (i, field, says) in [(2, "id", "has nothing at `/records/3000/id`"), (3, "id", "no saved output `h7`")] {
        let r = &rounds[1][i];
        assert_eq!(r["is_error"], true, "{r}");
        let content = r["content"].as_str().unwrap();
        assert!(content.contains(says), "{content}");
        assert!(
            content.ends_with(&format!(
                r#"{{"error":"invalid_input","field":"{field}","side_effect":"not_started"}}"#
            )),
            "{content}"
        );
    }
    assert!(
        rounds[1][4]["content"].as_str().unwrap().contains("\"name\": \"record 2999\""),
        "{}",
        rounds[1][4]
    );
}

#[test]
fn handles_belong_to_their_session() {
    let dir = tempfile::tempdir().unwrap();
    replay(dir.path(), EXTENSIONS, "all", &[vec![("list_records", json!({}))]]);
    // Another session (another replay) has no h1 of its own, and cannot read the first one's.
    let events = replay(
        dir.path(),
        EXTENSIONS,
        "all",
        &[vec![("retrieve_tool_result", json!({"ref": "h1", "path": ""}))]],
    );
    let r = &results(&events)[0][0];
    assert_eq!(r["is_error"], true, "{r}");
    assert!(
        r["content"].as_str().unwrap().contains("no saved output `h1` in this session"),
        "{r}"
    );
}

#[test]
fn a_large_json_response_of_fetch_url_becomes_a_handle() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    std::fs::create_dir(&site).unwrap();
    let rows: Vec<Value> = (0..2000).map(|i| json!({"n": i, "square": i * i})).collect();
    std::fs::write(site.join("rows.json"), json!({"rows": rows}).to_string()).unwrap();
    std::fs::write(site.join("small.json"), r#"{"ok": true}"#).unwrap();
    let port = free_port();
    let server = Proc::spawn(
        Command::new("python3")
            .args(["-m", "http.server", &port.to_string(), "--bind", "127.0.0.1", "--directory"])
            .arg(&site)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    eventually(10, || listening(port));
    let config = "[network]\npolicy = \"allow\"\nallow_hosts = [\"127.0.0.1\"]\n";
    let events = replay(
        dir.path(),
        config,
        "all",
        &[vec![
            ("fetch_url", json!({"url": format!("http://127.0.0.1:{port}/rows.json")})),
            ("fetch_url", json!({"url": format!("http://127.0.0.1:{port}/small.json")})),
        ]],
    );
    drop(server);
    let r = &results(&events)[0];
    let big = r[0]["content"].as_str().unwrap();
    assert!(
        big.contains("[JSON object {rows: array}") && big.contains("\"rows\": array of 2000 × object {n: number, square: number}"),
        "{big}"
    );
    assert!(big.contains("[handle h1: ") && big.contains("\"path\": \"/rows/0/n\""), "{big}");
    let small = r[1]["content"].as_str().unwrap();
    assert!(
        small.contains("application/json)\n\n{\"ok\":true}"),
        "a small value is shown whole: {small}"
    );
}
