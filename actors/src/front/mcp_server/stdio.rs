//! The stdio transport of `toolslot mcp`: a client's JSON-RPC lines, read with a bound, each
//! request answered.
//!
//! rmcp's own stdio transport drops a line over its length limit without a word, and answers a
//! line that is JSON but no message it can read with `Invalid request` and no id: either way
//! the client waits for ever for the answer to its request. Here a request too long to hold is
//! skimmed for its id without being held and answered once its line has passed, naming
//! `mcp.max_message_bytes`; one that cannot be read gets an error under its own id saying what
//! is wrong (`malformed::read_line`), and each request of a batch (a JSON array, which the
//! protocol dropped) is told under its id that batches are not accepted. A line that is not
//! JSON carries no id to answer and stays unanswered, as in every MCP SDK; so does an answer or
//! a notification that cannot be read.

use std::future::Future;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use toolslot::mcp::lines::{BoundedLines, LineRead, write_line};

use super::malformed;

/// What a write says once the transport is closed.
const CLOSED: &str = "the transport is closed";

/// toolslot's own error answers being written at once, at most: a client that floods bad
/// lines without reading its answers does not pile up tasks (the rest are dropped, logged).
const ANSWERS_IN_FLIGHT: u32 = 64;

/// The client's end of the connection (see the module documentation).
pub struct ClientLines<R, W> {
    lines: BoundedLines<BufReader<R>>,
    out: Arc<tokio::sync::Mutex<Option<W>>>,
    answers: Arc<tokio::sync::Semaphore>,
}

impl<R: AsyncRead + Unpin, W> ClientLines<R, W> {
    /// Reads `read`, holding at most `max` bytes of a message; writes `write`.
    pub fn new(read: R, write: W, max: usize) -> Self {
        Self {
            lines: BoundedLines::of_requests(BufReader::with_capacity(1 << 16, read), max),
            out: Arc::new(tokio::sync::Mutex::new(Some(write))),
            answers: Arc::new(tokio::sync::Semaphore::new(ANSWERS_IN_FLIGHT as usize)),
        }
    }
}

impl<R, W> ClientLines<R, W>
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// Sends toolslot's own answer to a request rmcp never saw.
    fn answer(&self, id: Value, code: i32, message: &str) {
        self.answer_all(vec![id], code, message);
    }

    /// Sends the same error under each of `ids` (the requests of one line), as one write of one
    /// line per answer. Written by a task of its own: `receive` may be dropped at any await, and
    /// a line half written would corrupt the next.
    fn answer_all(&self, ids: Vec<Value>, code: i32, message: &str) {
        let Ok(permit) = Arc::clone(&self.answers).try_acquire_owned() else {
            tracing::warn!(
                requests = ids.len(),
                "error answers to the MCP client were dropped: it reads none of them"
            );
            return;
        };
        let out = Arc::clone(&self.out);
        let mut lines = Vec::new();
        for id in ids {
            if !lines.is_empty() {
                lines.push(b'\n');
            }
            let answer = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
            lines.extend_from_slice(answer.to_string().as_bytes());
        }
        tokio::spawn(async move {
            if let Err(e) = write_line(&out, lines, CLOSED).await {
                tracing::debug!(error = %e, "an error answer to the MCP client was not written");
            }
            drop(permit);
        });
    }
}

impl<R, W> rmcp::transport::Transport<RoleServer> for ClientLines<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(&mut self, item: TxJsonRpcMessage<RoleServer>) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let out = Arc::clone(&self.out);
        let encoded = serde_json::to_vec(&item).map_err(std::io::Error::other);
        async move { write_line(&out, encoded?, CLOSED).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            match self.lines.read().await {
                LineRead::Eof => return None,
                LineRead::Line => match malformed::read_line(self.lines.line()) {
                    malformed::Line::Message(m) => return Some(*m),
                    malformed::Line::Skip => {}
                    malformed::Line::Refused { id, code, message } => self.answer(id, code, &message),
                    // One write for the whole batch: however many requests it holds, each is
                    // answered (one answer in flight per line, not per request).
                    malformed::Line::Batch(ids) => {
                        self.answer_all(ids, rmcp::model::ErrorCode::INVALID_REQUEST.0, malformed::BATCH_REFUSED)
                    }
                },
                LineRead::Oversize(id, bytes) => {
                    let max = self.lines.max();
                    tracing::warn!(bytes, max, "a client's message over mcp.max_message_bytes was dropped");
                    if let Some(id) = id.filter(|id| !id.is_null()) {
                        self.answer(
                            id,
                            rmcp::model::ErrorCode::INVALID_REQUEST.0,
                            &format!("invalid request: the message is over mcp.max_message_bytes ({max} bytes); it was not read"),
                        );
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // toolslot's own answers go out first (briefly: a client that reads nothing more must
        // not hold the close).
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), self.answers.acquire_many(ANSWERS_IN_FLIGHT)).await;
        drop(self.out.lock().await.take());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::transport::Transport;
    use tokio::io::AsyncBufReadExt;

    fn by_id_code(answers: &[Value], id: Value) -> Value {
        answers
            .iter()
            .find(|a| a["id"] == id)
            .map(|a| a["error"]["code"].clone())
            .unwrap_or_else(|| panic!("no answer for {id}"))
    }

    #[tokio::test]
    async fn every_request_is_answered_under_its_id() {
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":\"big\",\"method\":\"tools/call\",\"params\":{{\"x\":\"{}\"}}}}\n",
            "a".repeat(40000)
        );
        // More requests in one batch than answers may be in flight: each still gets its own.
        let many = format!(
            "[{}]\n",
            (0..200)
                .map(|n| format!("{{\"jsonrpc\":\"2.0\",\"id\":\"m{n}\",\"method\":\"ping\"}}"))
                .collect::<Vec<_>>()
                .join(",")
        );
        let input = [
            "not json at all\n",
            "{\"id\":7,\"method\":\"tools/list\"}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":[1]}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":5}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":{\"n\":1},\"method\":\"ping\"}\n",
            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\",\"params\":5}\n",
            &big,
            // An answer too long to read: nobody waits for a word about it.
            &big.replace(
                "\"id\":\"big\",\"method\":\"tools/call\",\"params\"",
                "\"id\":\"answer\",\"result\"",
            ),
            "[{\"jsonrpc\":\"2.0\",\"id\":\"b1\",\"method\":\"ping\"},{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"},{\"jsonrpc\":\"2.0\",\"id\":\"b2\",\"method\":\"tools/list\"}]\n",
            "[{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}]\n",
            &many,
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"ping\"}\r\n",
        ]
        .concat();
        let (client_out, theirs) = tokio::io::duplex(1 << 16);
        let mut t = ClientLines::new(std::io::Cursor::new(input.into_bytes()), client_out, 20000);
        let message = t.receive().await.expect("the ping");
        let json = serde_json::to_value(&message).unwrap();
        assert_eq!((json["id"].clone(), json["method"].clone()), (json!(11), json!("ping")));
        assert!(t.receive().await.is_none());
        drop(t);
        let mut answers = Vec::new();
        let mut read = tokio::io::BufReader::new(theirs).lines();
        while let Ok(Some(line)) = read.next_line().await {
            answers.push(serde_json::from_str::<Value>(&line).unwrap());
        }
        assert_eq!(answers.len(), 207, "{answers:?}");
        for n in 0..200 {
            assert_eq!(by_id_code(&answers, json!(format!("m{n}"))), -32600);
        }
        let by_id = |id: Value| {
            answers
                .iter()
                .find(|a| a["id"] == id)
                .cloned()
                .unwrap_or_else(|| panic!("no answer for {id}: {answers:?}"))
        };
        let a = by_id(json!(7));
        assert_eq!(a["error"]["code"], -32600);
        assert!(a["error"]["message"].as_str().unwrap().contains("\"jsonrpc\": \"2.0\""), "{a}");
        let a = by_id(json!(9));
        assert_eq!(a["error"]["code"], -32602);
        assert!(a["error"]["message"].as_str().unwrap().contains("needs params"), "{a}");
        let a = by_id(json!(10));
        assert!(a["error"]["message"].as_str().unwrap().contains("`method`"), "{a}");
        let a = by_id(json!({"n": 1}));
        assert!(
            a["error"]["message"]
                .as_str()
                .unwrap()
                .contains("`id` must be a string or an integer (got an object)"),
            "{a}"
        );
        for id in ["b1", "b2"] {
            let a = by_id(json!(id));
            assert_eq!(a["error"]["code"], -32600);
            assert!(a["error"]["message"].as_str().unwrap().contains("a batch"), "{a}");
        }
        let a = by_id(json!("big"));
        assert!(
            a["error"]["message"]
                .as_str()
                .unwrap()
                .contains("mcp.max_message_bytes (20000 bytes)"),
            "{a}"
        );
    }
}
