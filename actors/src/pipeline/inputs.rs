//! A session's questions from MCP servers (elicitation) waiting for the host's answer.
//!
//! A running call's server asks; the session emits `input_required` with a number and waits
//! for [`Dispatcher::answer_input`](crate::Dispatcher::answer_input) at most
//! `mcp.elicitation_timeout_ms`; silence, a cancelled round or a closed session decline it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use tokio::sync::oneshot;
use toolslot::tool::InputAnswer;

/// Why an answer was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// No question with that number waits (never asked, answered, or timed out).
    #[error("no input request {0} is waiting in this session")]
    NotWaiting(u64),
    /// The content does not match what the server asked for.
    #[error("{0}")]
    Invalid(String),
}

struct Waiting {
    schema: Value,
    tx: oneshot::Sender<InputAnswer>,
}

/// The questions waiting in one session.
#[derive(Default)]
pub struct PendingInputs {
    next: AtomicU64,
    waiting: Mutex<HashMap<u64, Waiting>>,
}

impl PendingInputs {
    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Waiting>> {
        // One insert or removal per lock: a poisoned lock holds a whole map.
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a question whose answer must match `schema`: its number (from 1), and where
    /// the answer arrives (closed without one when the question is dropped).
    pub fn open(&self, schema: Value) -> (u64, oneshot::Receiver<InputAnswer>) {
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (tx, rx) = oneshot::channel();
        self.waiting().insert(n, Waiting { schema, tx });
        (n, rx)
    }

    /// Answers question `n`. An accepted answer's content is checked against the requested
    /// schema first; a refused answer leaves the question waiting.
    ///
    /// # Errors
    /// [`InputError::NotWaiting`] or [`InputError::Invalid`].
    pub fn answer(&self, n: u64, answer: InputAnswer) -> Result<(), InputError> {
        let mut waiting = self.waiting();
        let Some(w) = waiting.get(&n) else {
            return Err(InputError::NotWaiting(n));
        };
        if let InputAnswer::Accept(content) = &answer {
            toolslot::mcp::elicitation::check_answer(&w.schema, content).map_err(InputError::Invalid)?;
        }
        let Some(w) = waiting.remove(&n) else {
            return Err(InputError::NotWaiting(n));
        };
        w.tx.send(answer).map_err(|_| InputError::NotWaiting(n))
    }

    /// Forgets question `n` (it was answered or its wait ended).
    pub fn forget(&self, n: u64) {
        self.waiting().remove(&n);
    }

    /// Drops every waiting question (round cancelled, session closed): each is declined.
    pub fn drop_all(&self) {
        self.waiting().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_reach_their_question_once_and_are_checked() {
        let inputs = PendingInputs::default();
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let (n, mut rx) = inputs.open(schema);
        assert_eq!(n, 1);
        assert!(matches!(
            inputs.answer(n, InputAnswer::Accept(json!({"n": "x"}))),
            Err(InputError::Invalid(_))
        ));
        assert!(rx.try_recv().is_err(), "a refused answer leaves the question waiting");
        inputs.answer(n, InputAnswer::Accept(json!({"n": 3}))).unwrap();
        assert_eq!(rx.try_recv().unwrap(), InputAnswer::Accept(json!({"n": 3})));
        assert_eq!(inputs.answer(n, InputAnswer::Decline), Err(InputError::NotWaiting(1)));
        let (m, mut rx) = inputs.open(json!({}));
        assert_eq!(m, 2);
        inputs.drop_all();
        assert!(rx.try_recv().is_err(), "dropped: the asker reads a decline");
    }
}
