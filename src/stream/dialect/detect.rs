//! Telling the dialect from the first events (`--dialect auto`).

use super::Dialect;
use crate::stream::sse::SseEvent;

/// The dialect `event` belongs to, or `None` when this event does not tell (a comment-like
/// ping, an error frame every dialect could send).
pub fn detect(event: &SseEvent) -> Option<Dialect> {
    match event.event.as_str() {
        "message_start" | "content_block_start" | "content_block_delta" => {
            return Some(Dialect::Anthropic);
        }
        e if e.starts_with("response.") => return Some(Dialect::OpenaiResponses),
        _ => {}
    }
    let data = event.data.trim_start();
    if data == "[DONE]" {
        return Some(Dialect::OpenaiChat);
    }
    // A cheap look at the first keys: full parsing happens in the decoder.
    let mut end = data.len().min(512);
    while !data.is_char_boundary(end) {
        end -= 1;
    }
    let head: &str = &data[..end];
    if head.contains("\"type\":\"message_start\"")
        || head.contains("\"type\": \"message_start\"")
        || head.contains("\"type\":\"content_block_")
    {
        return Some(Dialect::Anthropic);
    }
    if head.contains("\"type\":\"response.") || head.contains("\"type\": \"response.") {
        return Some(Dialect::OpenaiResponses);
    }
    if head.contains("chat.completion.chunk") || head.contains("\"choices\"") {
        return Some(Dialect::OpenaiChat);
    }
    if head.contains("\"candidates\"") {
        return Some(Dialect::Gemini);
    }
    None
}
