//! MCP results as servers send them, against real servers (server-everything from npm, and
//! tests/data/rich_mcp_server.py on the official Python SDK): the negotiated revision,
//! structured content checked against its output schema and given once, images passed on as
//! blocks, resource links, and a server's questions (elicitation) answered through
//! `toolslot serve` (the inputs endpoint, and the console's form in Chromium).

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;

/// `[[mcp.servers]]` for server-everything and the Python SDK fixture, listed from the start.
fn servers() -> String {
    let deps = deps();
    format!(
        r#"[mcp]
tool_cache_dir = ""
startup_timeout_ms = 60000

[[mcp.servers]]
name = "everything"
command = ["node", "{}", "stdio"]
defer = false

[[mcp.servers]]
name = "rich"
command = ["{}", "{}"]
defer = false
"#,
        deps.join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
            .display(),
        deps.join("venv/bin/python").display(),
        repo().join("tests/data/rich_mcp_server.py").display()
    )
}

#[test]
fn mcp_check_prints_the_negotiated_revision() {
    let deps = deps();
    let check = |args: &[&str]| -> Value {
        let out = toolslot().args(["mcp-check", "--name", "s", "--"]).args(args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_str(String::from_utf8(out.stdout).unwrap().lines().next().unwrap()).unwrap()
    };
    let everything = deps.join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    // server-everything predates the newest revision: discovery fails and `initialize` settles
    // on the newest one it speaks; the Python SDK speaks the newest.
    assert_eq!(check(&["node", everything.to_str().unwrap(), "stdio"])["protocol"], "2025-11-25");
    let python = deps.join("venv/bin/python");
    let fixture = repo().join("tests/data/rich_mcp_server.py");
    assert_eq!(
        check(&[python.to_str().unwrap(), fixture.to_str().unwrap()])["protocol"],
        "2026-07-28"
    );
}

#[test]
fn results_reach_the_model_and_the_host_as_the_servers_sent_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rich.toml");
    std::fs::write(
        &config,
        format!("[approval]\nmode = \"full-auto\"\n[output]\nblock_max_bytes = 1000\n{}", servers()),
    )
    .unwrap();
    let stream = dir.path().join("round.sse");
    std::fs::write(
        &stream,
        openai_stream(&[
            ("everything__get-structured-content", json!({"location": "Chicago"})),
            ("rich__weather", json!({"city": "Oslo"})),
            ("rich__records", json!({"count": 3000})),
            ("rich__broken_forecast", json!({"city": "Oslo"})),
            ("rich__pixel", json!({})),
            ("everything__get-tiny-image", json!({})),
            ("everything__get-resource-links", json!({"count": 2})),
            ("rich__book_table", json!({"restaurant": "Chez Panisse"})),
            ("rich__bad_pictures", json!({})),
        ]),
    )
    .unwrap();
    let started = Instant::now();
    let out = toolslot()
        .env("TOOLSLOT_OVERFLOW__DIR", dir.path().join("overflow"))
        .args(["replay", "--workspace"])
        .arg(dir.path())
        .arg("--config")
        .arg(&config)
        .arg(&stream)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let events = json_lines(&out.stdout);
    let results = events.last().unwrap()["results"].as_array().unwrap().clone();
    let content = |i: usize| results[i]["content"].as_str().unwrap().to_string();

    // Structured content once, not as its text copy too.
    let chicago = content(0);
    let weather = r#"{"conditions":"Light rain / drizzle","humidity":82,"temperature":36}"#;
    assert_eq!(chicago.matches(weather).count(), 1, "{chicago}");
    assert!(
        !chicago.contains("\"temperature\": 36"),
        "the pretty text copy is not given too: {chicago}"
    );
    assert_eq!(content(1).matches("\"temperature\":21.5").count(), 1, "{}", content(1));
    // A large structured answer becomes a handle.
    assert!(
        content(2).contains("\"items\": array of 3000 × object") && content(2).contains("[handle h1: "),
        "{}",
        content(2)
    );
    // A structured answer that breaks the declared output schema is a tool_error naming the path.
    assert_eq!(results[3]["is_error"], true);
    assert!(
        content(3).contains("does not match the tool's outputSchema at `/temperature`"),
        "{}",
        content(3)
    );
    assert!(
        content(3).contains(r#"{"error":"tool_error","field":"temperature"}"#),
        "{}",
        content(3)
    );
    // Images: within block_max_bytes passed on as blocks, larger ones saved and described.
    let pixel = &results[4];
    assert!(
        content(4).contains("[image: image/png, 70 bytes: passed to the host as content block 1]"),
        "{}",
        content(4)
    );
    let blocks = pixel["blocks"].as_array().unwrap();
    assert_eq!(blocks[0], json!({"type": "text", "text": content(4)}));
    assert_eq!(
        (blocks[1]["type"].as_str(), blocks[1]["mimeType"].as_str()),
        (Some("image"), Some("image/png"))
    );
    let logo = content(5);
    assert!(
        logo.contains("too large to pass on (over output.block_max_bytes); saved as "),
        "{logo}"
    );
    let saved = logo.split("saved as ").nth(1).unwrap().split(']').next().unwrap();
    assert!(
        std::fs::read(saved).unwrap().starts_with(b"\x89PNG"),
        "the saved image is the PNG itself"
    );
    assert!(results[5].get("blocks").is_none(), "nothing left to pass on");
    assert!(results[0].get("blocks").is_none(), "text alone has no blocks");
    // Resource links, with how to read them.
    assert!(
        content(6).contains(r#"read it with read_mcp_resource {"server":"everything","uri":"demo://resource/dynamic/text/2"}"#),
        "{}",
        content(6)
    );
    // Blocks no provider could read are not passed on (the host's next request would be
    // refused whole), and the model is told why.
    let bad = content(8);
    assert!(
        bad.contains(
            "[image: image/png, 41 bytes: not passed on: not an image the model providers read (PNG, JPEG, GIF or WebP); saved as "
        ),
        "{bad}"
    );
    assert!(bad.contains("not passed on: its data is not base64"), "{bad}");
    assert!(results[8].get("blocks").is_none(), "nothing passed on: {}", results[8]);
    // Nobody can answer a question here: it is declined at once, not after a wait.
    assert!(content(7).contains("not booked (decline)"), "{}", content(7));
    assert!(!events.iter().any(|e| e["type"] == "input_required"), "no host to ask");
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "the question did not wait for the timeout"
    );
}

#[test]
fn elicitation_is_announced_only_where_a_host_can_answer() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rich.toml");
    std::fs::write(&config, servers()).unwrap();
    let out = toolslot()
        .args(["catalog", "--format", "json", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let names: Vec<String> = serde_json::from_slice::<Vec<Value>>(&out.stdout)
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&"everything__echo".to_string()), "{names:?}");
    // server-everything offers its elicitation tool only to clients that announce the capability.
    assert!(!names.contains(&"everything__trigger-elicitation-request".to_string()), "{names:?}");
    let s = start(&servers());
    let (status, tools) = s.http("GET", "/v1/tools?format=anthropic", b"");
    assert_eq!(status, 200);
    assert!(
        tools.contains("everything__trigger-elicitation-request"),
        "serve answers questions: {tools}"
    );
}

/// A full-auto server in a folder of its own, with `mcp` (its MCP tables).
fn start(mcp: &str) -> Served {
    Serve::new().config(&format!("[approval]\nmode = \"full-auto\"\n{mcp}")).start()
}

fn open_session(s: &Served) -> String {
    s.open(&json!({"workspace": s.workspace}))
}

/// Runs a round calling `tool` with `args` in its own thread; answers the first question of
/// the session with `answer` once it is asked (after checking what a wrong answer gets);
/// returns the round's events.
fn round_answering(s: &Served, tool: &str, args: Value, answer: Option<Value>) -> Vec<Value> {
    let id = open_session(s);
    let api = s.api.clone();
    let body = openai_stream(&[(tool, args)]);
    let path = format!("/v1/sessions/{id}/rounds");
    let round = std::thread::spawn(move || api.http("POST", &path, body.as_bytes()));
    if let Some(answer) = answer {
        let inputs = format!("/v1/sessions/{id}/inputs/1");
        let deadline = Instant::now() + Duration::from_secs(60);
        // Nothing waits yet: 404, until the server's question arrives.
        loop {
            let (status, text) = s.http("POST", &inputs, br#"{"action": "accept", "content": {"guests": "many"}}"#);
            if status == 400 {
                assert!(text.contains("does not match the requested schema"), "{text}");
                break;
            }
            assert_eq!(status, 404, "{text}");
            assert!(Instant::now() < deadline, "the question never came");
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(s.http("POST", &inputs, br#"{"action": "maybe"}"#).0, 400);
        assert_eq!(
            s.http("POST", &format!("/v1/sessions/{id}/inputs/9"), br#"{"action": "decline"}"#)
                .0,
            404
        );
        let (status, text) = s.http("POST", &inputs, answer.to_string().as_bytes());
        assert_eq!(status, 204, "{text}");
        assert_eq!(s.http("POST", &inputs, br#"{"action": "decline"}"#).0, 404, "answered once");
    }
    let (status, sse) = round.join().unwrap();
    assert_eq!(status, 200);
    events(&sse)
}

fn result_text(events: &[Value]) -> String {
    events.last().unwrap()["results"][0]["content"].as_str().unwrap().to_string()
}

#[test]
fn a_servers_question_is_answered_over_the_inputs_endpoint() {
    let s = start(&servers());
    // The Python SDK on the newest revision asks by answering "input required".
    let accepted = round_answering(
        &s,
        "rich__book_table",
        json!({"restaurant": "Chez Panisse"}),
        Some(json!({"action": "accept", "content": {"name": "Ada", "guests": 4, "terrace": true}})),
    );
    let asked = accepted.iter().find(|e| e["type"] == "input_required").unwrap();
    assert_eq!(
        (asked["n"].as_u64(), asked["index"].as_u64(), asked["server"].as_str()),
        (Some(1), Some(0), Some("rich"))
    );
    assert!(asked["message"].as_str().unwrap().contains("Chez Panisse"));
    assert_eq!(asked["requested_schema"]["properties"]["guests"]["type"], "integer");
    assert!(accepted.iter().any(|e| e["type"] == "input_answered" && e["action"] == "accept"));
    assert!(
        result_text(&accepted).contains("booked Chez Panisse for Ada, 4 guests, terrace=True"),
        "{}",
        result_text(&accepted)
    );

    let declined = round_answering(
        &s,
        "rich__book_table",
        json!({"restaurant": "Noma"}),
        Some(json!({"action": "decline"})),
    );
    assert!(result_text(&declined).contains("not booked (decline)"));

    // server-everything on an older revision asks with an `elicitation/create` request.
    let everything = round_answering(
        &s,
        "everything__trigger-elicitation-request",
        json!({}),
        Some(json!({"action": "accept", "content": {"name": "Grace Hopper", "integer": 7, "email": "grace@example.org"}})),
    );
    let text = result_text(&everything);
    assert!(
        text.contains("- Name: Grace Hopper") && text.contains("- Favorite Integer: 7"),
        "{text}"
    );
    let cancelled = round_answering(
        &s,
        "everything__trigger-elicitation-request",
        json!({}),
        Some(json!({"action": "cancel"})),
    );
    assert!(
        result_text(&cancelled).contains("User cancelled the elicitation dialog"),
        "{}",
        result_text(&cancelled)
    );
}

#[test]
fn a_question_on_a_calls_own_stream_over_streamable_http_is_answered() {
    // The growing fixture on the revisions with sessions, over HTTP: its question comes on the
    // call's own event stream, which a call posted straight from a session's thread reads.
    let port = free_port();
    let script = repo().join("tests/data/growing_mcp_server.py");
    let mut server = std::process::Command::new(deps().join("venv/bin/python"))
        .arg(script)
        .args(["--http", &port.to_string(), "--legacy"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the fixture never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    let s = start(&format!(
        "[mcp]\ntool_cache_dir = \"\"\n[[mcp.servers]]\nname = \"net\"\nurl = \"http://127.0.0.1:{port}/mcp\"\ndefer = false\n"
    ));
    // A session thread's first calls go through the shared connection while its own opens.
    let mut posted = false;
    let names = ["Ada", "Grace", "Barbara", "Frances", "Radia", "Hedy"];
    // Until one is posted straight (the thread's own connection opens in the background:
    // slowly on a loaded machine), every name at least once, within half a minute.
    let deadline = Instant::now() + Duration::from_secs(30);
    for (n, name) in names.iter().cycle().enumerate() {
        if n >= names.len() && (posted || Instant::now() > deadline) {
            break;
        }
        let events = round_answering(
            &s,
            "net__asked",
            json!({}),
            Some(json!({"action": "accept", "content": {"name": name}})),
        );
        let text = result_text(&events);
        assert!(text.contains(&format!("answered {name} as request")), "{text}");
        posted |= text.contains("as request 'toolslot-");
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = server.kill();
    let _ = server.wait();
    assert!(posted, "no call was posted straight to the server");
}

#[test]
fn an_unanswered_question_is_declined_after_the_timeout() {
    let s = start(&format!(
        "{}\n",
        servers().replace("tool_cache_dir = \"\"", "tool_cache_dir = \"\"\nelicitation_timeout_ms = 1500")
    ));
    let started = Instant::now();
    let events = round_answering(&s, "everything__trigger-elicitation-request", json!({}), None);
    assert!(events.iter().any(|e| e["type"] == "input_required"));
    assert!(events.iter().any(|e| e["type"] == "input_answered" && e["action"] == "decline"));
    assert!(
        result_text(&events).contains("User declined to provide the requested information"),
        "{}",
        result_text(&events)
    );
    assert!(started.elapsed() < Duration::from_secs(40));
}

#[test]
fn the_console_answers_a_question_with_a_form_in_a_real_browser() {
    let s = start(&servers());
    let id = open_session(&s);
    let mut node = s.console_watching("input_test.mjs", &id);
    let body = openai_stream(&[("everything__trigger-elicitation-request", json!({}))]);
    let (status, sse) = s.http("POST", &format!("/v1/sessions/{id}/rounds"), body.as_bytes());
    assert_eq!(status, 200);
    assert!(node.wait().unwrap().success(), "the console test failed");
    let text = result_text(&events(&sse));
    assert!(
        text.contains("- Name: Ada Lovelace") && text.contains("- Agreed to terms: true") && text.contains("- Favorite Integer: 7"),
        "{text}"
    );
}
