//! JSON-RPC lines read with a bound, from either end of a stdio connection: the server's
//! answers to toolslot's MCP client, and a client's requests to `toolslot mcp`.
//!
//! A line over the bound is not held: it is skimmed for its top-level `"id"`
//! ([`super::frame::IdScanner`]) so the request it belongs to can be answered at once, saying
//! why, instead of waiting for ever (rmcp's transports drop such a line without a word).

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use super::frame::IdScanner;

/// What [`BoundedLines::read`] found.
#[derive(Debug)]
pub enum LineRead {
    /// A whole line (its newline included) is in [`BoundedLines::line`].
    Line,
    /// A line too long to hold: its id once known (reported at most once per line, as soon as
    /// it is seen), and the bytes read of it so far.
    Oversize(Option<Value>, u64),
    /// The other end closed (or reading failed).
    Eof,
}

/// A line too long to hold, being skipped.
#[derive(Debug, Default)]
struct Oversize {
    scanner: IdScanner,
    bytes: u64,
    answered: bool,
}

/// Lines of `R`, each at most `max` bytes held.
#[derive(Debug)]
pub struct BoundedLines<R> {
    reader: R,
    max: usize,
    line: Vec<u8>,
    oversize: Option<Oversize>,
}

impl<R: AsyncBufRead + Unpin> BoundedLines<R> {
    /// Lines of `reader`, holding at most `max` bytes of one.
    pub fn new(reader: R, max: usize) -> Self {
        Self {
            reader,
            max,
            line: Vec::new(),
            oversize: None,
        }
    }

    /// The longest line held (bytes).
    pub fn max(&self) -> usize {
        self.max
    }

    /// The line [`LineRead::Line`] reported; cleared by the next read.
    pub fn line(&self) -> &[u8] {
        &self.line
    }

    /// Reads the next line, bounded. Cancel-safe: partial state lives in `self`, and a chunk
    /// is consumed only once it has been taken.
    pub async fn read(&mut self) -> LineRead {
        if self.oversize.is_none() && self.line.ends_with(b"\n") {
            // The line reported last time, read by now.
            self.line.clear();
        }
        loop {
            let (take, newline) = {
                let available = match self.reader.fill_buf().await {
                    Ok(a) if !a.is_empty() => a,
                    _ => return LineRead::Eof,
                };
                let newline = memchr::memchr(b'\n', available);
                let take = newline.map_or(available.len(), |i| i + 1);
                let chunk = &available[..take];
                if let Some(o) = &mut self.oversize {
                    o.scanner.feed(chunk);
                    o.bytes += take as u64;
                } else if self.line.len() + take > self.max {
                    let mut o = Oversize::default();
                    o.scanner.feed(&self.line);
                    o.scanner.feed(chunk);
                    o.bytes = (self.line.len() + take) as u64;
                    self.line.clear();
                    self.oversize = Some(o);
                } else {
                    self.line.extend_from_slice(chunk);
                }
                (take, newline.is_some())
            };
            self.reader.consume(take);
            match &mut self.oversize {
                None if newline => return LineRead::Line,
                None => {}
                Some(o) => {
                    // Answered as soon as the id is known, not when the line ends.
                    if !o.answered && o.scanner.id().is_some() {
                        o.answered = true;
                        let (id, bytes) = (o.scanner.id().cloned(), o.bytes);
                        if newline {
                            self.oversize = None;
                        }
                        return LineRead::Oversize(id, bytes);
                    }
                    if newline {
                        let o = self.oversize.take().unwrap_or_default();
                        if !o.answered {
                            return LineRead::Oversize(None, o.bytes);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_read_whole_and_an_oversize_one_skimmed_for_its_id() {
        let long = format!("{{\"jsonrpc\":\"2.0\",\"id\":7,\"params\":\"{}\"}}\n", "a".repeat(5000));
        let input = format!("{{\"id\":1}}\n{long}{{\"x\":\"{}\"}}\nlast\n", "b".repeat(5000));
        let mut lines = BoundedLines::new(tokio::io::BufReader::with_capacity(64, input.as_bytes()), 100);
        assert!(matches!(lines.read().await, LineRead::Line));
        assert_eq!(lines.line(), b"{\"id\":1}\n");
        match lines.read().await {
            LineRead::Oversize(Some(id), bytes) => {
                assert_eq!(id, 7);
                assert!(bytes <= 200, "answered at once, not at the line's end: {bytes}");
            }
            other => panic!("{other:?}"),
        }
        // No id: reported once the line ends.
        match lines.read().await {
            LineRead::Oversize(None, bytes) => assert_eq!(bytes, 5009),
            other => panic!("{other:?}"),
        }
        assert!(matches!(lines.read().await, LineRead::Line));
        assert_eq!(lines.line(), b"last\n");
        assert!(matches!(lines.read().await, LineRead::Eof));
    }
}
