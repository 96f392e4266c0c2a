//! A submission's life outside the stages: its start (the session is claimed, its event stream
//! opened, added tools announced, the input handed to the head of the chain), its cancellation,
//! and its end (called by the tail, behind the submission's last round).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::Stream;
use tokio::sync::mpsc;
use toolslot::event::PipelineEvent;
use toolslot::notice::{Notice, NoticeKind};
use toolslot::stream::{Dialect, StreamEvent};

use crate::approval::DropPending;
use crate::session::SessionShared;
use crate::stages::Stages;
use crate::stream_assembler::Submit;

/// The provider's raw SSE bytes, as they arrive.
pub type ByteStream = std::pin::Pin<Box<dyn Stream<Item = Result<Vec<u8>, std::io::Error>> + Send>>;

/// What a host submits as a round.
pub enum RoundInput {
    /// The provider's raw SSE bytes, as they arrive.
    Bytes(ByteStream),
    /// Events the host already decoded.
    Events(Vec<StreamEvent>),
}

/// Why a submission could not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotStarted {
    /// A submission of the session is still running.
    Running,
    /// The session's stages are gone.
    Gone,
}

/// Which submission holds the session, by number (numbers start at 1, per session).
#[derive(Debug, Default)]
pub(crate) struct Turn {
    /// The submission running now (0: none).
    current: u64,
    /// The last number given out.
    issued: u64,
    /// The last number that began running.
    begun: u64,
}

/// Where a numbered submission is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmissionState {
    /// Accepted, waiting for the previous submission's body to end.
    Waiting,
    /// Holding the session.
    Running,
    /// Ended (or never known to this session).
    Over,
}

fn turn(shared: &SessionShared) -> std::sync::MutexGuard<'_, Turn> {
    // Each change is a plain store of numbers: a panic cannot leave it half-changed.
    shared.turn.lock().unwrap_or_else(|p| p.into_inner())
}

/// Starts a submission; its events arrive on the returned receiver, the last one being the
/// `round_complete` of its last round, after which the receiver ends. A submission sent once
/// the running one has completed its last round (its body has not quite ended) waits for it
/// on the session's thread instead of being refused. The number names this submission to
/// [`cancel_submission`] and [`state`].
pub(crate) fn start(
    shared: &Arc<SessionShared>,
    stages: &Stages,
    arbiter: &actix::ArbiterHandle,
    input: RoundInput,
    dialect: Option<Dialect>,
) -> Result<(u64, mpsc::UnboundedReceiver<PipelineEvent>), NotStarted> {
    let waits = take_turn(shared).ok_or(NotStarted::Running)?;
    let number = {
        let mut t = turn(shared);
        t.issued += 1;
        t.issued
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let submit = Submit { input, dialect };
    if !waits {
        shared.busy.send_replace(true);
        begin(shared, stages, number, tx, submit)?;
        return Ok((number, rx));
    }
    let waiting = Arc::clone(shared);
    let stages = stages.clone();
    let spawned = arbiter.spawn(async move {
        let mut busy = waiting.busy.subscribe();
        // Only one submission ever waits, so nobody else can take the turn in between.
        if busy.wait_for(|b| !*b).await.is_err() {
            return;
        }
        waiting.busy.send_replace(true);
        let _ = begin(&waiting, &stages, number, tx, submit);
    });
    if !spawned {
        shared.submissions.fetch_sub(1, Ordering::SeqCst);
        return Err(NotStarted::Gone);
    }
    Ok((number, rx))
}

/// Opens the submission's stream and hands its input to the head of the chain.
fn begin(
    shared: &SessionShared,
    stages: &Stages,
    number: u64,
    tx: mpsc::UnboundedSender<PipelineEvent>,
    submit: Submit,
) -> Result<(), NotStarted> {
    shared.settled.store(false, Ordering::SeqCst);
    shared.set_sink(Some(tx));
    {
        // Under the turn's lock: a cancellation aimed at the previous submission either came
        // before (and is cleared here) or finds this one's number and leaves it alone.
        let mut t = turn(shared);
        t.current = number;
        t.begun = number;
        // A cancellation of the submission before this one is not ours; a closed session
        // stays cancelled.
        if !shared.closed.load(Ordering::SeqCst) {
            shared.set_cancelled(false);
        }
    }
    // Tools added since the last submission become visible now, never mid-round.
    shared.memory.refresh();
    for notice in shared.memory.take_session_notices() {
        shared.notice(notice);
    }
    let added = shared.memory.take_added();
    if !added.is_empty() {
        shared.notice(Notice::new(
            NoticeKind::ToolsAdded,
            format!("tools appended to the catalog: {}", added.join(", ")),
        ));
    }
    match stages.assembler.try_send(submit) {
        Ok(()) => Ok(()),
        // Only submissions reach the assembler's mailbox, one at a time: it is never full.
        Err(actix::dev::SendError::Full(submit)) => {
            stages.assembler.do_send(submit);
            Ok(())
        }
        Err(actix::dev::SendError::Closed(_)) => {
            finished(shared);
            Err(NotStarted::Gone)
        }
    }
}

/// A place for a new submission: `Some(false)` runs now, `Some(true)` waits behind a
/// submission whose last round has completed, `None` is refused (a round is running, or one
/// already waits).
fn take_turn(shared: &SessionShared) -> Option<bool> {
    loop {
        let now = shared.submissions.load(Ordering::SeqCst);
        let next = match now {
            0 => 1,
            1 if shared.settled.load(Ordering::SeqCst) => 2,
            _ => return None,
        };
        if shared
            .submissions
            .compare_exchange(now, next, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return Some(next == 2);
        }
    }
}

/// The submission is over: the session is free for the next one before the host's receiver
/// ends, so a host that submits as soon as it sees the end is not refused.
pub(crate) fn finished(shared: &SessionShared) {
    turn(shared).current = 0;
    shared.set_sink(None);
    // The sink is cleared first, so the submission that waits sets its own after.
    shared.busy.send_replace(false);
    shared.submissions.fetch_sub(1, Ordering::SeqCst);
}

/// Cancels the running submission: waiting approvals end as rejections, running calls are
/// stopped with a `cancelled` result, and every round still completes.
pub(crate) fn cancel(shared: &SessionShared, stages: &Stages) {
    shared.set_cancelled(true);
    stages.approval.do_send(DropPending);
    shared.inputs.drop_all();
}

/// Cancels submission `number` if it is the one running (the others are left alone: one that
/// ended, or the next one, which a late cancellation must never reach). Returns whether it
/// was cancelled.
pub(crate) fn cancel_submission(shared: &SessionShared, stages: &Stages, number: u64) -> bool {
    let t = turn(shared);
    if number == 0 || t.current != number {
        return false;
    }
    cancel(shared, stages);
    true
}

/// Where submission `number` is in its life.
pub(crate) fn state(shared: &SessionShared, number: u64) -> SubmissionState {
    let t = turn(shared);
    if t.current == number && number != 0 {
        SubmissionState::Running
    } else if number > t.begun && number <= t.issued {
        SubmissionState::Waiting
    } else {
        SubmissionState::Over
    }
}

/// Closes the session: as a cancellation, and nothing runs any more.
pub(crate) fn close(shared: &Arc<SessionShared>, stages: &Stages) {
    shared.closed.store(true, Ordering::SeqCst);
    cancel(shared, stages);
    shared.lsp.shutdown();
}
