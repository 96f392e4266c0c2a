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
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
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
static QUEUE: OnceLock<Option<Arc<Queue>>> = OnceLock::new();

/// What waits for the sealing thread, and whether that thread sleeps.
///
/// Not a channel: a send wakes the thread for every entry, while an entry due after the one
/// the thread already sleeps for (nearly all: every entry waits the same bound) can wait until
/// that wake-up. Only an entry due sooner, or one for a thread with nothing to wait for, wakes it.
struct Queue {
    state: Mutex<State>,
    wake: Condvar,
}

struct State {
    waiting: BinaryHeap<Reverse<Due>>,
    /// The thread sleeps: until this instant, or (`Some(None)`) until woken.
    sleeping: Option<Option<Instant>>,
    /// How many times an entry woke the thread.
    #[cfg(test)]
    woken: usize,
}

impl Queue {
    fn new() -> Queue {
        Queue {
            state: Mutex::new(State {
                waiting: BinaryHeap::new(),
                sleeping: None,
                #[cfg(test)]
                woken: 0,
            }),
            wake: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every change leaves the heap whole; a panic while sealing happens outside the lock.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, due: Due) {
        let mut state = self.lock();
        let sooner = match state.sleeping {
            Some(None) => true,
            Some(Some(until)) => due.at < until,
            // Awake: it looks at the heap again before it sleeps.
            None => false,
        };
        state.waiting.push(Reverse(due));
        if sooner {
            state.sleeping = None;
            #[cfg(test)]
            {
                state.woken += 1;
            }
            self.wake.notify_one();
        }
    }
}

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
        let queue = Arc::new(Queue::new());
        let theirs = Arc::clone(&queue);
        std::thread::Builder::new()
            .name("toolslot-ledger-seal".into())
            .spawn(move || run(&theirs))
            .map(|_| queue)
            .map_err(|e| tracing::warn!(error = %e, "ledger: no sealing thread; every record is sealed before it is handed on"))
            .ok()
    });
    match queue {
        Some(queue) => {
            queue.push(due);
            Ok(())
        }
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
/// another sync covered costs a look at its ledger's state). It lives as long as the process.
fn run(queue: &Queue) {
    let mut state = queue.lock();
    loop {
        let now = Instant::now();
        let mut ready = Vec::new();
        while state.waiting.peek().is_some_and(|Reverse(first)| first.at <= now) {
            if let Some(Reverse(due)) = state.waiting.pop() {
                ready.push(due);
            }
        }
        if !ready.is_empty() {
            drop(state);
            for due in &ready {
                // The thread outlives a seal that panics: nothing else would seal what follows.
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| seal(due))).is_err() {
                    tracing::error!("ledger: sealing a record or head panicked; it is left to the ledger's next sync");
                }
            }
            state = queue.lock();
            continue;
        }
        let until = state.waiting.peek().map(|Reverse(first)| first.at);
        state.sleeping = Some(until);
        state = match until {
            None => queue.wake.wait(state).unwrap_or_else(|p| p.into_inner()),
            Some(at) => {
                queue
                    .wake
                    .wait_timeout(state, at.saturating_duration_since(now))
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            }
        };
        state.sleeping = None;
    }
}

fn seal(due: &Due) {
    if let Err(e) = now(due) {
        tracing::error!(error = %e, "ledger: a record or head written earlier could not be made durable");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{Ledger, Seal};

    fn until(queue: &Queue, what: &str, done: impl Fn(&State) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done(&queue.lock()) {
            assert!(Instant::now() < deadline, "the sealing thread never got to: {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn only_an_entry_due_sooner_than_the_threads_wake_up_wakes_it() {
        let dir = tempfile::tempdir().unwrap();
        let seal = Seal::open_or_create(&dir.path().join("keys/ledger.key"), &[&dir.path().join("ledger")]).unwrap();
        let sealer = Ledger::open(&dir.path().join("ledger"), "s", seal).unwrap().sealer();
        let queue = Arc::new(Queue::new());
        let theirs = Arc::clone(&queue);
        std::thread::spawn(move || run(&theirs));
        until(&queue, "sleep with nothing to wait for", |s| s.sleeping == Some(None));
        let head = |at: Instant| Due {
            at,
            what: What::Head,
            sealer: Arc::clone(&sealer),
        };
        let first = Instant::now() + Duration::from_secs(60);
        queue.push(head(first));
        until(&queue, "sleep until the first entry", |s| s.sleeping == Some(Some(first)));
        // Due later than the thread's wake-up: they wait for it.
        for n in 1..=10 {
            queue.push(head(first + Duration::from_millis(n)));
        }
        assert_eq!(queue.lock().woken, 1, "only the entry it had nothing to wait for woke it");
        // Due sooner: woken, and it is done at once, the others left waiting.
        queue.push(head(Instant::now()));
        until(&queue, "take the entry due now", |s| {
            s.waiting.len() == 11 && s.sleeping == Some(Some(first))
        });
        assert_eq!(queue.lock().woken, 2);
    }
}
