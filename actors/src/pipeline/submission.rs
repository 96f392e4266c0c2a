//! A submission's life outside the stages: its start (the session is claimed, its event stream
//! opened, added tools announced, the input handed to the head of the chain), its cancellation,
//! and its end (called by the tail, behind the submission's last round).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::mpsc;
use toolslot::event::PipelineEvent;
use toolslot::notice::{Notice, NoticeKind};
use toolslot::stream::Dialect;

use crate::pipeline::audit::Sealing;
use crate::pipeline::chain::{DropPending, RoundInput, Submit};
use crate::pipeline::session::SessionShared;
use crate::pipeline::turn::SubmissionState;
use crate::pipeline::wiring::Stages;

/// Why a submission could not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotStarted {
    /// A submission of the session is still running.
    Running,
    /// The session's stages are gone.
    Gone,
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
    let number = shared.turn().issue();
    let (tx, rx) = mpsc::unbounded_channel();
    let submit = Submit { input, dialect };
    // The host's span, taken here on its own thread: its rounds are children of it.
    let parent = tracing::Span::current();
    if !waits {
        shared.busy.send_replace(true);
        begin(shared, stages, number, tx, submit, parent)?;
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
        let _ = begin(&waiting, &stages, number, tx, submit, parent);
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
    parent: tracing::Span,
) -> Result<(), NotStarted> {
    shared.settled.store(false, Ordering::SeqCst);
    *shared.trace_parent.lock().unwrap_or_else(|p| p.into_inner()) = parent;
    shared.set_sink(Some(tx));
    {
        // Under the turn's lock: a cancellation aimed at the previous submission either came
        // before (and is cleared here) or finds this one's number and leaves it alone.
        let mut t = shared.turn();
        t.begin(number);
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
            shared.submission_finished();
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
    let t = shared.turn();
    if !t.is_running(number) {
        return false;
    }
    cancel(shared, stages);
    true
}

/// Where submission `number` is in its life.
pub(crate) fn state(shared: &SessionShared, number: u64) -> SubmissionState {
    shared.turn().state(number)
}

/// Closes the session: as a cancellation, and nothing runs any more; its ledger gets its
/// closing record (the returned [`Sealing`] waits for it).
pub(crate) fn close(shared: &Arc<SessionShared>, stages: &Stages) -> Sealing {
    shared.closed.store(true, Ordering::SeqCst);
    // Before the cancellation: from here on the ledger refuses to let a call run.
    let sealing = shared.audit.close();
    cancel(shared, stages);
    shared.lsp.shutdown();
    sealing
}
