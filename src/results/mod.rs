//! A round's results as the messages the provider's next request needs.
//!
//! `round_complete` holds one [`ToolResult`] per call, in toolslot's own shape; every host
//! must still turn those into what its provider reads back. This module does it once, for each
//! dialect toolslot reads: Anthropic `tool_result` blocks in one user message, OpenAI Chat
//! `role: "tool"` messages, OpenAI Responses `function_call_output` items and Gemini
//! `functionResponse` parts in one user turn.
//!
//! # Example
//!
//! ```
//! use toolslot::event::ToolResult;
//! use toolslot::results::{ResultFormat, SentNames, to_messages};
//!
//! let results = vec![ToolResult {
//!     index: 0,
//!     tool_use_id: "toolu_1".into(),
//!     name: "read_file".into(),
//!     is_error: false,
//!     content: "hello".into(),
//!     blocks: None,
//!     structured: None,
//! }];
//! let messages = to_messages(ResultFormat::Anthropic, &results, &SentNames::default());
//! assert_eq!(messages[0]["content"][0]["tool_use_id"], "toolu_1");
//! ```
//!
//! # Ids and order
//!
//! Every result becomes exactly one block or message, in the order of `results` (which is the
//! calls' order, by index), under the call's provider id: a refused, rejected, repaired or
//! truncated call gets its error result like any other, so the next request answers every
//! call the model made and nothing else.
//!
//! # Names
//!
//! Only Gemini matches a response to its call by name. Its `functionResponse` carries the
//! name as the model wrote it (a repaired name would not match the call in the history), which
//! [`SentNames`] learns from the round's `call_assembled` events; without them the resolved
//! name stands.

mod anthropic;
mod gemini;
mod media;
mod openai_chat;
mod openai_responses;

use std::collections::VecDeque;

use serde_json::Value;

use crate::event::{PipelineEvent, ToolResult};

/// The provider shape a round's results are rendered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResultFormat {
    /// One Anthropic user message of `tool_result` blocks.
    Anthropic,
    /// One OpenAI Chat `role: "tool"` message per call.
    OpenaiChat,
    /// One OpenAI Responses `function_call_output` item per call.
    OpenaiResponses,
    /// One Gemini user turn of `functionResponse` parts.
    Gemini,
}

impl ResultFormat {
    /// Every format, in the order the documentation lists them.
    pub const ALL: [ResultFormat; 4] = [Self::Anthropic, Self::OpenaiChat, Self::OpenaiResponses, Self::Gemini];

    /// The format's name, as `--results` and `?format=` take it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::OpenaiChat => "openai-chat",
            Self::OpenaiResponses => "openai-responses",
            Self::Gemini => "gemini",
        }
    }
}

impl std::fmt::Display for ResultFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A result format name that is none of the four.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown result format `{0}` (expected anthropic, openai-chat, openai-responses or gemini)")]
pub struct UnknownFormat(pub String);

impl std::str::FromStr for ResultFormat {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, UnknownFormat> {
        Self::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| UnknownFormat(s.to_string()))
    }
}

/// The names the model wrote for a session's calls, learnt from `call_assembled` events and
/// handed out once, to the `round_complete` that answers them.
///
/// A body of several messages may assemble a later message's calls before the earlier
/// message's round completes, and indexes start from 0 in each message; so names wait in
/// arrival order per (index, id), and a round takes the oldest one of each of its calls.
#[derive(Debug, Default, Clone)]
pub struct SentNames {
    waiting: Vec<(usize, String, VecDeque<String>)>,
}

impl SentNames {
    /// Notes a `call_assembled` event's name; other events are ignored.
    pub fn observe(&mut self, event: &PipelineEvent) {
        if let PipelineEvent::CallAssembled { index, id, name, .. } = event {
            match self.waiting.iter_mut().find(|(i, d, _)| i == index && d.as_str() == &**id) {
                Some((_, _, names)) => names.push_back(name.to_string()),
                None => self.waiting.push((*index, id.to_string(), VecDeque::from([name.to_string()]))),
            }
        }
    }

    /// The name the model wrote for the call with this index and id, if it was seen.
    pub fn get(&self, index: usize, id: &str) -> Option<&str> {
        self.waiting
            .iter()
            .find(|(i, d, _)| *i == index && d == id)
            .and_then(|(_, _, names)| names.front())
            .map(String::as_str)
    }

    /// Forgets the names of these results' calls: their round is answered.
    pub fn answered(&mut self, results: &[ToolResult]) {
        for r in results {
            if let Some((_, _, names)) = self.waiting.iter_mut().find(|(i, d, _)| *i == r.index && *d == r.tool_use_id) {
                names.pop_front();
            }
        }
        self.waiting.retain(|(_, _, names)| !names.is_empty());
    }
}

/// A round's results as the messages (or, for OpenAI Responses, input items) to append to the
/// conversation before the next request, in order; empty when the round made no call.
pub fn to_messages(format: ResultFormat, results: &[ToolResult], names: &SentNames) -> Vec<Value> {
    if results.is_empty() {
        return Vec::new();
    }
    match format {
        ResultFormat::Anthropic => vec![anthropic::user_message(results)],
        ResultFormat::OpenaiChat => results.iter().map(openai_chat::tool_message).collect(),
        ResultFormat::OpenaiResponses => results.iter().map(openai_responses::output_item).collect(),
        ResultFormat::Gemini => vec![gemini::user_turn(results, names)],
    }
}

/// Serializes an event as the contract does, and a `round_complete` with its results as
/// `messages` in `format` too; the round's names are then forgotten.
///
/// # Errors
/// Only when the event does not serialize (it always does: it is plain data).
pub fn event_with_messages(event: &PipelineEvent, format: ResultFormat, names: &mut SentNames) -> Result<Value, serde_json::Error> {
    names.observe(event);
    let mut value = serde_json::to_value(event)?;
    if let PipelineEvent::RoundComplete { results, .. } = event {
        value["messages"] = Value::Array(to_messages(format, results, names));
        names.answered(results);
    }
    Ok(value)
}

#[cfg(test)]
#[path = "results_tests.rs"]
mod tests;
