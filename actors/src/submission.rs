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

/// Starts a submission; its events arrive on the returned receiver, the last one being the
/// `round_complete` of its last round, after which the receiver ends.
pub(crate) fn start(
    shared: &SessionShared,
    stages: &Stages,
    input: RoundInput,
    dialect: Option<Dialect>,
) -> Result<mpsc::UnboundedReceiver<PipelineEvent>, NotStarted> {
    if shared.round_running.swap(true, Ordering::SeqCst) {
        return Err(NotStarted::Running);
    }
    let (tx, rx) = mpsc::unbounded_channel();
    shared.set_sink(Some(tx));
    shared.set_cancelled(false);
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
    let submit = Submit { input, dialect };
    match stages.assembler.try_send(submit) {
        Ok(()) => Ok(rx),
        // Only submissions reach the assembler's mailbox, one at a time: it is never full.
        Err(actix::dev::SendError::Full(submit)) => {
            stages.assembler.do_send(submit);
            Ok(rx)
        }
        Err(actix::dev::SendError::Closed(_)) => {
            finished(shared);
            Err(NotStarted::Gone)
        }
    }
}

/// The submission is over: the session is free for the next one before the host's receiver
/// ends, so a host that submits as soon as it sees the end is not refused.
pub(crate) fn finished(shared: &SessionShared) {
    shared.round_running.store(false, Ordering::SeqCst);
    shared.set_sink(None);
}

/// Cancels the running submission: waiting approvals end as rejections, running calls are
/// stopped with a `cancelled` result, and every round still completes.
pub(crate) fn cancel(shared: &SessionShared, stages: &Stages) {
    shared.set_cancelled(true);
    stages.approval.do_send(DropPending);
}

/// Closes the session: as a cancellation, and nothing runs any more.
pub(crate) fn close(shared: &Arc<SessionShared>, stages: &Stages) {
    shared.closed.store(true, Ordering::SeqCst);
    cancel(shared, stages);
}
