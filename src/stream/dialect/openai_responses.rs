//! OpenAI Responses streaming.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{Decoder, bad_frame};
use crate::stream::event::{StopReason, StreamEvent};
use crate::stream::sse::SseEvent;

/// Decodes Responses events. Only `function_call` items are client calls; hosted tools
/// (web search, file search, code interpreter, remote MCP) run at the provider.
#[derive(Debug, Default)]
pub struct OpenAiResponsesDecoder {
    /// Output indexes of function_call items in the current response (sets: a response of
    /// thousands of items must not cost a scan per delta).
    calls: BTreeSet<usize>,
    ended: BTreeSet<usize>,
}

#[derive(Deserialize)]
struct Frame<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    #[serde(default)]
    output_index: usize,
    #[serde(borrow, default)]
    item: Option<Item<'a>>,
    #[serde(borrow, default)]
    delta: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    response: Option<Response<'a>>,
    #[serde(borrow, default)]
    message: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Item<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    call_id: Cow<'a, str>,
    #[serde(borrow, default)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Response<'a> {
    #[serde(borrow, default)]
    incomplete_details: Option<Incomplete<'a>>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Incomplete<'a> {
    #[serde(borrow, default)]
    reason: Cow<'a, str>,
}

impl Decoder for OpenAiResponsesDecoder {
    fn decode(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) {
        let frame: Frame = match serde_json::from_str(&event.data) {
            Ok(f) => f,
            Err(e) => return out.push(bad_frame("openai-responses", event, &e)),
        };
        let slot = frame.output_index;
        match frame.kind.as_ref() {
            "response.created" => {
                self.calls.clear();
                self.ended.clear();
                out.push(StreamEvent::MessageStart);
            }
            "response.output_item.added" => {
                if let Some(item) = frame.item
                    && item.kind == "function_call"
                {
                    self.calls.insert(slot);
                    out.push(StreamEvent::CallStart {
                        slot,
                        id: item.call_id.into_owned(),
                        name: item.name.into_owned(),
                        thought_signature: None,
                    });
                }
            }
            "response.function_call_arguments.delta" if self.calls.contains(&slot) => {
                if let Some(d) = frame.delta
                    && !d.is_empty()
                {
                    out.push(StreamEvent::CallArgs {
                        slot,
                        fragment: d.into_owned(),
                    });
                }
            }
            "response.function_call_arguments.done" if self.calls.contains(&slot) => {
                if let Some(a) = frame.arguments {
                    out.push(StreamEvent::CallArgsFull {
                        slot,
                        arguments: a.into_owned(),
                    });
                }
            }
            "response.output_item.done" if self.calls.contains(&slot) && !self.ended.contains(&slot) => {
                if let Some(a) = frame.item.and_then(|i| i.arguments) {
                    out.push(StreamEvent::CallArgsFull {
                        slot,
                        arguments: a.into_owned(),
                    });
                }
                self.ended.insert(slot);
                out.push(StreamEvent::CallEnd { slot });
            }
            "response.output_text.delta" => {
                if let Some(d) = frame.delta {
                    out.push(StreamEvent::Text(d.into_owned()));
                }
            }
            "response.completed" => {
                self.end_open(out);
                let reason = if self.calls.is_empty() {
                    StopReason::EndTurn
                } else {
                    StopReason::ToolUse
                };
                out.push(StreamEvent::Stop(reason));
                out.push(StreamEvent::MessageEnd);
            }
            "response.incomplete" => {
                self.end_open(out);
                let reason = frame.response.and_then(|r| r.incomplete_details).map(|d| d.reason.into_owned());
                let stop = match reason.as_deref() {
                    Some("max_output_tokens") => StopReason::MaxTokens,
                    _ => StopReason::Other,
                };
                out.push(StreamEvent::Stop(stop));
                out.push(StreamEvent::MessageEnd);
            }
            "response.failed" => {
                let detail = frame
                    .response
                    .and_then(|r| r.error)
                    .map(|e| e.get().to_string())
                    .unwrap_or_default();
                out.push(StreamEvent::Error(format!("provider error: response failed {detail}")));
                out.push(StreamEvent::MessageEnd);
            }
            "error" => {
                let detail = frame
                    .message
                    .map(Cow::into_owned)
                    .or_else(|| frame.error.map(|e| e.get().to_string()))
                    .unwrap_or_else(|| event.data.clone());
                out.push(StreamEvent::Error(format!("provider error: {detail}")));
            }
            _ => {}
        }
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        self.end_open(out);
    }
}

impl OpenAiResponsesDecoder {
    fn end_open(&mut self, out: &mut Vec<StreamEvent>) {
        for slot in self.calls.difference(&self.ended) {
            out.push(StreamEvent::CallEnd { slot: *slot });
        }
        self.ended.clone_from(&self.calls);
    }
}
