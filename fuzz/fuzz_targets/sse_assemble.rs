//! Any bytes, in any chunking, through the SSE parser and the assembler: never a panic, and
//! every round ends.
//!
//! The same input also drives a body of several messages back to back (a recording of a
//! multi-step exchange, Anthropic or OpenAI Chat), with bytes mutated inside its events but
//! never in the events that end one message and begin the next, nor in a call's id: the
//! assembler's rounds never mix the calls of two messages, come in the messages' order, and
//! report every call index below a round's `call_count` exactly once (ready, or unfinished at
//! the round's end). Unmutated, the body gives one round per message with exactly its calls.
#![no_main]

use std::collections::{BTreeSet, HashMap};

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use toolslot::stream::{Assembler, AssemblyEvent, Dialect, RawCall, RoundEnd};

fuzz_target!(|data: &[u8]| {
    any_bytes(data);
    several_messages(data);
});

fn any_bytes(data: &[u8]) {
    // The first byte picks the chunk size, so the same bytes are also tried split up.
    let Some((&size, body)) = data.split_first() else { return };
    let size = usize::from(size).max(1);
    let mut a = Assembler::new(None);
    let mut out = Vec::new();
    for chunk in body.chunks(size) {
        a.feed(chunk, &mut out);
    }
    a.finish(&mut out);
    assert!(
        out.iter().any(|e| matches!(e, AssemblyEvent::RoundEnd(_))),
        "every stream ends a round"
    );
}

/// The fuzzer's bytes read one at a time (zeros once they run out).
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
}

/// Tool names and argument texts a call is drawn from: valid, repairable, broken, empty.
const NAMES: [&str; 5] = ["read_file", "exec_shell", "write_file", "list_dir", "no_such_tool"];
const ARGUMENTS: [&str; 8] = [
    r#"{"path": "a.txt"}"#,
    r#"{"path": "a.txt",}"#,
    r#"{"path": "a.txt""#,
    r#"{'path': 'a.txt'}"#,
    r#"{"command": "touch MARKER"}"#,
    r#"{"path": "w.txt", "content": "line\n\"quoted\" }{ ]["}"#,
    "{}",
    "",
];

/// One SSE event of the body: its text, whether it may be mutated (the events that end and
/// begin messages may not), and where a call's id lies in it (never mutated).
struct Event {
    text: String,
    protected: bool,
    id: Option<String>,
}

impl Event {
    fn new(text: String) -> Self {
        Self {
            text,
            protected: false,
            id: None,
        }
    }
    fn boundary(text: String) -> Self {
        Self {
            text,
            protected: true,
            id: None,
        }
    }
    fn call(text: String, id: &str) -> Self {
        Self {
            text,
            protected: false,
            id: Some(id.to_string()),
        }
    }
}

fn anthropic_event(kind: &str, data: Value) -> String {
    format!("event: {kind}\ndata: {data}\n\n")
}

fn chat_chunk(m: usize, choice: Value) -> String {
    let data = json!({"id": format!("chatcmpl-{m}"), "object": "chat.completion.chunk", "choices": [choice]});
    format!("data: {data}\n\n")
}

/// A message's calls: (id, name, argument fragments).
type Calls = Vec<(String, &'static str, Vec<String>)>;

fn anthropic(m: usize, text: bool, calls: &Calls, out: &mut Vec<Event>) {
    out.push(Event::boundary(anthropic_event(
        "message_start",
        json!({"type": "message_start", "message": {"id": format!("msg_{m}"), "type": "message", "role": "assistant", "content": []}}),
    )));
    let mut block = 0;
    if text {
        out.push(Event::new(anthropic_event(
            "content_block_start",
            json!({"type": "content_block_start", "index": block, "content_block": {"type": "text", "text": ""}}),
        )));
        out.push(Event::new(anthropic_event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": block, "delta": {"type": "text_delta", "text": "Let me look."}}),
        )));
        out.push(Event::new(anthropic_event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": block}),
        )));
        block += 1;
    }
    for (id, name, fragments) in calls {
        out.push(Event::call(
            anthropic_event(
                "content_block_start",
                json!({"type": "content_block_start", "index": block, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
            ),
            id,
        ));
        for f in fragments {
            out.push(Event::new(anthropic_event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": block, "delta": {"type": "input_json_delta", "partial_json": f}}),
            )));
        }
        out.push(Event::new(anthropic_event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": block}),
        )));
        block += 1;
    }
    out.push(Event::new(anthropic_event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}}),
    )));
    out.push(Event::boundary(anthropic_event("message_stop", json!({"type": "message_stop"}))));
}

fn chat(m: usize, text: bool, calls: &Calls, out: &mut Vec<Event>) {
    if text {
        out.push(Event::new(chat_chunk(
            m,
            json!({"index": 0, "delta": {"role": "assistant", "content": "Let me look."}, "finish_reason": null}),
        )));
    }
    for (n, (id, name, fragments)) in calls.iter().enumerate() {
        out.push(Event::call(
            chat_chunk(
                m,
                json!({"index": 0, "delta": {"tool_calls": [{"index": n, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}, "finish_reason": null}),
            ),
            id,
        ));
        for f in fragments {
            out.push(Event::new(chat_chunk(
                m,
                json!({"index": 0, "delta": {"tool_calls": [{"index": n, "function": {"arguments": f}}]}, "finish_reason": null}),
            )));
        }
    }
    out.push(Event::new(chat_chunk(
        m,
        json!({"index": 0, "delta": {}, "finish_reason": "tool_calls"}),
    )));
    out.push(Event::boundary("data: [DONE]\n\n".to_string()));
}

/// A byte a mutation may write: never `~` (the mark of a call's id) nor `\` (an escape could
/// spell one), so no mutation forges an id.
fn writable(b: u8) -> u8 {
    match b {
        b'~' | b'\\' => b'?',
        b => b,
    }
}

fn several_messages(data: &[u8]) {
    let mut input = Input(data);
    let pick = input.byte();
    let (dialect, chat_dialect) = if pick & 1 == 0 {
        (Dialect::Anthropic, false)
    } else {
        (Dialect::OpenaiChat, true)
    };
    let messages = 1 + usize::from(pick >> 1) % 4;
    // Each call's id names its message: `~m~j~`.
    let mut ids: HashMap<String, usize> = HashMap::new();
    let mut expected: Vec<Vec<String>> = Vec::new();
    let mut events = Vec::new();
    for m in 0..messages {
        let shape = input.byte();
        let text = shape & 4 != 0;
        let calls: Calls = (0..usize::from(shape & 3))
            .map(|j| {
                let id = format!("~{m}~{j}~");
                ids.insert(id.clone(), m);
                let name = NAMES[usize::from(input.byte()) % NAMES.len()];
                let arguments = ARGUMENTS[usize::from(input.byte()) % ARGUMENTS.len()];
                let cut = usize::from(input.byte()) % (arguments.len() + 1);
                let fragments = [&arguments[..cut], &arguments[cut..]]
                    .into_iter()
                    .filter(|f| !f.is_empty())
                    .map(str::to_string)
                    .collect();
                (id, name, fragments)
            })
            .collect();
        expected.push(calls.iter().map(|(id, _, _)| id.clone()).collect());
        if chat_dialect {
            chat(m, text, &calls, &mut events);
        } else {
            anthropic(m, text, &calls, &mut events);
        }
    }
    // The body, and which of its bytes a mutation may touch: inside an event that neither ends
    // nor begins a message, not its closing blank line, not a call's id.
    let mut body: Vec<u8> = Vec::new();
    let mut mutable: Vec<bool> = Vec::new();
    for event in &events {
        let id_at = event
            .id
            .as_ref()
            .and_then(|id| event.text.find(id.as_str()).map(|at| at..at + id.len()));
        let len = event.text.len();
        body.extend_from_slice(event.text.as_bytes());
        mutable.extend((0..len).map(|i| !event.protected && i + 2 < len && !id_at.as_ref().is_some_and(|r| r.contains(&i))));
    }
    let mutations = input.byte() % 9;
    for _ in 0..mutations {
        let op = input.byte();
        let at = usize::from(u16::from_le_bytes([input.byte(), input.byte()]));
        let value = writable(input.byte());
        let spots: Vec<usize> = (0..body.len()).filter(|&i| mutable[i]).collect();
        let Some(&at) = spots.get(at % spots.len().max(1)) else { break };
        match op % 3 {
            0 => body[at] = value,
            1 => {
                body.insert(at, value);
                mutable.insert(at, true);
            }
            _ => {
                body.remove(at);
                mutable.remove(at);
            }
        }
    }
    let size = usize::from(input.byte()).max(1);
    let mut a = Assembler::new(Some(dialect));
    let mut out = Vec::new();
    for chunk in body.chunks(size) {
        a.feed(chunk, &mut out);
    }
    a.finish(&mut out);

    // The rounds, each with the calls reported before its end.
    let mut rounds: Vec<(Vec<RawCall>, RoundEnd)> = Vec::new();
    let mut ready = Vec::new();
    for event in out {
        match event {
            AssemblyEvent::CallReady(call) => ready.push(call),
            AssemblyEvent::RoundEnd(end) => rounds.push((std::mem::take(&mut ready), end)),
            AssemblyEvent::Notice(_) => {}
        }
    }
    assert!(ready.is_empty(), "calls were reported after the last round ended");
    let mut latest = 0;
    for (calls, end) in &rounds {
        let mut reported = vec![false; end.call_count];
        let mut from: BTreeSet<usize> = BTreeSet::new();
        for call in calls.iter().chain(&end.unfinished) {
            assert!(
                call.index < end.call_count,
                "call {} reported in a round of {} calls",
                call.index,
                end.call_count
            );
            assert!(!reported[call.index], "call {} of a round reported twice", call.index);
            reported[call.index] = true;
            if let Some(&m) = ids.get(&call.id) {
                from.insert(m);
            }
        }
        assert!(reported.iter().all(|r| *r), "a call of a round was never reported: {reported:?}");
        assert!(from.len() <= 1, "a round holds calls of messages {from:?}");
        if let Some(&m) = from.first() {
            assert!(m >= latest, "a round of message {m} came after one of message {latest}");
            latest = m;
        }
    }
    if mutations == 0 {
        assert_eq!(rounds.len(), messages, "{messages} messages gave {} rounds", rounds.len());
        for (m, ((calls, end), want)) in rounds.iter().zip(&expected).enumerate() {
            let mut got: Vec<&RawCall> = calls.iter().chain(&end.unfinished).collect();
            got.sort_by_key(|c| c.index);
            let got: Vec<&str> = got.iter().map(|c| c.id.as_str()).collect();
            assert_eq!(&got, want, "round {m}");
        }
    }
}
