//! OpenTelemetry export, checked from what a real OTLP receiver decoded
//! (tests/data/otlp_receiver.py, OpenTelemetry's own protobuf definitions): the span tree of a
//! replayed round, a refused call's `error.type`, content only when asked, the trace context an
//! MCP server (the official Python SDK) reads in `_meta`, a worker's span in the dispatcher's
//! trace over NATS, a host's `traceparent` honoured by `serve`, and a dead or hung collector
//! costing a counted drop and nothing else.

mod support;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::nats::{Nats, Replay, serial, sse, worker, write_config};
use support::{Bed, Proc, eventually, free_port, mcp_server, python, repo};

/// A running receiver; what it decoded is in `out`, one JSON object a line.
struct Receiver {
    _proc: Proc,
    out: PathBuf,
    url: String,
    _dir: tempfile::TempDir,
}

impl Receiver {
    fn start() -> Receiver {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("received.jsonl");
        let mut proc = Proc::spawn(
            std::process::Command::new(python())
                .arg(repo().join("tests/data/otlp_receiver.py"))
                .arg(&out)
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit()),
        );
        let mut line = String::new();
        BufReader::new(proc.child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port: u16 = line.trim().parse().unwrap_or_else(|_| panic!("receiver said {line:?}"));
        Receiver {
            _proc: proc,
            out,
            url: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        }
    }

    /// Everything received so far.
    fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn spans(&self) -> Vec<Value> {
        self.received().into_iter().filter(|v| v["kind"] == "span").collect()
    }

    /// The spans, once `done` holds of them (at most 30 s).
    fn spans_when(&self, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let ok = eventually(30, || done(&self.spans()));
        let spans = self.spans();
        assert!(ok, "the receiver never got what was expected: {spans:#?}");
        spans
    }

    /// The `[telemetry]` table exporting here, batches sent every 50 ms.
    fn table(&self, extra: &str) -> String {
        format!("[telemetry]\notlp_endpoint = \"{}\"\nschedule_delay_ms = 50\n{extra}\n", self.url)
    }
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

fn one<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    let found = named(spans, name);
    assert_eq!(found.len(), 1, "one `{name}` span: {spans:#?}");
    found[0]
}

/// A deny rule on `write_file`, so one call of a round is refused by policy.
const DENY_WRITES: &str = "[[policy.rules]]\ntool = \"write_file\"\ndecision = \"deny\"\nreason = \"no writes in this test\"\n";

#[test]
fn a_replayed_round_is_one_trace_of_its_calls_without_their_content() {
    let receiver = Receiver::start();
    let bed = Bed::new();
    std::fs::write(bed.ws.join("notes.txt"), "secret-looking line\n").unwrap();
    let config = format!("{}{DENY_WRITES}", receiver.table(""));
    let run = bed.replay(
        &config,
        &[
            ("read_file", json!({"path": "notes.txt"})),
            ("write_file", json!({"path": "out.txt", "content": "x"})),
        ],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let spans = receiver.spans_when(|s| named(s, "round").len() == 1 && s.len() >= 3);

    let round = one(&spans, "round");
    assert_eq!(round["service"], "toolslot");
    assert_eq!(round["parent_span_id"], "", "a replayed round starts its own trace");
    assert!(round["attributes"]["gen_ai.conversation.id"].is_string(), "{round}");
    assert!(round["attributes"]["toolslot.round"].is_i64(), "{round}");

    let read = one(&spans, "execute_tool read_file");
    assert_eq!(read["trace_id"], round["trace_id"]);
    assert_eq!(read["parent_span_id"], round["span_id"], "a call is a child of its round");
    let a = &read["attributes"];
    assert_eq!(a["gen_ai.operation.name"], "execute_tool");
    assert_eq!(a["gen_ai.tool.name"], "read_file");
    assert_eq!(a["gen_ai.tool.call.id"], "call_0");
    assert_eq!(a["gen_ai.tool.type"], "function");
    assert_eq!(a["toolslot.call.index"], 0);
    assert_eq!(a["toolslot.approval.decision"], "run");
    assert!(a.get("error.type").is_none(), "{read}");
    // Arguments and results stay out unless capture_content asks.
    assert!(
        a.get("gen_ai.tool.call.arguments").is_none() && a.get("gen_ai.tool.call.result").is_none(),
        "{read}"
    );
    assert!(
        !serde_json::to_string(&spans).unwrap().contains("secret-looking"),
        "no content exported"
    );

    let refused = one(&spans, "execute_tool write_file");
    assert_eq!(refused["parent_span_id"], round["span_id"]);
    let a = &refused["attributes"];
    assert_eq!(a["error.type"], "not_approved", "{refused}");
    assert_eq!(a["toolslot.approval.decision"], "refuse");
    assert_eq!(a["toolslot.approval.decided_by"], "rule");
    assert_eq!(a["toolslot.policy.rule"], "config#0");
    assert_eq!(refused["status"], 2, "status ERROR: {refused}");

    // The duration histogram came with the last export, at exit.
    let metrics: Vec<Value> = receiver.received().into_iter().filter(|v| v["kind"] == "metric").collect();
    let tool = metrics
        .iter()
        .find(|m| m["name"] == "gen_ai.execute_tool.duration")
        .unwrap_or_else(|| panic!("no tool duration histogram: {metrics:#?}"));
    assert_eq!(tool["unit"], "s");
    let point = &tool["points"][0];
    assert_eq!(point["attributes"]["gen_ai.tool.name"], "read_file", "{tool}");
}

#[test]
fn capture_content_puts_arguments_and_results_on_the_call_span() {
    let receiver = Receiver::start();
    let bed = Bed::new();
    std::fs::write(bed.ws.join("notes.txt"), "the line to find\n").unwrap();
    // The write asks for approval (mode `ask`), which the replay grants.
    let run = bed.replay(
        &receiver.table("capture_content = true"),
        &[
            ("read_file", json!({"path": "notes.txt"})),
            ("write_file", json!({"path": "new.txt", "content": "written"})),
        ],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let spans = receiver.spans_when(|s| named(s, "execute_tool read_file").len() == 1);
    let a = &one(&spans, "execute_tool read_file")["attributes"];
    assert!(a["gen_ai.tool.call.arguments"].as_str().unwrap().contains("notes.txt"), "{a}");
    assert!(a["gen_ai.tool.call.result"].as_str().unwrap().contains("the line to find"), "{a}");
    let write = &one(&spans, "execute_tool write_file")["attributes"];
    assert_eq!(write["toolslot.approval.decided_by"], "host");
    assert!(write["toolslot.approval.wait_ms"].is_i64(), "the host's wait on the span: {write}");
    assert!(a.get("toolslot.approval.wait_ms").is_none(), "a read is not asked: {a}");
    // The approval's wait, in its histogram.
    let received = receiver.received();
    let waited = received
        .iter()
        .find(|v| v["kind"] == "metric" && v["name"] == "toolslot.approval.wait.duration")
        .unwrap_or_else(|| panic!("no approval wait histogram: {received:#?}"));
    assert_eq!(
        waited["points"][0]["attributes"]["toolslot.approval.outcome"], "answered",
        "{waited}"
    );
}

/// The spans of a round's calls, by index.
fn by_index(spans: &[Value], index: i64) -> &Value {
    let found: Vec<&Value> = spans
        .iter()
        .filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with("execute_tool ")) && s["attributes"]["toolslot.call.index"] == index)
        .collect();
    assert_eq!(found.len(), 1, "one call span of index {index}: {spans:#?}");
    &found[0]["attributes"]
}

#[test]
fn a_call_span_says_what_repair_the_output_cut_and_the_loop_guard_did() {
    let receiver = Receiver::start();
    let bed = Bed::new();
    std::fs::write(bed.ws.join("notes.txt"), "a line\n").unwrap();
    let config = format!("{}[loop_guard]\nfailure_warn = 2\nfailure_pause = 3\n", receiver.table(""));
    let run = bed.replay(
        &config,
        &[
            // Sent as a JSON string holding the object: repaired by `decoded_string`.
            ("read_file", json!("{\"path\": \"notes.txt\"}")),
            // About 109 KB printed: cut to `output.shell_max_bytes`, the whole saved.
            ("exec_shell", json!({"command": "seq 1 20000"})),
            // Three failures in a row: the second warns, the third pauses the session.
            ("read_file", json!({"path": "missing-1.txt"})),
            ("read_file", json!({"path": "missing-2.txt"})),
            ("read_file", json!({"path": "missing-3.txt"})),
        ],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let spans = receiver.spans_when(|s| named(s, "execute_tool read_file").len() == 4 && named(s, "execute_tool exec_shell").len() == 1);

    let repaired = by_index(&spans, 0);
    assert_eq!(repaired["toolslot.repair"], "decoded_string", "{repaired}");
    assert!(repaired.get("toolslot.output.truncated").is_none(), "{repaired}");
    assert!(repaired.get("toolslot.loop_guard").is_none(), "{repaired}");

    let shell = by_index(&spans, 1);
    assert!(shell.get("toolslot.repair").is_none(), "valid as sent: {shell}");
    assert_eq!(shell["toolslot.output.truncated"], true, "{shell}");
    let reference = shell["toolslot.output.overflow_ref"]
        .as_str()
        .unwrap_or_else(|| panic!("no overflow ref: {shell}"));
    let results = run.results();
    let text = results[1]["content"].as_str().unwrap();
    assert!(text.contains(&format!("ref={reference}")), "the ref the model was given: {text}");

    assert!(by_index(&spans, 2).get("toolslot.loop_guard").is_none(), "{spans:#?}");
    assert_eq!(by_index(&spans, 3)["toolslot.loop_guard"], "warn");
    assert_eq!(by_index(&spans, 4)["toolslot.loop_guard"], "pause");
}

#[test]
fn an_mcp_call_carries_its_trace_context_to_the_server_in_meta() {
    let receiver = Receiver::start();
    let bed = Bed::new();
    let command = vec![
        python().display().to_string(),
        repo().join("tests/data/trace_mcp_server.py").display().to_string(),
    ];
    let config = format!("{}{}", receiver.table(""), mcp_server("trace", &command, ""));
    let run = bed.replay(&config, &[("trace__trace_echo", json!({}))]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    // The server's answer, inside the envelope of external content.
    let content = run.content(0);
    let line = content
        .lines()
        .find(|l| l.starts_with("{\"traceparent\""))
        .unwrap_or_else(|| panic!("{content}"));
    let seen: Value = serde_json::from_str(line).unwrap();
    let traceparent = seen["traceparent"]
        .as_str()
        .unwrap_or_else(|| panic!("no traceparent in _meta: {seen}"));

    let spans = receiver.spans_when(|s| named(s, "tools/call trace_echo").len() == 1 && named(s, "round").len() == 1);
    let request = one(&spans, "tools/call trace_echo");
    let call = one(&spans, "execute_tool trace__trace_echo");
    let round = one(&spans, "round");
    assert_eq!(request["parent_span_id"], call["span_id"], "the request is a child of its call");
    assert_eq!(call["parent_span_id"], round["span_id"]);
    assert_eq!(request["span_kind"], 3, "a client span");
    let a = &request["attributes"];
    assert_eq!(a["mcp.method.name"], "tools/call");
    assert_eq!(a["network.transport"], "pipe");
    // What the server read names the request's own span in the round's trace.
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "{traceparent}");
    assert_eq!(parts[1], request["trace_id"].as_str().unwrap(), "{traceparent}");
    assert_eq!(parts[2], request["span_id"].as_str().unwrap(), "{traceparent}");
    assert_eq!(parts[3], "01", "sampled");
}

#[test]
fn a_remote_call_runs_in_the_dispatchers_trace() {
    let _one = serial();
    let receiver = Receiver::start();
    let nats = Nats::start();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let routes = r#"{ "exec_shell" = "shell" }"#;
    let config = write_config(dir.path(), &nats, routes, "auto", &receiver.table(""));
    let _w = worker(&config, "shell", &[("OTEL_SERVICE_NAME", "toolslot-worker")]);
    let mut replay = Replay::start(&config, &ws, &[sse(&[("exec_shell", json!({"command": "echo remote"}))])]);
    let results = replay.round(1, 60);
    assert_eq!(results[0]["is_error"], false, "{results:?}");

    let spans = receiver.spans_when(|s| {
        named(s, "remote_run exec_shell").len() == 1
            && named(s, "remote_call exec_shell").len() == 1
            && named(s, "execute_tool exec_shell").len() == 1
    });
    let dispatched = one(&spans, "remote_call exec_shell");
    let ran = one(&spans, "remote_run exec_shell");
    let call = one(&spans, "execute_tool exec_shell");
    assert_eq!(dispatched["parent_span_id"], call["span_id"]);
    assert_eq!(ran["trace_id"], call["trace_id"], "one trace shows both processes");
    assert_eq!(
        ran["parent_span_id"], dispatched["span_id"],
        "the worker's run is a child of the dispatch"
    );
    assert_eq!(ran["service"], "toolslot-worker");
    assert_eq!(dispatched["service"], "toolslot");
}

#[test]
fn serve_makes_a_round_a_child_of_the_hosts_traceparent() {
    let receiver = Receiver::start();
    let bed = Bed::new();
    std::fs::write(bed.ws.join("a.txt"), "a\n").unwrap();
    let served = bed.serve(&receiver.table(""));
    let session = served.session(&bed.ws);
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let traceparent = format!("00-{trace}-{parent}-01");
    let auth = served.token.as_ref().map(|t| format!("Bearer {t}"));
    let mut headers = vec![
        ("Host", served.addr.as_str()),
        ("traceparent", traceparent.as_str()),
        ("tracestate", "vendor=1"),
    ];
    if let Some(a) = auth.as_deref() {
        headers.push(("Authorization", a));
    }
    let body = support::openai_stream(&[("read_file", json!({"path": "a.txt"}))]);
    let (status, sse) = served.request(
        "POST",
        &format!("/v1/sessions/{session}/rounds?dialect=openai-chat"),
        &headers,
        body.as_bytes(),
    );
    assert_eq!(status, 200, "{sse}");
    assert!(sse.contains("round_complete"), "{sse}");

    let spans = receiver
        .spans_when(|s| named(s, "execute_tool read_file").len() == 1 && s.iter().any(|x| x["trace_id"] == trace && x["name"] == "round"));
    let request = spans
        .iter()
        .find(|s| s["trace_id"] == trace && s["attributes"]["http.request.method"] == "POST" && s["parent_span_id"] == parent)
        .unwrap_or_else(|| panic!("no server span under the host's: {spans:#?}"));
    assert_eq!(request["name"], "POST /v1/sessions/{id}/rounds");
    assert_eq!(request["span_kind"], 2, "a server span");
    let round = one(&spans, "round");
    assert_eq!(round["trace_id"], trace);
    assert_eq!(round["parent_span_id"], request["span_id"], "the round is a child of the request");
    let call = one(&spans, "execute_tool read_file");
    assert_eq!(call["parent_span_id"], round["span_id"]);

    // The export's counts are on `/metrics`, beside the series it always had.
    let mut get = vec![("Host", served.addr.as_str())];
    if let Some(a) = auth.as_deref() {
        get.push(("Authorization", a));
    }
    let exported = |text: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix("toolslot_telemetry_spans_exported_total "))
            .and_then(|n| n.trim().parse::<u64>().ok())
    };
    let mut last = String::new();
    let counted = eventually(30, || {
        last = served.request("GET", "/metrics", &get, b"").1;
        exported(&last).is_some_and(|n| n >= 3)
    });
    assert!(counted, "the spans exported are counted: {last}");
    assert!(last.contains("toolslot_telemetry_spans_failed_total 0"), "{last}");
    assert!(last.contains("toolslot_telemetry_spans_dropped_total 0"), "{last}");
    assert!(last.contains("toolslot_telemetry_spans_undelivered "), "{last}");
}

#[test]
fn a_dead_collector_costs_a_counted_drop_and_the_call_goes_on() {
    let bed = Bed::new();
    std::fs::write(bed.ws.join("a.txt"), "a\n").unwrap();
    // Nothing listens on this port.
    let port = free_port();
    let config = format!("[telemetry]\notlp_endpoint = \"http://127.0.0.1:{port}\"\nschedule_delay_ms = 50\n");
    let run = bed.replay(&config, &[("read_file", json!({"path": "a.txt"}))]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.results()[0]["is_error"], false);
    assert!(run.stderr.contains("spans not delivered"), "the drop is counted: {}", run.stderr);
    assert!(run.elapsed < Duration::from_secs(20), "{:?}", run.elapsed);
}

#[test]
fn a_hung_collector_delays_only_the_exit_by_its_timeout() {
    // Accepts connections and never answers.
    let hole = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = hole.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let mut conns = Vec::new();
        let start = Instant::now();
        hole.set_nonblocking(true).unwrap();
        while start.elapsed() < Duration::from_secs(30) {
            if let Ok((c, _)) = hole.accept() {
                conns.push(c);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let bed = Bed::new();
    std::fs::write(bed.ws.join("a.txt"), "a\n").unwrap();
    let config = format!("[telemetry]\notlp_endpoint = \"http://127.0.0.1:{port}\"\nschedule_delay_ms = 50\nexport_timeout_ms = 1000\n");
    let run = bed.replay(&config, &[("read_file", json!({"path": "a.txt"}))]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.results()[0]["is_error"], false);
    assert!(run.stderr.contains("spans not delivered"), "{}", run.stderr);
    // The export timeout, twice at most (a batch in flight, then the last one), plus start-up.
    assert!(run.elapsed < Duration::from_secs(15), "{:?}", run.elapsed);
    drop(held);
}

/// The spans exported once a round of trace `trace` is: `toolslot mcp` under `env` answers one
/// `tools/call` of `read_file` whose `_meta` carries `traceparent`.
fn spans_of_an_mcp_call(env: &[(&str, &str)], trace: &str, traceparent: &str) -> Vec<Value> {
    use std::io::Write;
    let receiver = Receiver::start();
    let bed = Bed::new();
    std::fs::write(bed.ws.join("a.txt"), "a\n").unwrap();
    let config = bed.config(&receiver.table(""));
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_toolslot"));
    cmd.args(["mcp", "--workspace"])
        .arg(&bed.ws)
        .arg("--config")
        .arg(&config)
        .env("TOOLSLOT_AUDIT__LEDGER_DIR", "")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut proc = Proc::spawn(&mut cmd);
    let mut stdin = proc.child.stdin.take().unwrap();
    let mut stdout = BufReader::new(proc.child.stdout.take().unwrap());
    let mut send = |v: Value| writeln!(stdin, "{v}").unwrap();
    let mut answer = String::new();
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}));
    stdout.read_line(&mut answer).unwrap();
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "read_file", "arguments": {"path": "a.txt"},
        "_meta": {"traceparent": traceparent}}}));
    answer.clear();
    stdout.read_line(&mut answer).unwrap();
    assert!(answer.contains("\"id\":2") && !answer.contains("isError\":true"), "{answer}");
    receiver.spans_when(|s| s.iter().any(|x| x["trace_id"] == trace && x["name"] == "round"))
}

#[test]
fn an_mcp_clients_traceparent_makes_the_round_a_child_of_its_trace() {
    let trace = "0af7651916cd43dd8448eb211c80319c";
    let parent = "b7ad6b7169203331";
    let spans = spans_of_an_mcp_call(&[], trace, &format!("00-{trace}-{parent}-01"));
    let server = spans
        .iter()
        .find(|s| s["trace_id"] == trace && s["parent_span_id"] == parent)
        .unwrap_or_else(|| panic!("no MCP server span under the client's: {spans:#?}"));
    assert_eq!(server["name"], "tools/call read_file");
    assert_eq!(server["span_kind"], 2, "a server span");
    let round = spans.iter().find(|s| s["trace_id"] == trace && s["name"] == "round").unwrap();
    assert_eq!(
        round["parent_span_id"], server["span_id"],
        "the round is a child of the MCP request"
    );
}

#[test]
fn otel_traces_sampler_always_on_exports_a_trace_its_client_did_not_sample() {
    let trace = "5af7651916cd43dd8448eb211c80319d";
    let parent = "b7ad6b7169203332";
    // Flags 00: the client's trace is not sampled, which a parent-based sampler (the default)
    // follows; `always_on` decides for itself.
    let spans = spans_of_an_mcp_call(&[("OTEL_TRACES_SAMPLER", "always_on")], trace, &format!("00-{trace}-{parent}-00"));
    // Only sampled spans are exported: their presence is the sampler's decision.
    assert!(
        spans.iter().any(|s| s["trace_id"] == trace && s["name"] == "round")
            && spans.iter().any(|s| s["trace_id"] == trace && s["parent_span_id"] == parent),
        "the unsampled client's trace was exported under always_on: {spans:#?}"
    );
}
