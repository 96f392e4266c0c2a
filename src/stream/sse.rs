//! Incremental Server-Sent Events framing, exactly as the WHATWG specification defines it.
//!
//! Bytes arrive in chunks that may end anywhere: inside a UTF-8 character, between the `\r`
//! and `\n` of a line end, inside a field name. The parser keeps the unfinished line as bytes
//! and only decodes whole lines, so no chunking changes the events it yields.
//!
//! # Example
//! ```
//! use toolslot::stream::sse::SseParser;
//! let mut p = SseParser::new();
//! let mut events = p.feed(b"event: ping\nda");
//! events.extend(p.feed(b"ta: {}\n\n"));
//! assert_eq!(events[0].event, "ping");
//! assert_eq!(events[0].data, "{}");
//! ```

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field; empty when the stream gave none (the spec's "message").
    pub event: String,
    /// The `data:` lines joined by `\n`.
    pub data: String,
    /// The last `id:` seen, if any (shared: a long id followed by many events is not copied
    /// into each of them).
    pub id: Option<std::sync::Arc<str>>,
}

/// An incremental SSE parser. Feed it chunks; call [`SseParser::finish`] at end of stream.
#[derive(Debug, Default)]
pub struct SseParser {
    /// The unfinished line.
    line: Vec<u8>,
    /// The previous chunk ended with `\r`: a `\n` at the start of the next one belongs to it.
    after_cr: bool,
    /// The first line has not been seen yet (a UTF-8 BOM is skipped there).
    started: bool,
    event: String,
    data: String,
    has_data: bool,
    last_id: Option<std::sync::Arc<str>>,
    /// The last `retry:` (ms): how long the server asks a client to wait before reconnecting.
    retry: Option<u64>,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// The last `id:` seen, whether or not an event came with it (a server primes a stream it
    /// may close with an event of an id and no data): what a reconnection resumes after.
    pub fn last_id(&self) -> Option<&std::sync::Arc<str>> {
        self.last_id.as_ref()
    }

    /// The last `retry:` the stream gave (ms).
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// The bytes held for the line and event not yet complete: what one message has grown to.
    pub fn held(&self) -> usize {
        self.line.len() + self.data.len() + self.event.len()
    }

    /// Parses `chunk`, returning the events it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        self.feed_into(chunk, &mut out);
        out
    }

    /// Parses `chunk`, appending the completed events to `out` (no allocation per call).
    pub fn feed_into(&mut self, mut chunk: &[u8], out: &mut Vec<SseEvent>) {
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while let Some(pos) = memchr::memchr2(b'\n', b'\r', chunk) {
            let ends_with_cr = chunk[pos] == b'\r';
            if self.line.is_empty() {
                self.process_line(&chunk[..pos], out);
            } else {
                self.line.extend_from_slice(&chunk[..pos]);
                let line = std::mem::take(&mut self.line);
                self.process_line(&line, out);
                self.line = line;
                self.line.clear();
            }
            chunk = &chunk[pos + 1..];
            if ends_with_cr {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.line.extend_from_slice(chunk);
    }

    /// Ends the stream: a last line without its line end is processed, and an event left
    /// without the blank line that would dispatch it is dispatched (recorded streams often
    /// end that way).
    pub fn finish(&mut self) -> Vec<SseEvent> {
        let mut out = Vec::new();
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, &mut out);
        }
        self.dispatch(&mut out);
        out
    }

    fn process_line(&mut self, mut line: &[u8], out: &mut Vec<SseEvent>) {
        if !self.started {
            self.started = true;
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                push_utf8(&mut self.data, value);
                self.has_data = true;
            }
            b"event" => {
                self.event.clear();
                push_utf8(&mut self.event, value);
            }
            // The spec ignores ids containing NUL.
            b"id" if !value.contains(&0) => {
                let mut id = String::new();
                push_utf8(&mut id, value);
                self.last_id = Some(id.into());
            }
            // Only digits, as the spec says; a recorded or proxied body never reconnects, a
            // live MCP stream may.
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                self.retry = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            }
            // Unknown fields are ignored by the spec.
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if !self.has_data {
            // The spec drops an event with no data, but resets its type.
            self.event.clear();
            return;
        }
        out.push(SseEvent {
            event: std::mem::take(&mut self.event),
            data: std::mem::take(&mut self.data),
            id: self.last_id.clone(),
        });
        self.has_data = false;
    }
}

/// Frames data-only recordings as SSE: each non-empty line becomes `data: <line>` plus a
/// blank line. Recordings kept as JSON lines (one `data:` payload a line) need this before
/// they are fed to a parser.
pub fn frame_data_lines(lines: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(lines.len() + lines.len() / 8);
    for line in lines.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line);
        out.extend_from_slice(b"\n\n");
    }
    out
}

fn push_utf8(out: &mut String, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(s) => out.push_str(s),
        Err(_) => out.push_str(&String::from_utf8_lossy(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_reconnection_needs_is_kept_across_events() {
        let mut p = SseParser::new();
        // A priming event (an id, empty data) is an event of no data, and where to resume.
        let primed = p.feed(b"id: ev-1\nretry: 2500\ndata:\n\n");
        assert_eq!(primed.len(), 1);
        assert_eq!(primed[0].data, "");
        assert_eq!(p.last_id().map(|i| &**i), Some("ev-1"));
        assert_eq!(p.retry(), Some(2500));
        // A `retry` that is not all digits is ignored, as the spec says.
        let _ = p.feed(b"retry: 10s\ndata: x\n\n");
        assert_eq!(p.retry(), Some(2500));
        assert_eq!(p.held(), 0);
        let _ = p.feed(b"data: unfinished");
        assert_eq!(p.held(), "data: unfinished".len());
    }

    fn all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for c in chunks {
            out.extend(p.feed(c));
        }
        out.extend(p.finish());
        out
    }

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
            id: None,
        }
    }

    #[test]
    fn spec_cases() {
        let cases: Vec<(&[u8], Vec<SseEvent>)> = vec![
            (b"data: a\n\n", vec![ev("", "a")]),
            (b"data: a\ndata: b\n\n", vec![ev("", "a\nb")]),
            (b"event: x\r\ndata: 1\r\n\r\n", vec![ev("x", "1")]),
            (b"event: x\rdata: 1\r\r", vec![ev("x", "1")]),
            (b": comment\ndata:no-space\n\n", vec![ev("", "no-space")]),
            (b"data:  two spaces\n\n", vec![ev("", " two spaces")]),
            (b"data\n\n", vec![ev("", "")]),
            (b"event: lonely\n\ndata: x\n\n", vec![ev("", "x")]),
            (b"data: last without blank line", vec![ev("", "last without blank line")]),
            (b"\xEF\xBB\xBFdata: bom\n\n", vec![ev("", "bom")]),
            (b"retry: 10\nfoo: bar\ndata: z\n\n", vec![ev("", "z")]),
        ];
        for (input, expected) in cases {
            assert_eq!(all(&[input]), expected, "{:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn ids_persist() {
        let got = all(&[b"id: 7\ndata: a\n\ndata: b\n\n"]);
        assert_eq!(got[0].id.as_deref(), Some("7"));
        assert_eq!(got[1].id.as_deref(), Some("7"));
    }

    #[test]
    fn splits_inside_crlf_utf8_and_field_names() {
        let whole = "event: é\r\ndata: ü€\r\n\r\nda".to_string() + "ta: x\n\n";
        let bytes = whole.as_bytes();
        let expected = all(&[bytes]);
        for i in 0..bytes.len() {
            assert_eq!(all(&[&bytes[..i], &bytes[i..]]), expected, "split at {i}");
        }
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(all(&singles), expected);
        assert_eq!(expected, vec![ev("é", "ü€"), ev("", "x")]);
    }

    proptest::proptest! {
        #[test]
        fn any_chunking_gives_the_same_events(
            body in proptest::collection::vec(proptest::prop_oneof![
                proptest::strategy::Just("data: {\"a\":1}\n".to_string()),
                proptest::strategy::Just("\n".to_string()),
                proptest::strategy::Just("\r\n".to_string()),
                proptest::strategy::Just("\r".to_string()),
                proptest::strategy::Just("event: x\n".to_string()),
                proptest::strategy::Just(": c\n".to_string()),
                proptest::strategy::Just("data: é€😀\n".to_string()),
                proptest::strategy::Just("id: 3\n".to_string()),
            ], 0..30),
            cuts in proptest::collection::vec(0usize..400, 0..12),
        ) {
            let text = body.concat();
            let bytes = text.as_bytes();
            let expected = all(&[bytes]);
            let mut points: Vec<usize> = cuts.into_iter().filter(|c| *c <= bytes.len()).collect();
            points.sort();
            let mut chunks = Vec::new();
            let mut last = 0;
            for p in points {
                chunks.push(&bytes[last..p]);
                last = p;
            }
            chunks.push(&bytes[last..]);
            proptest::prop_assert_eq!(all(&chunks), expected);
        }
    }
}
