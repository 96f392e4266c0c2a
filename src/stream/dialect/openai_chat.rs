//! OpenAI Chat Completions streaming, and the servers that imitate it.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{Decoder, bad_frame};
use crate::stream::event::{StopReason, StreamEvent};
use crate::stream::sse::SseEvent;

/// Decodes Chat Completions chunks. Quirks of compatible servers handled here: continuation
/// fragments carrying `"id": ""` or `"name": ""` (Qwen, vLLM) never overwrite the first
/// fragment's values; a missing id gets a positional one; `reasoning_content` is not text; an
/// `error` event or error object mid-stream becomes an error event.
///
/// Calls have no block end in this dialect. Providers stream them one after another, so a
/// call whose successor has started, and whose arguments so far are a whole JSON value, is
/// complete and is ended then (which lets it start speculatively). A call whose arguments are
/// still unfinished stays open: some compatible servers interleave the fragments of parallel
/// calls, and ending it would split one call into two. The rest end with `finish_reason` or
/// the end of the stream.
///
/// Linear in its input whatever the shape: calls are found by slot in ordered maps (no scan of
/// the open calls per fragment), and whether a call's arguments are whole is tracked as its
/// fragments arrive (an incremental bracket and string scanner), so a new call checks only
/// the calls that received text since the last check, each parsed at most once, when its
/// brackets first balance.
#[derive(Debug, Default)]
pub struct OpenAiChatDecoder {
    /// Calls started in this message and not ended, by the order they started.
    open: BTreeMap<u64, OpenCall>,
    /// Slot (tool_calls[].index) → its key in `open`.
    by_slot: BTreeMap<usize, u64>,
    /// Keys of open calls that received text since the last check.
    dirty: Vec<u64>,
    next_key: u64,
    /// Slots ended early in this message: a late fragment for one is refused, not started
    /// again as a new call.
    closed: BTreeSet<usize>,
    started: bool,
    ended: bool,
}

#[derive(Debug, Default)]
struct OpenCall {
    slot: usize,
    arguments: String,
    shape: Wholeness,
    dirty: bool,
}

/// What the argument text so far can be, learnt byte by byte as fragments arrive.
#[derive(Debug, Default)]
struct Wholeness {
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// A top-level container or string has begun.
    opened: bool,
    /// It has ended: the text may be whole now (a parse decides once).
    closed: bool,
    /// The text can never be whole by what follows (a stray closer, text after the value, a
    /// value that failed its parse), or is a bare scalar, which is never ended early.
    spoiled: bool,
    /// The parse was done.
    checked: bool,
}

impl Wholeness {
    fn feed(&mut self, text: &str) {
        for &b in text.as_bytes() {
            if self.spoiled {
                return;
            }
            if self.in_string {
                match (self.escaped, b) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => {
                        self.in_string = false;
                        self.closed |= self.depth == 0;
                    }
                    _ => {}
                }
                continue;
            }
            if b.is_ascii_whitespace() {
                continue;
            }
            if self.closed {
                self.spoiled = true;
                continue;
            }
            match b {
                b'{' | b'[' => {
                    self.depth += 1;
                    self.opened = true;
                }
                b'}' | b']' if self.depth == 0 => self.spoiled = true,
                b'}' | b']' => {
                    self.depth -= 1;
                    self.closed = self.depth == 0;
                }
                b'"' => {
                    self.in_string = true;
                    self.opened = true;
                }
                _ if !self.opened => self.spoiled = true,
                _ => {}
            }
        }
    }
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    choices: Vec<Choice<'a>>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default)]
    index: usize,
    #[serde(borrow, default)]
    delta: Option<ChoiceDelta<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ChoiceDelta<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolCallDelta<'a>>>,
}

#[derive(Deserialize)]
struct ToolCallDelta<'a> {
    #[serde(default)]
    index: Option<usize>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
struct FunctionDelta<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
}

fn stop_reason(s: &str) -> StopReason {
    match s {
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "stop" => StopReason::EndTurn,
        "length" => StopReason::MaxTokens,
        _ => StopReason::Other,
    }
}

impl OpenAiChatDecoder {
    fn end_open(&mut self, out: &mut Vec<StreamEvent>) {
        for (_, call) in std::mem::take(&mut self.open) {
            out.push(StreamEvent::CallEnd { slot: call.slot });
        }
        self.by_slot.clear();
        self.dirty.clear();
        self.closed.clear();
    }

    /// A new call started: the open ones whose arguments are already whole end now. Only
    /// calls that received text since the last check can have become whole.
    fn end_complete(&mut self, out: &mut Vec<StreamEvent>) {
        let mut ended: Vec<u64> = Vec::new();
        for key in std::mem::take(&mut self.dirty) {
            let Some(call) = self.open.get_mut(&key) else { continue };
            call.dirty = false;
            let shape = &mut call.shape;
            if !shape.closed || shape.spoiled || shape.checked {
                continue;
            }
            shape.checked = true;
            if serde_json::from_str::<serde::de::IgnoredAny>(&call.arguments).is_ok() {
                ended.push(key);
            } else {
                // A complete value that does not parse never will.
                shape.spoiled = true;
            }
        }
        // In the order the calls started, as before.
        ended.sort_unstable();
        for key in ended {
            if let Some(call) = self.open.remove(&key) {
                self.by_slot.remove(&call.slot);
                self.closed.insert(call.slot);
                out.push(StreamEvent::CallEnd { slot: call.slot });
            }
        }
    }
}

impl Decoder for OpenAiChatDecoder {
    fn decode(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.end_open(out);
            if self.started && !self.ended {
                self.ended = true;
                out.push(StreamEvent::MessageEnd);
            }
            return;
        }
        if !self.started || self.ended {
            self.started = true;
            self.ended = false;
            out.push(StreamEvent::MessageStart);
        }
        let chunk: Chunk = match serde_json::from_str(data) {
            Ok(c) => c,
            Err(e) => return out.push(bad_frame("openai-chat", event, &e)),
        };
        if let Some(err) = chunk.error {
            out.push(StreamEvent::Error(format!("provider error: {}", err.get())));
            return;
        }
        if event.event == "error" {
            out.push(StreamEvent::Error(format!("provider error: {data}")));
            return;
        }
        // Only the first choice is a response; n > 1 is not a tool-calling setup.
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            if let Some(delta) = choice.delta {
                if let Some(text) = delta.content
                    && !text.is_empty()
                {
                    out.push(StreamEvent::Text(text.into_owned()));
                }
                for (pos, call) in delta.tool_calls.into_iter().flatten().enumerate() {
                    let slot = call.index.unwrap_or(pos);
                    let function = call.function;
                    if self.closed.contains(&slot) {
                        // More for a call that was whole and has ended (it may be running).
                        out.push(StreamEvent::Error(format!(
                            "call {slot} got more argument text after its arguments were complete; the extra text was ignored"
                        )));
                        continue;
                    }
                    if !self.by_slot.contains_key(&slot) {
                        // A new call: the ones before it whose arguments are whole are done.
                        self.end_complete(out);
                        let key = self.next_key;
                        self.next_key += 1;
                        self.open.insert(
                            key,
                            OpenCall {
                                slot,
                                ..OpenCall::default()
                            },
                        );
                        self.by_slot.insert(slot, key);
                        let id = call.id.filter(|i| !i.is_empty()).map(Cow::into_owned).unwrap_or_default();
                        let name = function
                            .as_ref()
                            .and_then(|f| f.name.clone())
                            .map(Cow::into_owned)
                            .unwrap_or_default();
                        out.push(StreamEvent::CallStart {
                            slot,
                            id,
                            name,
                            thought_signature: None,
                        });
                    }
                    if let Some(args) = function.and_then(|f| f.arguments)
                        && !args.is_empty()
                    {
                        if let Some(key) = self.by_slot.get(&slot).copied()
                            && let Some(call) = self.open.get_mut(&key)
                        {
                            call.arguments.push_str(&args);
                            call.shape.feed(&args);
                            if !call.dirty {
                                call.dirty = true;
                                self.dirty.push(key);
                            }
                        }
                        out.push(StreamEvent::CallArgs {
                            slot,
                            fragment: args.into_owned(),
                        });
                    }
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.end_open(out);
                out.push(StreamEvent::Stop(stop_reason(&reason)));
            }
        }
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        self.end_open(out);
    }
}
