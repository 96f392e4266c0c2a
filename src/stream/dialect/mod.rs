//! Provider dialects: each decodes one SSE event's data into normalized [`StreamEvent`]s.

mod anthropic;
mod detect;
mod gemini;
mod openai_chat;
mod openai_responses;

use super::event::StreamEvent;
use super::sse::SseEvent;

pub use anthropic::AnthropicDecoder;
pub use detect::detect;
pub use gemini::GeminiDecoder;
pub use openai_chat::OpenAiChatDecoder;
pub use openai_responses::OpenAiResponsesDecoder;

/// A provider's streaming format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    /// Anthropic Messages streaming.
    Anthropic,
    /// OpenAI Chat Completions streaming, and compatible servers.
    OpenaiChat,
    /// OpenAI Responses streaming.
    OpenaiResponses,
    /// Gemini / Vertex `streamGenerateContent?alt=sse`.
    Gemini,
}

impl std::str::FromStr for Dialect {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "anthropic" => Ok(Self::Anthropic),
            "openai-chat" => Ok(Self::OpenaiChat),
            "openai-responses" => Ok(Self::OpenaiResponses),
            "gemini" => Ok(Self::Gemini),
            other => Err(format!(
                "unknown dialect `{other}` (expected auto, anthropic, openai-chat, openai-responses or gemini)"
            )),
        }
    }
}

/// Decodes one dialect. Stateful: a decoder remembers which blocks are client calls.
pub trait Decoder: Send {
    /// Decodes one SSE event, appending normalized events to `out`.
    fn decode(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>);
    /// The stream ended: flushes what the dialect leaves open.
    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        let _ = out;
    }
}

/// A decoder for `dialect`.
pub fn decoder_for(dialect: Dialect) -> Box<dyn Decoder> {
    match dialect {
        Dialect::Anthropic => Box::new(AnthropicDecoder::default()),
        Dialect::OpenaiChat => Box::new(OpenAiChatDecoder::default()),
        Dialect::OpenaiResponses => Box::new(OpenAiResponsesDecoder::default()),
        Dialect::Gemini => Box::new(GeminiDecoder::default()),
    }
}

/// The error event for a frame whose data is not the JSON the dialect expects.
pub(crate) fn bad_frame(dialect: &str, event: &SseEvent, err: &serde_json::Error) -> StreamEvent {
    let mut data: String = event.data.chars().take(120).collect();
    if data.len() < event.data.len() {
        data.push('…');
    }
    StreamEvent::Error(format!("malformed {dialect} frame ({err}): {data}"))
}
