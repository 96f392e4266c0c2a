//! Seals that may wait: records written now and made durable within a bound, by the next sync
//! of their ledger (another writer's, which covers everything written before it) or, failing
//! that, by one thread of the process when their time is up; and heads written at once whose
//! sync waits for that thread.
//!
//! Why: a call's outcome is what happened, not what allowed it. Its decision is sealed before
//! the call runs; syncing the outcome too before its result is handed on cost a sync and a head
//! per call (the outcomes of a round end at different moments, so they seldom share one), which
//! was most of the remote dispatcher's CPU (BENCHMARKS.md, "Outcomes sealed within a bound").
//! Written but not yet synced, an outcome survives the process; only a crash of the machine
//! within the bound can lose it, and then the ledger ends as if the call were still running.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::{LedgerError, Sealer};

/// What to make durable by `at`.
struct Due {
    at: Instant,
    what: What,
    sealer: Arc<Sealer>,
}

enum What {
    /// Every record written by then, with its head.
    Written,
    /// The head written last.
    Head,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}

impl Eq for Due {}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Due {
    fn cmp(&self, other: &Self) -> Ordering {
        self.at.cmp(&other.at)
    }
}

/// The sealing thread's queue; `None` when the thread could not be started.
static QUEUE: OnceLock<Option<mpsc::Sender<Due>>> = OnceLock::new();

/// Makes record `seq` of `sealer`'s ledger durable within `within`: at once when `within` is
/// zero, else by whichever comes first, a sync of the ledger for a later record or the sealing
/// thread at the deadline (a failure there is logged: the record's writer has moved on).
///
/// A ledger has one entry at the sealing thread at a time, sealing everything written when it
/// is due: a record due no sooner than that entry is left to it. An entry per record woke the
/// thread twice per call (once to queue it, once at its time), most often to find it sealed.
///
/// # Errors
/// [`LedgerError`] only when it sealed at once and that failed.
pub fn seal_within(sealer: Arc<Sealer>, seq: u64, within: Duration) -> Result<(), LedgerError> {
    if within.is_zero() {
        return sealer.seal_through(seq);
    }
    let at = Instant::now() + within;
    if !sealer.needs_due(at) {
        return Ok(());
    }
    queue(Due {
        at,
        what: What::Written,
        sealer,
    })
}

/// Syncs `sealer`'s head within `within` (see [`Sealer::seal_through_within`]).
pub(super) fn sync_head_within(sealer: Arc<Sealer>, within: Duration) {
    let due = Due {
        at: Instant::now() + within,
        what: What::Head,
        sealer,
    };
    if let Err(e) = queue(due) {
        tracing::error!(error = %e, "ledger: a head could not be synced");
    }
}

/// Hands `due` to the sealing thread (started on first use), or does it now without one.
fn queue(due: Due) -> Result<(), LedgerError> {
    let queue = QUEUE.get_or_init(|| {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("toolslot-ledger-seal".into())
            .spawn(move || run(&rx))
            .map(|_| tx)
            .map_err(|e| tracing::warn!(error = %e, "ledger: no sealing thread; every record is sealed before it is handed on"))
            .ok()
    });
    match queue {
        Some(tx) => match tx.send(due) {
            Ok(()) => Ok(()),
            Err(mpsc::SendError(due)) => now(&due),
        },
        None => now(&due),
    }
}

fn now(due: &Due) -> Result<(), LedgerError> {
    match due.what {
        What::Written => due.sealer.seal_written(due.at),
        What::Head => due.sealer.sync_head(),
    }
}

/// The sealing thread: seals each record, and syncs each head, when its time is up (one
/// another sync covered costs a look at its ledger's state).
fn run(rx: &mpsc::Receiver<Due>) {
    let mut waiting: BinaryHeap<Reverse<Due>> = BinaryHeap::new();
    loop {
        let got = match waiting.peek() {
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(Reverse(first)) => rx.recv_timeout(first.at.saturating_duration_since(Instant::now())),
        };
        match got {
            Ok(due) => waiting.push(Reverse(due)),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                // Nobody can add more: seal what is left and end.
                while let Some(Reverse(due)) = waiting.pop() {
                    seal(&due);
                }
                return;
            }
        }
        let now = Instant::now();
        while waiting.peek().is_some_and(|Reverse(first)| first.at <= now) {
            if let Some(Reverse(due)) = waiting.pop() {
                seal(&due);
            }
        }
    }
}

fn seal(due: &Due) {
    if let Err(e) = now(due) {
        tracing::error!(error = %e, "ledger: a record or head written earlier could not be made durable");
    }
}
