//! Making written records durable: the ledger file's sync, then its head, for every record
//! written so far at once (a group commit).
//!
//! Why: a record must be on disk, and sealed by its head, before the call it allows runs. A
//! sync per record costs far more than writing it (BENCHMARKS.md, "The ledger record"), and a
//! session's parallel calls write their records at the same moment. So a writer appends its
//! record under the ledger's lock and lets it go; then, under this one's, it finds its record
//! already sealed by another writer's sync, or syncs everything written so far and writes the
//! head of the newest record. Every record is still on disk and sealed before its writer
//! returns; only the syncs are shared. A crash between a group's sync and its head leaves the
//! group's records past the head, which `verify` reports as unsealed (their MACs hold).

use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::LedgerError;
use super::head::HeadFile;
use super::seal::Head;

/// One ledger's sync and head, shared by its writers.
#[derive(Debug)]
pub struct Sealer {
    io: Mutex<Io>,
    /// The head of the newest record written (set under the ledger's lock, after the write).
    latest: Mutex<Option<Head>>,
    /// When the sealing thread will next seal everything written, if it will: a record due
    /// later than that needs no entry of its own (see `later::seal_within`).
    next_due: Mutex<Option<Instant>>,
}

#[derive(Debug)]
struct Io {
    /// The ledger file (its own descriptor, so syncing needs no lock on the ledger).
    file: File,
    path: PathBuf,
    heads: PathBuf,
    name: String,
    /// Laid out when the ledger was opened without a head, else at the first seal.
    head: Option<HeadFile>,
    /// Records on disk and sealed.
    sealed: u64,
    /// A head was written and not yet synced (a sync is due at the sealing thread).
    head_unsynced: bool,
}

impl Sealer {
    /// `head` is the head file when it is already laid out in slots by this process.
    pub(super) fn new(file: File, path: PathBuf, heads: PathBuf, name: String, sealed: u64, head: Option<HeadFile>) -> Sealer {
        Sealer {
            io: Mutex::new(Io {
                file,
                path,
                heads,
                name,
                head,
                sealed,
                head_unsynced: false,
            }),
            latest: Mutex::new(None),
            next_due: Mutex::new(None),
        }
    }

    /// Whether a record due by `at` needs an entry of its own at the sealing thread: none is
    /// due by then. If so, its entry is the one due next.
    pub(super) fn needs_due(&self, at: Instant) -> bool {
        let mut next = self.next_due.lock().unwrap_or_else(|p| p.into_inner());
        if next.is_some_and(|due| due <= at) {
            return false;
        }
        *next = Some(at);
        true
    }

    /// Makes everything written so far durable, as the entry due at `at`: the records that
    /// left it to that entry were all written before it is cleared here.
    pub(super) fn seal_written(&self, at: Instant) -> Result<(), LedgerError> {
        {
            let mut next = self.next_due.lock().unwrap_or_else(|p| p.into_inner());
            if *next == Some(at) {
                *next = None;
            }
        }
        let written = self.latest.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|h| h.records);
        match written {
            Some(seq) => self.seal_through(seq),
            None => Ok(()),
        }
    }

    /// Notes the head of a record just written.
    pub(super) fn written(&self, head: Head) {
        *self.latest.lock().unwrap_or_else(|p| p.into_inner()) = Some(head);
    }

    /// Returns once record `seq` (and every one before it) is on disk and sealed by the head,
    /// the head synced too.
    ///
    /// # Errors
    /// [`LedgerError`] when the ledger could not be synced (the record may not be on disk) or
    /// its head not written (the record is; the next seal covers it).
    pub fn seal_through(&self, seq: u64) -> Result<(), LedgerError> {
        self.seal(seq, None)
    }

    /// As [`Sealer::seal_through`], but the head, written at once, may wait up to `head_within`
    /// for its sync (zero: synced at once).
    ///
    /// # Errors
    /// As [`Sealer::seal_through`].
    pub fn seal_through_within(self: &Arc<Self>, seq: u64, head_within: Duration) -> Result<(), LedgerError> {
        self.seal(seq, (!head_within.is_zero()).then_some((self, head_within)))
    }

    /// Syncs a head written without its sync, if any.
    ///
    /// # Errors
    /// [`LedgerError`] when the head file could not be synced.
    pub fn sync_head(&self) -> Result<(), LedgerError> {
        let mut io = self.io.lock().unwrap_or_else(|p| p.into_inner());
        if !io.head_unsynced {
            return Ok(());
        }
        if let Some(file) = &io.head {
            file.sync().map_err(|e| LedgerError {
                path: super::head_path(&io.heads, &io.name),
                reason: format!("its head cannot be synced: {e}"),
            })?;
        }
        io.head_unsynced = false;
        Ok(())
    }

    fn seal(&self, seq: u64, lazy_head: Option<(&Arc<Sealer>, Duration)>) -> Result<(), LedgerError> {
        let mut io = self.io.lock().unwrap_or_else(|p| p.into_inner());
        if io.sealed >= seq {
            if lazy_head.is_none() && io.head_unsynced {
                drop(io);
                return self.sync_head();
            }
            return Ok(());
        }
        // Taken before the sync: every record it counts was written before, so the sync holds it.
        let head = self.latest.lock().unwrap_or_else(|p| p.into_inner()).clone();
        // Never claim a record durable that was not written (a writer asks only after writing).
        let Some(head) = head.filter(|h| h.records >= seq) else {
            return Err(LedgerError {
                path: io.path.clone(),
                reason: format!("record {seq} was never written"),
            });
        };
        io.file.sync_data().map_err(|e| LedgerError {
            path: io.path.clone(),
            reason: e.to_string(),
        })?;
        let sync_head = lazy_head.is_none();
        let written = match &mut io.head {
            Some(file) => file.write(&head, sync_head),
            None => HeadFile::create(&io.heads, &io.name, &head).map(|file| io.head = Some(file)),
        };
        written.map_err(|e| LedgerError {
            path: super::head_path(&io.heads, &io.name),
            reason: format!("its head cannot be written: {e}"),
        })?;
        io.sealed = head.records;
        match lazy_head {
            None => io.head_unsynced = false,
            // One sync due per window, however many heads are written in it.
            Some((me, within)) if !io.head_unsynced => {
                io.head_unsynced = true;
                drop(io);
                super::later::sync_head_within(Arc::clone(me), within);
            }
            Some(_) => {}
        }
        Ok(())
    }
}
