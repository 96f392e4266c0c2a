//! JSON-RPC lines read with a bound, from either end of a stdio connection: the server's
//! answers to toolslot's MCP client, and a client's requests to `toolslot mcp`.
//!
//! A line over the bound is not held: it is skimmed for its top-level `"id"`
//! ([`super::frame::IdScanner`]) so the request it belongs to can be answered at once, saying
//! why, instead of waiting for ever (rmcp's transports drop such a line without a word).

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

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
    /// Report an oversize line's id only when it is a request's, once the line has ended.
    requests_only: bool,
}

impl<R: AsyncBufRead + Unpin> BoundedLines<R> {
    /// Lines of `reader`, holding at most `max` bytes of one.
    pub fn new(reader: R, max: usize) -> Self {
        Self {
            reader,
            max,
            line: Vec::new(),
            oversize: None,
            requests_only: false,
        }
    }

    /// As [`BoundedLines::new`], for the side that answers requests: an oversize line is
    /// reported once it has ended, with its id only when it is a request (a top-level
    /// `"method"`), since an answer or a notification that cannot be read is answered to
    /// nobody.
    pub fn of_requests(reader: R, max: usize) -> Self {
        Self {
            requests_only: true,
            ..Self::new(reader, max)
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
                    let mut o = Oversize {
                        scanner: if self.requests_only {
                            IdScanner::for_requests()
                        } else {
                            IdScanner::default()
                        },
                        ..Oversize::default()
                    };
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
                Some(_) if self.requests_only && newline => {
                    let o = self.oversize.take().unwrap_or_default();
                    let id = o.scanner.id().filter(|_| o.scanner.saw_method()).cloned();
                    return LineRead::Oversize(id, o.bytes);
                }
                Some(_) if self.requests_only => {}
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

/// Writes `bytes` and a newline, whole, under the lock every message of the connection takes
/// (so lines written from several tasks never interleave), and flushes.
///
/// # Errors
/// The write's error; `NotConnected` (saying `closed`) once the writer was taken away.
pub async fn write_line<W: AsyncWrite + Unpin>(
    out: &tokio::sync::Mutex<Option<W>>,
    mut bytes: Vec<u8>,
    closed: &'static str,
) -> std::io::Result<()> {
    bytes.push(b'\n');
    let mut guard = out.lock().await;
    let w = guard
        .as_mut()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotConnected, closed))?;
    w.write_all(&bytes).await?;
    w.flush().await
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

    #[tokio::test]
    async fn on_the_answering_side_only_a_requests_id_is_reported() {
        let pad = "a".repeat(500);
        let input = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"x\":\"{pad}\"}}}}\n\
             {{\"jsonrpc\":\"2.0\",\"id\":2,\"params\":{{\"method\":\"{pad}\"}},\"method\":\"tools/call\"}}\n\
             {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\",\"params\":\"{pad}\"}}\n"
        );
        let mut lines = BoundedLines::of_requests(tokio::io::BufReader::with_capacity(64, input.as_bytes()), 100);
        let mut got = Vec::new();
        while let LineRead::Oversize(id, _) = lines.read().await {
            got.push(id);
        }
        // The answer and the notification: nobody to answer; the request: its id, though its
        // `method` came last (a nested `method` key is not it).
        assert_eq!(got, vec![None, Some(serde_json::json!(2)), None]);
    }
}
