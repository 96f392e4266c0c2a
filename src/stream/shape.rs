//! Whether a round's body was a provider stream at all.
//!
//! Random bytes, a binary file or a JSON document (a response requested without streaming)
//! frame into no SSE event, and a stream of events no dialect knows decodes into nothing:
//! either would end as an empty round, indistinguishable from a model that said nothing. The
//! assembler counts what each stage made of the body as it passes (constant work per chunk
//! and per event, so the input stays linear) and, at the end, [`BodyShape::verdict`] names
//! why the body was not a stream.

use super::dialect::Dialect;
use super::event::StreamEvent;

/// How many leading bytes of the body the verdict quotes.
const SAMPLE: usize = 40;

/// What the stages made of a body, counted as it passes.
#[derive(Debug, Default)]
pub struct BodyShape {
    /// Bytes fed.
    bytes: usize,
    /// The first bytes that are not whitespace (up to [`SAMPLE`]), for the verdict.
    head: Vec<u8>,
    /// The whitespace before them.
    lead: usize,
    /// SSE events framed.
    frames: usize,
    /// Normalized events the dialect decoded from them that carry something: text, a call, a
    /// stop, an error (a message's start or end alone is what any frame may be taken for).
    decoded: usize,
}

impl BodyShape {
    /// Counts a chunk of the body.
    pub fn bytes(&mut self, chunk: &[u8]) {
        self.bytes += chunk.len();
        if self.head.len() < SAMPLE {
            // Only until the sample is full: a constant amount of work per body.
            let start = if self.head.is_empty() {
                chunk.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(chunk.len())
            } else {
                0
            };
            self.lead += start;
            let room = SAMPLE - self.head.len();
            self.head.extend(chunk[start..].iter().take(room));
        }
    }

    /// Counts SSE events framed.
    pub fn frames(&mut self, n: usize) {
        self.frames += n;
    }

    /// Counts the normalized events a frame was decoded into.
    pub fn decoded(&mut self, events: &[StreamEvent]) {
        self.decoded += events
            .iter()
            .filter(|e| !matches!(e, StreamEvent::MessageStart | StreamEvent::MessageEnd))
            .count();
    }

    /// Why the body was not a provider stream, or `None` when it was one (or was empty: a
    /// body with nothing in it says nothing either way, and no other notice is due).
    /// `dialect`: the one the stream was decoded as, when known (an undetected dialect has its
    /// own notice).
    pub fn verdict(&self, dialect: Option<Dialect>) -> Option<String> {
        if self.head.is_empty() {
            return None;
        }
        if self.frames == 0 {
            let hint = match self.head.first() {
                Some(b'{' | b'[') => " (a JSON document: was the model asked without streaming?)",
                _ => "",
            };
            return Some(format!(
                "the round body is not a provider stream: its {} bytes hold no SSE `data:` event{hint}; it begins `{}`",
                self.bytes,
                self.sample()
            ));
        }
        match dialect {
            Some(d) if self.decoded == 0 => Some(format!(
                "the round body is not a {} stream: none of its {} SSE events is one that dialect sends; it begins `{}`",
                name(d),
                self.frames,
                self.sample()
            )),
            _ => None,
        }
    }

    fn sample(&self) -> String {
        let mut s = self.head.escape_ascii().to_string();
        if self.bytes > self.lead + self.head.len() {
            s.push('…');
        }
        s
    }
}

fn name(d: Dialect) -> &'static str {
    match d {
        Dialect::Anthropic => "anthropic",
        Dialect::OpenaiChat => "openai-chat",
        Dialect::OpenaiResponses => "openai-responses",
        Dialect::Gemini => "gemini",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(body: &[u8], frames: usize, decoded: usize) -> BodyShape {
        let mut s = BodyShape::default();
        for chunk in body.chunks(7) {
            s.bytes(chunk);
        }
        s.frames(frames);
        s.decoded(&vec![StreamEvent::Stop(crate::stream::StopReason::EndTurn); decoded]);
        s
    }

    #[test]
    fn a_body_without_frames_is_named_with_its_first_bytes() {
        let v = shape(b"\n  \x89PNG\r\n\x1a\n\0\0binary", 0, 0).verdict(None).unwrap();
        assert!(v.contains("hold no SSE `data:` event"), "{v}");
        assert!(v.contains("begins `\\x89PNG\\r\\n\\x1a\\n\\x00\\x00binary`"), "{v}");
        let json = shape(br#"{"choices": []}"#, 0, 0).verdict(Some(Dialect::OpenaiChat)).unwrap();
        assert!(json.contains("a JSON document"), "{json}");
    }

    #[test]
    fn events_no_dialect_sends_are_named() {
        let v = shape(b"data: {\"hello\": 1}\n\n", 1, 0).verdict(Some(Dialect::Gemini)).unwrap();
        assert!(v.contains("not a gemini stream"), "{v}");
        assert_eq!(
            shape(b"data: {}\n\n", 1, 0).verdict(None),
            None,
            "an undetected dialect has its own notice"
        );
    }

    #[test]
    fn streams_and_empty_bodies_pass() {
        assert_eq!(shape(b"data: [DONE]\n\n", 1, 1).verdict(Some(Dialect::OpenaiChat)), None);
        assert_eq!(shape(b" \r\n\n", 0, 0).verdict(Some(Dialect::OpenaiChat)), None);
        assert_eq!(shape(b"", 0, 0).verdict(None), None);
    }

    #[test]
    fn the_sample_is_bounded_whatever_the_body() {
        let big = vec![b'x'; 1 << 20];
        let v = shape(&big, 0, 0).verdict(None).unwrap();
        assert!(v.len() < 300, "{}", v.len());
        assert!(v.contains("1048576 bytes"), "{v}");
    }
}
