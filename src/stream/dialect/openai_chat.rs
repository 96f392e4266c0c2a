//! OpenAI Chat Completions streaming, and the servers that imitate it.

use std::borrow::Cow;

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
#[derive(Debug, Default)]
pub struct OpenAiChatDecoder {
    /// Calls started in this message and not ended: slot (tool_calls[].index) and the
    /// arguments so far.
    open: Vec<(usize, String)>,
    /// Slots ended early in this message: a late fragment for one is refused, not started
    /// again as a new call.
    closed: Vec<usize>,
    started: bool,
    ended: bool,
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
        for (slot, _) in self.open.drain(..) {
            out.push(StreamEvent::CallEnd { slot });
        }
        self.closed.clear();
    }

    /// A new call started: the open ones whose arguments are already whole end now.
    fn end_complete(&mut self, out: &mut Vec<StreamEvent>) {
        let closed = &mut self.closed;
        self.open.retain(|(slot, args)| {
            let whole = serde_json::from_str::<serde::de::IgnoredAny>(args).is_ok();
            if whole {
                out.push(StreamEvent::CallEnd { slot: *slot });
                closed.push(*slot);
            }
            !whole
        });
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
                    if !self.open.iter().any(|(s, _)| *s == slot) {
                        // A new call: the ones before it whose arguments are whole are done.
                        self.end_complete(out);
                        self.open.push((slot, String::new()));
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
                        if let Some((_, so_far)) = self.open.iter_mut().find(|(s, _)| *s == slot) {
                            so_far.push_str(&args);
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
