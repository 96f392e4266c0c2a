//! `NativeRound`: one submission's bytes in, its events and host tool calls out; and the
//! results as a provider's messages.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyString;
use serde_json::Value;
use toolslot::event::{PipelineEvent, RepairMark, ToolResult};
use toolslot::results::{ResultFormat, SentNames};
use toolslot_actors::front::embed::{HostCall, Item, Submission};

use crate::errors::{ConfigError, same_process};
use crate::guard;

/// What `next` hands Python: an event (its type, its JSON text, and for a `round_complete`
/// the names the model wrote for its calls), a host tool call, or the end.
enum Next {
    Event(&'static str, String, Option<Vec<(usize, String, String)>>),
    Call(HostCall),
    Nothing,
    End,
}

/// A round in flight (`Session.submit` drives one).
#[pyclass(module = "toolslot._native", frozen)]
pub struct NativeRound {
    submission: Submission,
    pid: u32,
    /// The names of the calls assembled and not yet answered: a round's results take theirs
    /// (Gemini's `functionResponse` needs them), so Python need not read every event.
    names: Mutex<SentNames>,
}

impl NativeRound {
    pub(crate) fn new(submission: Submission, pid: u32) -> Self {
        NativeRound {
            submission,
            pid,
            names: Mutex::new(SentNames::default()),
        }
    }

    fn convert(&self, item: Item) -> Next {
        match item {
            Item::Event(e) => {
                let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
                names.observe(&e);
                let sent = match &e {
                    PipelineEvent::RoundComplete { results, .. } => {
                        let sent = results
                            .iter()
                            .filter_map(|r| {
                                names
                                    .get(r.index, &r.tool_use_id)
                                    .map(|n| (r.index, r.tool_use_id.clone(), n.to_string()))
                            })
                            .collect();
                        names.answered(results);
                        Some(sent)
                    }
                    _ => None,
                };
                // An event always serializes (plain data); the fallback keeps the event
                // visible rather than dropping it.
                let json = serde_json::to_string(&e).unwrap_or_else(|err| {
                    serde_json::json!({"type": "notice", "kind": "stream_error", "message": err.to_string()}).to_string()
                });
                Next::Event(event_type(&e), json, sent)
            }
            Item::Call(c) => Next::Call(c),
        }
    }
}

/// The event's `type`, as its JSON names it.
fn event_type(e: &PipelineEvent) -> &'static str {
    match e {
        PipelineEvent::Notice(_) => "notice",
        PipelineEvent::CallAssembled { .. } => "call_assembled",
        PipelineEvent::CallStarted { .. } => "call_started",
        PipelineEvent::ApprovalRequired { .. } => "approval_required",
        PipelineEvent::Subagent { .. } => "subagent",
        PipelineEvent::ApprovalDecided { .. } => "approval_decided",
        PipelineEvent::ApprovalExpired { .. } => "approval_expired",
        PipelineEvent::InputRewritten { .. } => "input_rewritten",
        PipelineEvent::CallFinished { .. } => "call_finished",
        PipelineEvent::Progress { .. } => "progress",
        PipelineEvent::InputRequired { .. } => "input_required",
        PipelineEvent::InputAnswered { .. } => "input_answered",
        PipelineEvent::RoundComplete { .. } => "round_complete",
    }
}

/// `(0, None)` nothing ready, `(1, (type, json, names))` an event, `(2, NativeCall)` a host tool
/// call, `(3, None)` the end.
fn to_python(py: Python<'_>, next: Next) -> PyResult<(u8, Py<PyAny>)> {
    Ok(match next {
        Next::Nothing => (0, py.None()),
        Next::Event(kind, json, names) => (1, (kind, json, names).into_pyobject(py)?.into_any().unbind()),
        Next::Call(call) => {
            let native = NativeCall::new(call);
            (2, Py::new(py, native)?.into_any())
        }
        Next::End => (3, py.None()),
    })
}

#[pymethods]
impl NativeRound {
    /// The next bytes of the provider's response.
    fn push(&self, bytes: Vec<u8>) -> PyResult<()> {
        guard(|| {
            same_process(self.pid)?;
            self.submission.push(bytes);
            Ok(())
        })
    }

    /// The response has ended.
    fn finish(&self) -> PyResult<()> {
        guard(|| {
            self.submission.finish();
            Ok(())
        })
    }

    /// The response failed while it was read (reported as a `stream_error`).
    fn fail(&self, reason: String) -> PyResult<()> {
        guard(|| {
            self.submission.fail(reason);
            Ok(())
        })
    }

    /// The next item, waiting with the GIL released, at most `timeout` seconds when given.
    #[pyo3(signature = (timeout=None))]
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<(u8, Py<PyAny>)> {
        guard(|| {
            same_process(self.pid)?;
            let next = py.detach(|| match timeout {
                None => self.submission.next().map_or(Next::End, |i| self.convert(i)),
                Some(secs) => match self.submission.next_timeout(Duration::from_secs_f64(secs.max(0.0))) {
                    Ok(Some(item)) => self.convert(item),
                    Ok(None) => Next::Nothing,
                    Err(()) => Next::End,
                },
            });
            to_python(py, next)
        })
    }

    /// The file descriptor that becomes readable whenever the round may have something to
    /// read (an event loop watches it); valid while this round is held.
    fn wake_fd(&self) -> i32 {
        self.submission.wake_pipe().read_fd()
    }

    /// Empties the wake pipe (before looking at the round again).
    fn drain_wake(&self) {
        self.submission.wake_pipe().drain();
    }

    /// Every item ready now, without waiting (the GIL is held: nothing blocks).
    fn ready(&self, py: Python<'_>) -> PyResult<Vec<(u8, Py<PyAny>)>> {
        guard(|| {
            same_process(self.pid)?;
            let mut out = Vec::new();
            loop {
                match self.submission.try_next() {
                    Ok(Some(item)) => out.push(to_python(py, self.convert(item))?),
                    Ok(None) => break,
                    Err(()) => {
                        out.push(to_python(py, Next::End)?);
                        break;
                    }
                }
            }
            Ok(out)
        })
    }
}

/// A host tool's run, waiting for Python's answer.
#[pyclass(module = "toolslot._native", frozen)]
pub struct NativeCall {
    call: Mutex<Option<HostCall>>,
    #[pyo3(get)]
    session: String,
    #[pyo3(get)]
    index: usize,
    #[pyo3(get)]
    id: String,
    #[pyo3(get)]
    name: String,
    input: Arc<Value>,
}

impl NativeCall {
    fn new(call: HostCall) -> Self {
        NativeCall {
            session: call.session.clone(),
            index: call.index,
            id: call.id.clone(),
            name: call.name.clone(),
            input: Arc::new(call.input.clone()),
            call: Mutex::new(Some(call)),
        }
    }

    fn answer(&self, outcome: Result<String, String>) {
        if let Some(call) = self.call.lock().unwrap_or_else(|p| p.into_inner()).take() {
            call.finish(outcome);
        }
    }
}

#[pymethods]
impl NativeCall {
    /// The arguments, as JSON text.
    #[getter]
    fn input_json(&self) -> String {
        self.input.to_string()
    }

    /// The call's result.
    // Read lossily: a str may hold lone surrogates (a file name read with `surrogateescape`),
    // which are no UTF-8; refusing it would raise out of the round and lose the call's result.
    fn finish_ok(&self, text: &Bound<'_, PyString>) -> PyResult<()> {
        guard(|| {
            self.answer(Ok(text.to_string_lossy().into_owned()));
            Ok(())
        })
    }

    /// The call failed: `message` becomes its `tool_error` result.
    fn finish_err(&self, message: &Bound<'_, PyString>) -> PyResult<()> {
        guard(|| {
            self.answer(Err(message.to_string_lossy().into_owned()));
            Ok(())
        })
    }
}

/// A `round_complete`'s results (JSON text of the list) as `format`'s messages (JSON text),
/// Gemini's named from `names_json`, `[[index, id, name as the model wrote it]…]`.
#[pyfunction]
pub fn results_as_messages(format: &str, results_json: &str, names_json: &str) -> PyResult<String> {
    guard(|| {
        let format: ResultFormat = format
            .parse()
            .map_err(|e: toolslot::results::UnknownFormat| ConfigError::new_err(e.to_string()))?;
        let results: Vec<ToolResult> = serde_json::from_str(results_json).map_err(|e| ConfigError::new_err(format!("results: {e}")))?;
        let sent: Vec<(usize, String, String)> =
            serde_json::from_str(names_json).map_err(|e| ConfigError::new_err(format!("names: {e}")))?;
        let mut names = SentNames::default();
        for (index, id, name) in sent {
            names.observe(&PipelineEvent::CallAssembled {
                index,
                id: id.into(),
                name: name.into(),
                input: Arc::new(Value::Null),
                repair: RepairMark::None,
                thought_signature: None,
            });
        }
        let messages = toolslot::results::to_messages(format, &results, &names);
        Ok(Value::Array(messages).to_string())
    })
}
