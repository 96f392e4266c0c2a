//! A body that holds several provider messages back to back (a recorded multi-step exchange)
//! gives one `round_complete` per message, in order, each with exactly its own calls, through
//! `toolslot replay` and through `toolslot serve` (one round body posted, streamed event by
//! event): whatever mix of calls that may start early (plain reads), calls that wait for their
//! round's end (commands, writes, repaired calls) and refused calls, under every approval mode.
//! A call of a later message never starts before an earlier message's calls are settled: calls
//! start early only in a body's first message (docs/CONTRACT.md).

mod support;

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};
use serde_json::{Value, json};
use support::{Client, Proc, TOKEN, free_port, listening, toolslot};

/// The loop guard out of the way: a generated body may repeat a call, or fail many in a row
/// (read-only, rejections), and what is tested here is the rounds, not the guard.
const LOOP_GUARD: &str = "[loop_guard]\nrepeat_block = 1000\nfailure_warn = 1000\nfailure_pause = 1000\n";

/// The file every read reads.
const READ_ME: &str = "a.txt";

/// Cases per mode and transport (each starts a process or a round): `PROPTEST_CASES` if set.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24)
}

// ---------------------------------------------------------------------------------------------
// What is generated.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dialect {
    Anthropic,
    Chat,
}

impl Dialect {
    fn query(self) -> &'static str {
        match self {
            Dialect::Anthropic => "anthropic",
            Dialect::Chat => "openai-chat",
        }
    }
}

/// How a repaired call's arguments are broken (the repair ladder fixes both).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// `{"path": "a.txt",}`
    TrailingComma,
    /// `{"path": "a.txt"` (the brace never closed)
    Unclosed,
}

/// One call of a generated message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `read_file` of an existing file: may start early.
    Read,
    /// `list_dir` of the workspace: may start early.
    List,
    /// `exec_shell` `touch MARKER_n`: waits for its round's end (and, per mode, an approval).
    Touch,
    /// `write_file` `W_n.txt`: waits for its round's end (and, per mode, an approval).
    Write,
    /// A read whose arguments the ladder repairs: waits for its round's end.
    ReadFixed(Fault),
    /// A command whose arguments the ladder repairs.
    TouchFixed(Fault),
    /// A write whose arguments the ladder repairs.
    WriteFixed(Fault),
    /// A tool nobody has: refused.
    Unknown,
    /// `read_file` without its required `path`: refused.
    MissingPath,
    /// `read_file` with single-quoted JSON, which the ladder reads as the one object it can only
    /// mean: runs.
    SingleQuotes,
    /// `read_file` with arguments that are prose, not JSON: refused.
    Prose,
}

/// What a call needs to run, when it has an effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Need {
    /// A write (`suggest`): runs in auto-edit and full-auto, asks in ask.
    Suggest,
    /// A command (`required`): runs in full-auto, asks in ask and auto-edit.
    Required,
}

/// What a call should come to.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Expect {
    /// Runs in every mode, without error.
    Ok,
    /// Refused in every mode.
    Refused,
    /// Creates `file` in the workspace if the mode (and the answer) lets it run.
    Effect { file: String, need: Need },
}

impl Kind {
    /// Whether the call may start before its message ends.
    fn early(self) -> bool {
        matches!(self, Kind::Read | Kind::List)
    }
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![Just(Fault::TrailingComma), Just(Fault::Unclosed)]
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        4 => Just(Kind::Read),
        2 => Just(Kind::List),
        3 => Just(Kind::Touch),
        2 => Just(Kind::Write),
        1 => fault().prop_map(Kind::ReadFixed),
        1 => fault().prop_map(Kind::TouchFixed),
        1 => fault().prop_map(Kind::WriteFixed),
        1 => Just(Kind::Unknown),
        1 => Just(Kind::MissingPath),
        1 => Just(Kind::SingleQuotes),
        1 => Just(Kind::Prose),
    ]
}

/// A message: its calls (each with where its arguments are split in two fragments, in
/// hundredths of their length) and whether text comes before them.
type GenMessage = (Vec<(Kind, u8)>, bool);

fn body() -> impl Strategy<Value = (Dialect, Vec<GenMessage>)> {
    let dialect = prop_oneof![Just(Dialect::Anthropic), Just(Dialect::Chat)];
    let message = (prop::collection::vec((kind(), 0u8..=100), 1..=3), any::<bool>());
    (dialect, prop::collection::vec(message, 2..=4))
}

/// A call as it is written into the body.
#[derive(Clone, Debug)]
struct Call {
    kind: Kind,
    id: String,
    name: &'static str,
    arguments: String,
    /// Where the arguments are cut into two fragments.
    split: usize,
    expect: Expect,
}

/// A body of several messages, ready to be written.
#[derive(Clone, Debug)]
struct Body {
    dialect: Dialect,
    messages: Vec<Message>,
}

#[derive(Clone, Debug)]
struct Message {
    text: bool,
    calls: Vec<Call>,
}

/// The calls of `messages`, numbered through the body (ids and files unique).
fn build(dialect: Dialect, messages: &[GenMessage]) -> Body {
    let mut n = 0;
    let messages = messages
        .iter()
        .enumerate()
        .map(|(m, (calls, text))| {
            let calls = calls
                .iter()
                .enumerate()
                .map(|(j, &(kind, split))| {
                    n += 1;
                    let id = match dialect {
                        Dialect::Anthropic => format!("toolu_m{m}_c{j}"),
                        Dialect::Chat => format!("call_m{m}_c{j}"),
                    };
                    let (name, arguments, expect) = call_text(kind, n);
                    let split = arguments.len() * usize::from(split) / 100;
                    Call {
                        kind,
                        id,
                        name,
                        arguments,
                        split,
                        expect,
                    }
                })
                .collect();
            Message { text: *text, calls }
        })
        .collect();
    Body { dialect, messages }
}

/// The tool, raw argument text and expectation of call number `n` of kind `kind`.
fn call_text(kind: Kind, n: usize) -> (&'static str, String, Expect) {
    let broken = |whole: String, fault: Fault| match fault {
        Fault::TrailingComma => format!("{},}}", &whole[..whole.len() - 1]),
        Fault::Unclosed => whole[..whole.len() - 1].to_string(),
    };
    let read = || json!({"path": READ_ME}).to_string();
    let touch = || json!({"command": format!("touch MARKER_{n}")}).to_string();
    let write = || json!({"path": format!("W_{n}.txt"), "content": format!("written by call {n}\n")}).to_string();
    let marker = Expect::Effect {
        file: format!("MARKER_{n}"),
        need: Need::Required,
    };
    let written = Expect::Effect {
        file: format!("W_{n}.txt"),
        need: Need::Suggest,
    };
    match kind {
        Kind::Read => ("read_file", read(), Expect::Ok),
        Kind::List => ("list_dir", "{}".to_string(), Expect::Ok),
        Kind::Touch => ("exec_shell", touch(), marker),
        Kind::Write => ("write_file", write(), written),
        Kind::ReadFixed(f) => ("read_file", broken(read(), f), Expect::Ok),
        Kind::TouchFixed(f) => ("exec_shell", broken(touch(), f), marker),
        Kind::WriteFixed(f) => ("write_file", broken(write(), f), written),
        Kind::Unknown => ("frobnicate_the_widgets", "{}".to_string(), Expect::Refused),
        Kind::MissingPath => ("read_file", json!({"limit": 2}).to_string(), Expect::Refused),
        Kind::SingleQuotes => ("read_file", format!("{{'path': '{READ_ME}'}}"), Expect::Ok),
        Kind::Prose => ("read_file", "please read the notes file".to_string(), Expect::Refused),
    }
}

impl Call {
    /// The arguments in (at most) two fragments, as a provider streams them.
    fn fragments(&self) -> Vec<&str> {
        let (a, b) = self.arguments.split_at(self.split);
        [a, b].into_iter().filter(|f| !f.is_empty()).collect()
    }
}

impl Body {
    /// The body as SSE events, each one a piece (as a provider sends them).
    fn frames(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (m, message) in self.messages.iter().enumerate() {
            match self.dialect {
                Dialect::Anthropic => anthropic(m, message, &mut out),
                Dialect::Chat => chat(m, message, &mut out),
            }
        }
        out
    }

    fn text(&self) -> String {
        self.frames().concat()
    }

    /// Which message, and which call of it, holds the call `id`.
    fn places(&self) -> HashMap<String, (usize, usize)> {
        let mut places = HashMap::new();
        for (m, message) in self.messages.iter().enumerate() {
            for (j, call) in message.calls.iter().enumerate() {
                places.insert(call.id.clone(), (m, j));
            }
        }
        places
    }
}

/// One SSE event of Anthropic's shape (`event:` and `data:` lines).
fn anthropic_event(kind: &str, data: Value) -> String {
    format!("event: {kind}\ndata: {data}\n\n")
}

/// A message as Anthropic's Messages API streams it (the shapes of tests/data/recorded and
/// examples/make_streams.py).
fn anthropic(m: usize, message: &Message, out: &mut Vec<String>) {
    out.push(anthropic_event(
        "message_start",
        json!({"type": "message_start", "message": {"id": format!("msg_{m}"), "type": "message", "role": "assistant", "content": [], "model": "claude-example", "stop_reason": null}}),
    ));
    let mut block = 0;
    if message.text {
        out.push(anthropic_event(
            "content_block_start",
            json!({"type": "content_block_start", "index": block, "content_block": {"type": "text", "text": ""}}),
        ));
        out.push(anthropic_event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": block, "delta": {"type": "text_delta", "text": format!("Step {m}.")}}),
        ));
        out.push(anthropic_event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": block}),
        ));
        block += 1;
    }
    for call in &message.calls {
        out.push(anthropic_event(
            "content_block_start",
            json!({"type": "content_block_start", "index": block, "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}}),
        ));
        for fragment in call.fragments() {
            out.push(anthropic_event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": block, "delta": {"type": "input_json_delta", "partial_json": fragment}}),
            ));
        }
        out.push(anthropic_event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": block}),
        ));
        block += 1;
    }
    out.push(anthropic_event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 50}}),
    ));
    out.push(anthropic_event("message_stop", json!({"type": "message_stop"})));
}

/// A message as OpenAI's Chat Completions streams it, ended by `[DONE]`.
fn chat(m: usize, message: &Message, out: &mut Vec<String>) {
    let chunk = |choice: Value| {
        let data = json!({"id": format!("chatcmpl-{m}"), "object": "chat.completion.chunk", "created": 1, "model": "gpt-example", "choices": [choice]});
        format!("data: {data}\n\n")
    };
    if message.text {
        out.push(chunk(
            json!({"index": 0, "delta": {"role": "assistant", "content": format!("Step {m}.")}, "finish_reason": null}),
        ));
    }
    for (n, call) in message.calls.iter().enumerate() {
        out.push(chunk(
            json!({"index": 0, "delta": {"tool_calls": [{"index": n, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}]}, "finish_reason": null}),
        ));
        for fragment in call.fragments() {
            out.push(chunk(
                json!({"index": 0, "delta": {"tool_calls": [{"index": n, "function": {"arguments": fragment}}]}, "finish_reason": null}),
            ));
        }
    }
    out.push(chunk(json!({"index": 0, "delta": {}, "finish_reason": "tool_calls"})));
    out.push("data: [DONE]\n\n".to_string());
}

// ---------------------------------------------------------------------------------------------
// Modes.

/// An approval mode and how its questions are answered.
#[derive(Clone, Copy, Debug)]
struct Mode {
    mode: &'static str,
    /// `all` or `none` (replay's `--approve`; `approve` or `reject` over HTTP).
    answer: &'static str,
}

impl Mode {
    fn approves(self) -> bool {
        self.answer == "all"
    }

    /// Whether a call that needs `need` runs.
    fn runs(self, need: Need) -> bool {
        match self.mode {
            "read-only" => false,
            "ask" => self.approves(),
            "auto-edit" => need == Need::Suggest || self.approves(),
            "full-auto" => true,
            other => panic!("unknown mode {other}"),
        }
    }

    /// Whether the host is asked about a call that needs `need`.
    fn asks(self, need: Need) -> bool {
        match self.mode {
            "ask" => true,
            "auto-edit" => need == Need::Required,
            _ => false,
        }
    }

    fn config(self) -> String {
        format!("[approval]\nmode = \"{}\"\n{LOOP_GUARD}", self.mode)
    }
}

const READ_ONLY: Mode = Mode {
    mode: "read-only",
    answer: "none",
};
const ASK_ALL: Mode = Mode {
    mode: "ask",
    answer: "all",
};
const ASK_NONE: Mode = Mode {
    mode: "ask",
    answer: "none",
};
/// Writes run on their own; commands are asked about, and refused.
const AUTO_EDIT: Mode = Mode {
    mode: "auto-edit",
    answer: "none",
};
const FULL_AUTO: Mode = Mode {
    mode: "full-auto",
    answer: "all",
};

// ---------------------------------------------------------------------------------------------
// The invariant.

/// What one run of a body showed.
struct Seen {
    events: Vec<Value>,
    /// The process's stderr (the server's, for a served round).
    stderr: String,
}

/// A line per event that tells the story of the calls, for a failure's message.
fn story(events: &[Value]) -> String {
    let s = |v: &Value| v.as_str().unwrap_or("?").to_string();
    events
        .iter()
        .filter_map(|e| {
            Some(match e["type"].as_str()? {
                "call_assembled" => format!("assembled #{} {} repair={}", e["index"], s(&e["id"]), e["repair"]),
                "call_started" => format!(
                    "started #{} {}{}",
                    e["index"],
                    s(&e["id"]),
                    if e["speculative"] == true { " (speculative)" } else { "" }
                ),
                "approval_required" => format!("asked #{} {} (request {})", e["index"], s(&e["id"]), e["request"]),
                "approval_decided" => format!("decided #{} {} {}", e["index"], s(&e["id"]), s(&e["decision"])),
                "call_finished" => format!("finished #{} {} error={}", e["index"], s(&e["id"]), e["is_error"]),
                "round_complete" => {
                    let results: Vec<String> = e["results"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|r| format!("#{} {} error={}", r["index"], s(&r["tool_use_id"]), r["is_error"]))
                        .collect();
                    format!("round_complete [{}]", results.join(", "))
                }
                "notice" => format!("notice {}: {}", s(&e["kind"]), s(&e["message"])),
                _ => return None,
            })
        })
        .collect::<Vec<_>>()
        .join("\n  ")
}

/// Checks the invariant of a multi-message body on what a run showed; `ws` is its workspace.
fn check(body: &Body, mode: Mode, seen: &Seen, ws: &Path) -> Result<(), String> {
    let events = &seen.events;
    // One round_complete per message, in order, each with exactly its calls, by index.
    let rounds: Vec<&Value> = events.iter().filter(|e| e["type"] == "round_complete").collect();
    if rounds.len() != body.messages.len() {
        return Err(format!(
            "{} messages gave {} round_complete events",
            body.messages.len(),
            rounds.len()
        ));
    }
    if events.last().is_none_or(|e| e["type"] != "round_complete") {
        return Err("the events do not end with the last round's round_complete".into());
    }
    for (m, (round, message)) in rounds.iter().zip(&body.messages).enumerate() {
        let results = round["results"].as_array().ok_or(format!("round {m} has no results"))?;
        let got: Vec<(u64, &str)> = results
            .iter()
            .map(|r| (r["index"].as_u64().unwrap_or(u64::MAX), r["tool_use_id"].as_str().unwrap_or("?")))
            .collect();
        let want: Vec<(u64, &str)> = message.calls.iter().enumerate().map(|(j, c)| (j as u64, c.id.as_str())).collect();
        if got != want {
            return Err(format!("round {m} holds {got:?}, its message's calls are {want:?}"));
        }
        for (result, call) in results.iter().zip(&message.calls) {
            let is_error = result["is_error"] == true;
            let want_error = match &call.expect {
                Expect::Ok => false,
                Expect::Refused => true,
                Expect::Effect { need, .. } => !mode.runs(*need),
            };
            if is_error != want_error {
                return Err(format!(
                    "{} ({:?}) ended with is_error {is_error}, expected {want_error}: {}",
                    call.id, call.kind, result["content"]
                ));
            }
        }
    }
    // Calls start in message order; only the first message's calls start early, and only
    // while every call before them could; nothing starts before an earlier message's
    // questions are answered.
    let places = body.places();
    let call = |m: usize, j: usize| &body.messages[m].calls[j];
    let asked: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "approval_required")
        .filter_map(|e| e["id"].as_str())
        .collect();
    let mut decided: HashSet<&str> = HashSet::new();
    let mut latest = 0;
    for e in events {
        let id = e["id"].as_str().unwrap_or("");
        match e["type"].as_str() {
            Some("approval_decided") => {
                decided.insert(id);
            }
            Some("call_started") => {
                let &(m, j) = places.get(id).ok_or(format!("a call that is in no message started: {e}"))?;
                if m < latest {
                    return Err(format!("{id} (message {m}) started after a call of message {latest}"));
                }
                latest = m;
                if e["speculative"] == true && (m > 0 || !(0..=j).all(|k| call(0, k).kind.early())) {
                    return Err(format!("{id} (message {m}, {:?}) started early", call(m, j).kind));
                }
                let waiting: Vec<&&str> = asked
                    .iter()
                    .filter(|a| places.get(**a).is_some_and(|&(am, _)| am < m) && !decided.contains(**a))
                    .collect();
                if !waiting.is_empty() {
                    return Err(format!(
                        "{id} (message {m}) started while {waiting:?} of an earlier message waited for their answer"
                    ));
                }
            }
            _ => {}
        }
    }
    // The host was asked about exactly the calls the mode asks about, and the files exist
    // exactly for the calls that ran.
    let calls: Vec<&Call> = body.messages.iter().flat_map(|m| &m.calls).collect();
    let want_asked: Vec<&str> = calls
        .iter()
        .filter(|c| matches!(c.expect, Expect::Effect { need, .. } if mode.asks(need)))
        .map(|c| c.id.as_str())
        .collect();
    if asked != want_asked {
        return Err(format!("questions about {asked:?}, expected about {want_asked:?}"));
    }
    for c in calls {
        if let Expect::Effect { file, need } = &c.expect {
            let exists = ws.join(file).exists();
            if exists != mode.runs(*need) {
                return Err(format!(
                    "{file} of {} ({:?}) exists: {exists}, expected {}",
                    c.id,
                    c.kind,
                    mode.runs(*need)
                ));
            }
        }
    }
    // Nothing was answered twice (and so dropped).
    if seen.stderr.contains("dropped") {
        return Err(format!("stderr says something was dropped: {}", seen.stderr));
    }
    Ok(())
}

/// A fresh workspace with a small file to read.
fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join(READ_ME), "one\ntwo\nthree\n").unwrap();
    (dir, ws)
}

/// What the cases of a property went through, to show that they exercise the early path.
#[derive(Default)]
struct Tally {
    cases: std::cell::Cell<usize>,
    rounds: std::cell::Cell<usize>,
    early: std::cell::Cell<usize>,
    questions: std::cell::Cell<usize>,
}

impl Tally {
    fn count(&self, seen: &Seen) {
        let of = |t: &str| seen.events.iter().filter(|e| e["type"] == t).count();
        let early = seen
            .events
            .iter()
            .filter(|e| e["type"] == "call_started" && e["speculative"] == true)
            .count();
        self.cases.set(self.cases.get() + 1);
        self.rounds.set(self.rounds.get() + of("round_complete"));
        self.early.set(self.early.get() + early);
        self.questions.set(self.questions.get() + of("approval_required"));
    }
}

/// Runs one body through a transport and checks the invariant, as a proptest case.
fn case(body: &Body, mode: Mode, tally: &Tally, run: impl FnOnce(&Body, Mode, &Path) -> Result<Seen, String>) -> Result<(), TestCaseError> {
    let (_dir, ws) = workspace();
    let seen = run(body, mode, &ws).map_err(TestCaseError::fail)?;
    tally.count(&seen);
    check(body, mode, &seen, &ws).map_err(|why| {
        TestCaseError::fail(format!(
            "{why}\nbody:\n{}\nevents:\n  {}\nstderr: {}",
            body.text(),
            story(&seen.events),
            seen.stderr
        ))
    })
}

/// 24 (or `PROPTEST_CASES`) generated bodies through `run`, in `mode`.
fn property(mode: Mode, run: impl Fn(&Body, Mode, &Path) -> Result<Seen, String>) {
    let config = ProptestConfig {
        cases: cases(),
        // Each case starts processes: a failure is shrunk, but not for ever.
        max_shrink_iters: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = TestRunner::new(config);
    let started = Instant::now();
    let tally = Tally::default();
    let result = runner.run(&body(), |(dialect, messages)| {
        let body = build(dialect, &messages);
        case(&body, mode, &tally, &run)
    });
    if let Err(e) = result {
        panic!("{mode:?}: {e}");
    }
    eprintln!(
        "{mode:?}: {} cases, {} rounds, {} calls started early, {} questions, in {:?}",
        tally.cases.get(),
        tally.rounds.get(),
        tally.early.get(),
        tally.questions.get(),
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------------------------
// Through `toolslot replay`.

/// `cmd`'s output once it exits; killed (and an error) past `limit`.
fn output_within(mut cmd: Command, limit: Duration) -> Result<std::process::Output, String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stdout.read_to_end(&mut b);
        b
    });
    let err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        b
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("toolslot did not finish within {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Ok(std::process::Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    })
}

/// `toolslot replay --approve ANSWER` of `body` (one file) in `ws`, in `mode`.
fn replay(body: &Body, mode: Mode, ws: &Path) -> Result<Seen, String> {
    let dir = ws.parent().unwrap();
    let config = dir.join("config.toml");
    std::fs::write(&config, mode.config()).unwrap();
    let file = dir.join("body.sse");
    std::fs::write(&file, body.text()).unwrap();
    let mut cmd = toolslot();
    cmd.env("TOOLSLOT_OVERFLOW__DIR", dir.join("overflow"))
        .env("TOOLSLOT_MCP__TOOL_CACHE_DIR", "")
        .args(["replay", "--approve", mode.answer, "--workspace"])
        .arg(ws)
        .arg("--config")
        .arg(&config)
        .arg(&file);
    let out = output_within(cmd, Duration::from_secs(120))?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if out.status.code() != Some(0) {
        return Err(format!("replay exited {:?}: {stderr}", out.status.code()));
    }
    let events = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<Vec<Value>, _>>()
        .map_err(|e| format!("replay printed a line that is not JSON: {e}"))?;
    Ok(Seen { events, stderr })
}

#[test]
fn replay_read_only_gives_one_round_per_message() {
    property(READ_ONLY, replay);
}

#[test]
fn replay_ask_approving_gives_one_round_per_message() {
    property(ASK_ALL, replay);
}

#[test]
fn replay_ask_rejecting_gives_one_round_per_message() {
    property(ASK_NONE, replay);
}

#[test]
fn replay_auto_edit_gives_one_round_per_message() {
    property(AUTO_EDIT, replay);
}

#[test]
fn replay_full_auto_gives_one_round_per_message() {
    property(FULL_AUTO, replay);
}

// ---------------------------------------------------------------------------------------------
// Through `toolslot serve`.

/// A `toolslot serve` of this file's own, its stderr kept in a file (what the support's
/// server does not keep), killed when dropped.
struct Server {
    api: Client,
    stderr: PathBuf,
    _proc: Proc,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let config = dir.path().join("serve.toml");
        std::fs::write(
            &config,
            format!(
                "{LOOP_GUARD}\n[server]\nbind = \"{addr}\"\ntoken = \"{TOKEN}\"\n\n[overflow]\ndir = \"{}\"\n",
                dir.path().join("overflow").display()
            ),
        )
        .unwrap();
        let stderr = dir.path().join("stderr.log");
        let mut cmd = toolslot();
        cmd.env("TOOLSLOT_MCP__TOOL_CACHE_DIR", "")
            .args(["serve", "--config"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap());
        let mut proc = Proc::spawn(&mut cmd);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !listening(port) {
            if let Ok(Some(status)) = proc.child.try_wait() {
                panic!(
                    "toolslot serve exited {status}: {}",
                    std::fs::read_to_string(&stderr).unwrap_or_default()
                );
            }
            assert!(Instant::now() < deadline, "toolslot serve did not listen within 60 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        Server {
            api: Client {
                addr,
                token: Some(TOKEN.to_string()),
            },
            stderr,
            _proc: proc,
            _dir: dir,
        }
    }

    /// Posts `body` as one round of a new session on `ws` in `mode`, one SSE event per chunk
    /// (as a proxy forwards a provider's stream), answering each question as it comes.
    fn round(&self, body: &Body, mode: Mode, ws: &Path) -> Result<Seen, String> {
        // What the server wrote to stderr during this case alone.
        let before = std::fs::metadata(&self.stderr).map_or(0, |m| m.len() as usize);
        let id = self.api.open(&json!({"workspace": ws, "approval_mode": mode.mode}));
        let events = self.post(&id, body, mode);
        let (status, text) = self.api.http("DELETE", &format!("/v1/sessions/{id}"), b"");
        if status != 204 {
            return Err(format!("closing the session: {status} {text}"));
        }
        let stderr = std::fs::read(&self.stderr).unwrap_or_default();
        let stderr = String::from_utf8_lossy(stderr.get(before..).unwrap_or_default()).into_owned();
        Ok(Seen { events: events?, stderr })
    }

    fn post(&self, id: &str, body: &Body, mode: Mode) -> Result<Vec<Value>, String> {
        let mut conn = TcpStream::connect(&self.api.addr).map_err(|e| e.to_string())?;
        conn.set_nodelay(true).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut writer = conn.try_clone().unwrap();
        let head = format!(
            "POST /v1/sessions/{id}/rounds?dialect={} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
            body.dialect.query(),
            self.api.addr
        );
        let frames = body.frames();
        let sending = std::thread::spawn(move || -> std::io::Result<()> {
            writer.write_all(head.as_bytes())?;
            for frame in frames {
                write!(writer, "{:X}\r\n{frame}\r\n", frame.len())?;
                writer.flush()?;
                // The events arrive apart, so calls may start before their message ends.
                std::thread::sleep(Duration::from_millis(1));
            }
            writer.write_all(b"0\r\n\r\n")
        });
        let decision = if mode.approves() { "approve" } else { "reject" };
        let mut raw: Vec<u8> = Vec::new();
        let mut buf = [0u8; 16384];
        let mut stream = ChunkedSse::default();
        let mut events = Vec::new();
        loop {
            let n = conn.read(&mut buf).map_err(|e| format!("reading the round's answer: {e}"))?;
            if n == 0 {
                break;
            }
            raw.extend_from_slice(&buf[..n]);
            for event in stream.take(&raw)? {
                if event["type"] == "approval_required" {
                    let index = &event["index"];
                    let answer = json!({"decision": decision, "request": event["request"]});
                    let (status, text) = self.api.http(
                        "POST",
                        &format!("/v1/sessions/{id}/approvals/{index}"),
                        answer.to_string().as_bytes(),
                    );
                    if status != 204 {
                        return Err(format!("answering {event}: {status} {text}"));
                    }
                }
                events.push(event);
            }
            if stream.ended {
                break;
            }
        }
        sending.join().unwrap().map_err(|e| format!("sending the body: {e}"))?;
        Ok(events)
    }
}

/// An HTTP response of SSE events read as it arrives (chunked or not).
#[derive(Default)]
struct ChunkedSse {
    /// Where the body starts in the raw bytes, once the head is read.
    body_at: Option<usize>,
    chunked: bool,
    /// How far the raw bytes were read.
    read: usize,
    /// The body so far, de-chunked.
    body: Vec<u8>,
    /// How far the body was split into events.
    split: usize,
    ended: bool,
}

impl ChunkedSse {
    /// The events completed by what `raw` (every byte so far) added.
    fn take(&mut self, raw: &[u8]) -> Result<Vec<Value>, String> {
        if self.body_at.is_none() {
            let Some(end) = find(raw, b"\r\n\r\n") else { return Ok(Vec::new()) };
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            if !head.starts_with("http/1.1 200") {
                return Err(format!("the round was refused: {}", String::from_utf8_lossy(raw)));
            }
            self.chunked = head.contains("transfer-encoding: chunked");
            self.body_at = Some(end + 4);
            self.read = end + 4;
        }
        if self.chunked {
            loop {
                let rest = &raw[self.read..];
                let Some(line) = find(rest, b"\r\n") else { break };
                let size = std::str::from_utf8(&rest[..line])
                    .ok()
                    .and_then(|s| usize::from_str_radix(s.split(';').next().unwrap_or("").trim(), 16).ok())
                    .ok_or_else(|| format!("a bad chunk size: {:?}", String::from_utf8_lossy(&rest[..line])))?;
                if size == 0 {
                    self.ended = true;
                    break;
                }
                if rest.len() < line + 2 + size + 2 {
                    break;
                }
                self.body.extend_from_slice(&rest[line + 2..line + 2 + size]);
                self.read += line + 2 + size + 2;
            }
        } else {
            self.body.extend_from_slice(&raw[self.read..]);
            self.read = raw.len();
        }
        let mut events = Vec::new();
        while let Some(end) = find(&self.body[self.split..], b"\n\n") {
            let frame = String::from_utf8_lossy(&self.body[self.split..self.split + end]).into_owned();
            self.split += end + 2;
            for line in frame.lines() {
                if let Some(data) = line.strip_prefix("data: ") {
                    events.push(serde_json::from_str(data).map_err(|e| format!("an event that is not JSON ({e}): {data}"))?);
                }
            }
        }
        Ok(events)
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The property through one server, a new session (and workspace) per case.
fn served(mode: Mode) {
    let server = Server::start();
    property(mode, |body, mode, ws| server.round(body, mode, ws));
}

#[test]
fn serve_read_only_gives_one_round_per_message() {
    served(READ_ONLY);
}

#[test]
fn serve_ask_approving_gives_one_round_per_message() {
    served(ASK_ALL);
}

#[test]
fn serve_ask_rejecting_gives_one_round_per_message() {
    served(ASK_NONE);
}

#[test]
fn serve_auto_edit_gives_one_round_per_message() {
    served(AUTO_EDIT);
}

#[test]
fn serve_full_auto_gives_one_round_per_message() {
    served(FULL_AUTO);
}

// ---------------------------------------------------------------------------------------------
// The reproduction.

/// Two single-call Anthropic messages: `touch FIRST`, then a read.
fn command_then_read() -> Body {
    let call = |id: &str, name: &'static str, arguments: Value, kind: Kind, expect: Expect| Call {
        kind,
        id: id.to_string(),
        name,
        arguments: arguments.to_string(),
        split: 0,
        expect,
    };
    Body {
        dialect: Dialect::Anthropic,
        messages: vec![
            Message {
                text: false,
                calls: vec![call(
                    "toolu_first",
                    "exec_shell",
                    json!({"command": "touch FIRST"}),
                    Kind::Touch,
                    Expect::Effect {
                        file: "FIRST".into(),
                        need: Need::Required,
                    },
                )],
            },
            Message {
                text: false,
                calls: vec![call("toolu_second", "read_file", json!({"path": READ_ME}), Kind::Read, Expect::Ok)],
            },
        ],
    }
}

/// The first message's command waits for its round's end (and, in ask mode, its answer);
/// the second message's read used to start early, complete the first round in the
/// command's place and drop the command's result.
#[test]
fn a_command_then_a_read_in_one_body_give_two_rounds() {
    let body = command_then_read();
    for mode in [FULL_AUTO, ASK_NONE] {
        let (_dir, ws) = workspace();
        let seen = replay(&body, mode, &ws).unwrap();
        if let Err(why) = check(&body, mode, &seen, &ws) {
            panic!("{mode:?}: {why}\nevents:\n  {}\nstderr: {}", story(&seen.events), seen.stderr);
        }
        let rounds = support::results_by_round(&seen.events);
        assert_eq!(rounds.len(), 2, "{mode:?}: {}", story(&seen.events));
        assert_eq!(rounds[0].len(), 1);
        assert_eq!(rounds[0][0]["tool_use_id"], "toolu_first");
        assert_eq!(rounds[0][0]["name"], "exec_shell");
        assert_eq!(rounds[0][0]["is_error"], mode.mode != "full-auto", "{}", rounds[0][0]);
        assert_eq!(rounds[1].len(), 1);
        assert_eq!(rounds[1][0]["tool_use_id"], "toolu_second");
        assert_eq!(rounds[1][0]["is_error"], false, "{}", rounds[1][0]);
        assert!(rounds[1][0]["content"].as_str().unwrap().contains("three"), "{}", rounds[1][0]);
        assert_eq!(ws.join("FIRST").exists(), mode.mode == "full-auto");
        // The read is not started early: it runs behind the first round.
        let started: Vec<&Value> = seen.events.iter().filter(|e| e["type"] == "call_started").collect();
        let read = started.iter().find(|e| e["id"] == "toolu_second").expect("the read started");
        assert_eq!(read["speculative"], false, "{}", story(&seen.events));
        assert!(!seen.stderr.contains("dropped"), "{}", seen.stderr);
    }
}

/// The same body posted to the server as one round.
#[test]
fn a_command_then_a_read_in_one_round_body_give_two_rounds() {
    let body = command_then_read();
    let server = Server::start();
    for mode in [FULL_AUTO, ASK_NONE] {
        let (_dir, ws) = workspace();
        let seen = server.round(&body, mode, &ws).unwrap();
        if let Err(why) = check(&body, mode, &seen, &ws) {
            panic!("{mode:?}: {why}\nevents:\n  {}\nstderr: {}", story(&seen.events), seen.stderr);
        }
        assert_eq!(ws.join("FIRST").exists(), mode.mode == "full-auto");
    }
}
