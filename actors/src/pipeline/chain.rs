//! The typed messages of the chain: what each stage forwards to the next one's mailbox.
//!
//! assembler ─[`Assembled`]→ planner ─[`Planned`]→ approval ─[`Planned`]→ executor
//! ─[`Outcomes`]→ post-processor → the host's event sink; the planner also sends
//! [`Speculate`] straight to the executor for calls that may start before the stream ends.
//!
//! Every message names its round. A round's end ([`RoundClose`]) travels behind the round's
//! calls on the same path, so FIFO mailboxes hand it to each stage after them; the
//! post-processor's ledger ([`crate::pipeline::round_ledger`]) completes the round once every index has its
//! result. No stage waits for a reply from the next one.

use std::sync::Arc;

use actix::Message;
use futures::Stream;
use serde_json::Value;
use toolslot::notice::Notice;
use toolslot::plan::Action;
use toolslot::plan::approval::Trace;
use toolslot::stream::{Dialect, RawCall, RoundEnd, StopReason, StreamEvent};
use toolslot::tool::{ToolError, ToolOutput};

/// A round of a session: the n-th message the session's assembler finished (0, 1, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RoundNo(pub u64);

/// One call's identity, made once by the planner and shared by every later message and event
/// about the call (reference-counted, never copied per stage).
#[derive(Debug, Clone)]
pub struct CallHead {
    /// Index in the response.
    pub index: usize,
    /// Provider id.
    pub id: Arc<str>,
    /// Resolved name (the written one when unresolved).
    pub name: Arc<str>,
    /// Arguments after repair.
    pub input: Arc<Value>,
    /// What repair made of the arguments (its call span's `toolslot.repair`).
    pub repair: toolslot::event::RepairMark,
}

/// A planned call on its way to execution: its identity and what was decided for it.
#[derive(Debug)]
pub struct Ticket {
    /// The call.
    pub head: CallHead,
    /// Run (and how) or refuse (and why). The approval stage may turn a run into a refusal.
    pub action: Action,
    /// Who decided, and with which rule (a remembered approval never covers a sticky ask).
    pub trace: Trace,
}

impl Ticket {
    /// A ticket refused with `error`.
    pub fn refused(head: CallHead, error: ToolError) -> Self {
        Self {
            head,
            action: Action::Refuse(error),
            trace: Trace::default(),
        }
    }
}

/// The end of a round as it travels the chain (the assembler's [`RoundEnd`], less the calls
/// the planner took out of it).
#[derive(Debug)]
pub struct RoundClose {
    /// Normalized stop reason.
    pub stop_reason: StopReason,
    /// Assistant text, forged calls stripped.
    pub text: String,
    /// How many calls the round had: the ledger waits for a result for each index below.
    pub call_count: usize,
}

/// Assembler → planner: calls whose arguments are complete, and possibly the round's end.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Assembled {
    /// The round.
    pub round: RoundNo,
    /// Calls reported complete, in the order they completed.
    pub calls: Vec<RawCall>,
    /// The round ended (its unfinished calls inside).
    pub end: Option<RoundEnd>,
    /// The submission ends after this: nothing more comes from its stream.
    pub closes: bool,
}

/// Planner → executor: calls that may start now, before the stream has ended (each is
/// read-only, parallel-safe, Auto, and every call before it in the round started early too).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Speculate {
    /// The round.
    pub round: RoundNo,
    /// The calls, in index order (each one's action is a run).
    pub calls: Vec<Ticket>,
}

/// Planner → approval and approval → executor: planned calls in index order (none of them
/// started early), and possibly the round's end.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Planned {
    /// The round.
    pub round: RoundNo,
    /// The calls.
    pub calls: Vec<Ticket>,
    /// The round ended: every call of it has been sent.
    pub end: Option<RoundClose>,
    /// The submission ends after this round.
    pub closes: bool,
}

/// One call's outcome on its way to the post-processor.
#[derive(Debug)]
pub struct PostItem {
    /// The call.
    pub head: CallHead,
    /// The tool's output, or why there is none.
    pub result: Result<ToolOutput, ToolError>,
    /// Wall time from start to end (0 when it never started).
    pub duration_ms: u64,
    /// The content comes from outside (a network or MCP tool): it is enveloped.
    pub external: bool,
    /// What the loop guard said when the executor counted this outcome (see
    /// [`crate::pipeline::stages::batch_executor`]): notices, and a hint for the model.
    pub guard: (Vec<Notice>, Option<String>),
    /// The call's span, held open until the result is filed, so the loop guard's verdict and
    /// the output's cut land on it (disabled when nothing exports spans).
    pub span: tracing::Span,
}

impl PostItem {
    /// A call that did not run: `error` is its outcome.
    pub fn not_run(head: CallHead, error: ToolError) -> Self {
        Self {
            head,
            result: Err(error),
            duration_ms: 0,
            external: false,
            guard: (Vec::new(), None),
            span: tracing::Span::none(),
        }
    }
}

/// Executor → post-processor: outcomes, and possibly the round's end (sent after every
/// outcome of the round).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Outcomes {
    /// The round.
    pub round: RoundNo,
    /// The outcomes.
    pub items: Vec<PostItem>,
    /// The round ended.
    pub end: Option<RoundClose>,
    /// The submission ends after this round.
    pub closes: bool,
}

/// The provider's raw SSE bytes, as they arrive.
pub type ByteStream = std::pin::Pin<Box<dyn Stream<Item = Result<Vec<u8>, std::io::Error>> + Send>>;

/// What a host submits as a round: what the head of the chain reads.
pub enum RoundInput {
    /// The provider's raw SSE bytes, as they arrive.
    Bytes(ByteStream),
    /// Events the host already decoded.
    Events(Vec<StreamEvent>),
}

/// A submission's input, handed to the head of the chain.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Submit {
    /// The provider's response.
    pub input: RoundInput,
    /// Its dialect, when the host said (otherwise the session's, or detected).
    pub dialect: Option<Dialect>,
}

/// Submission → approval: drop every pending question (the round was cancelled or the session
/// closed); the calls they held are refused as cancelled.
#[derive(Message)]
#[rtype(result = "()")]
pub struct DropPending;
