//! Anthropic Messages streaming.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{Decoder, bad_frame};
use crate::stream::event::{StopReason, StreamEvent};
use crate::stream::sse::SseEvent;

/// Decodes Anthropic Messages events. Only `tool_use` blocks are client calls: the blocks the
/// provider runs itself (`server_tool_use`, `mcp_tool_use`) and their result blocks are
/// passed over.
#[derive(Debug, Default)]
pub struct AnthropicDecoder {
    /// Content-block indexes of the current message that are client tool calls (a set: a
    /// message of thousands of blocks must not cost a scan per delta).
    client_blocks: BTreeSet<usize>,
}

#[derive(Deserialize)]
struct Frame<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    #[serde(default)]
    index: usize,
    #[serde(borrow, default)]
    content_block: Option<Block<'a>>,
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Block<'a> {
    #[serde(borrow, rename = "type")]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    id: Cow<'a, str>,
    #[serde(borrow, default)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    text: Cow<'a, str>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow, rename = "type", default)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    text: Cow<'a, str>,
    #[serde(borrow, default)]
    partial_json: Cow<'a, str>,
    #[serde(borrow, default)]
    stop_reason: Option<Cow<'a, str>>,
}

fn stop_reason(s: &str) -> StopReason {
    match s {
        "tool_use" => StopReason::ToolUse,
        "end_turn" | "pause_turn" => StopReason::EndTurn,
        "max_tokens" | "model_context_window_exceeded" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        _ => StopReason::Other,
    }
}

impl Decoder for AnthropicDecoder {
    fn decode(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) {
        if event.event == "ping" {
            return;
        }
        let frame: Frame = match serde_json::from_str(&event.data) {
            Ok(f) => f,
            Err(e) => return out.push(bad_frame("anthropic", event, &e)),
        };
        match frame.kind.as_ref() {
            "message_start" => {
                self.client_blocks.clear();
                out.push(StreamEvent::MessageStart);
            }
            "content_block_start" => {
                let Some(block) = frame.content_block else {
                    return;
                };
                match block.kind.as_ref() {
                    "text" if !block.text.is_empty() => out.push(StreamEvent::Text(block.text.into_owned())),
                    "tool_use" => {
                        self.client_blocks.insert(frame.index);
                        out.push(StreamEvent::CallStart {
                            slot: frame.index,
                            id: block.id.into_owned(),
                            name: block.name.into_owned(),
                            thought_signature: None,
                        });
                        // A call made from code carries its whole input here and no deltas.
                        if let Some(input) = block.input
                            && input.get() != "{}"
                        {
                            out.push(StreamEvent::CallArgsFull {
                                slot: frame.index,
                                arguments: input.get().to_string(),
                            });
                        }
                    }
                    // server_tool_use, mcp_tool_use, thinking and every *_result block: the
                    // provider's own business, never ours to run.
                    _ => {}
                }
            }
            "content_block_delta" => {
                let Some(delta) = frame.delta else { return };
                match delta.kind.as_ref() {
                    "text_delta" => out.push(StreamEvent::Text(delta.text.into_owned())),
                    "input_json_delta" if self.client_blocks.contains(&frame.index) && !delta.partial_json.is_empty() => {
                        out.push(StreamEvent::CallArgs {
                            slot: frame.index,
                            fragment: delta.partial_json.into_owned(),
                        });
                    }
                    _ => {}
                }
            }
            "content_block_stop" if self.client_blocks.contains(&frame.index) => {
                out.push(StreamEvent::CallEnd { slot: frame.index });
            }
            "message_delta" => {
                if let Some(reason) = frame.delta.and_then(|d| d.stop_reason) {
                    out.push(StreamEvent::Stop(stop_reason(&reason)));
                }
            }
            "message_stop" => out.push(StreamEvent::MessageEnd),
            "error" => {
                let detail = frame.error.map(|e| e.get().to_string()).unwrap_or_else(|| event.data.clone());
                out.push(StreamEvent::Error(format!("provider error: {detail}")));
            }
            _ => {}
        }
    }
}
