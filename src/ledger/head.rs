//! A ledger's head on disk: two slots written in place in turn, the newer valid one read.
//!
//! Why in place: rewriting the head as a new file renamed over the old one costs, per record,
//! a file creation, a sync of the file, the rename and a sync of the folder, which was most
//! of what a ledger record cost (BENCHMARKS.md, "The ledger record"). The file holds two
//! slots of one fixed size, written in turn (each write over the slot that does not hold the
//! newest head) and synced (one `fdatasync`), at once or within `audit.lazy_seal_ms`. A write
//! torn by a crash spoils only the slot it was writing: the reader takes the other, a head
//! before, the state a crash between records and their head always left and which
//! [`super::verify`] accepts (records past the head, reported unsealed). A head is written only
//! after the records it seals are synced, so no head on disk claims a record that is not.
//!
//! A head written by earlier versions (one JSON document) is still read, and the first head
//! a ledger seals after it is opened is written whole to a new file renamed into place, as
//! before: that is where the two slots are laid out (or laid out again).

use std::fs::File;
use std::path::Path;

use super::seal::{Head, head_path};

/// Slots are at least this long, and grow in steps of it.
const SLOT_STEP: usize = 256;

/// The head file of one ledger, open for writing in place.
#[derive(Debug)]
pub(crate) struct HeadFile {
    file: File,
    slot: usize,
    /// The slot the next head goes to: never the one holding the newest.
    next: usize,
}

impl HeadFile {
    /// Lays out the head file of the ledger named `name` in `heads` with both slots holding
    /// `head` (written to a new file, synced, renamed into place, the folder synced), and
    /// keeps it open for the heads that follow.
    pub(crate) fn create(heads: &Path, name: &str, head: &Head) -> std::io::Result<HeadFile> {
        let path = head_path(heads, name);
        let slot = slot_size(head);
        let one = slot_bytes(head, slot)?;
        let mut both = Vec::with_capacity(slot * 2);
        both.extend_from_slice(&one);
        both.extend_from_slice(&one);
        super::seal::write_atomic(heads, &path, &both)?;
        let file = std::fs::OpenOptions::new().write(true).open(&path)?;
        Ok(HeadFile { file, slot, next: 0 })
    }

    /// Writes `head` over the slot that does not hold the newest head, and syncs it when
    /// `sync` says so (else [`HeadFile::sync`] does later). The slot was sized for the longest
    /// head of the session, so every later head fits.
    pub(crate) fn write(&mut self, head: &Head, sync: bool) -> std::io::Result<()> {
        let bytes = slot_bytes(head, self.slot)?;
        write_at(&self.file, &bytes, (self.next * self.slot) as u64)?;
        if sync {
            self.file.sync_data()?;
        }
        self.next = 1 - self.next;
        Ok(())
    }

    /// Syncs the heads written so far.
    pub(crate) fn sync(&self) -> std::io::Result<()> {
        self.file.sync_data()
    }
}

/// The slot size for the heads of `head`'s session: room for the longest head it can have
/// (every count and MAC at full length), in steps of [`SLOT_STEP`].
fn slot_size(head: &Head) -> usize {
    let longest = Head {
        session: head.session.clone(),
        records: u64::MAX,
        mac: "f".repeat(64.max(head.mac.len())),
        closed: false,
        key_id: head.key_id.clone(),
    };
    let len = serde_json::to_string(&longest).map_or(SLOT_STEP, |t| t.len());
    (len + 1).div_ceil(SLOT_STEP).max(1) * SLOT_STEP
}

/// `head` as one slot: its JSON, spaces, and a newline at the end.
fn slot_bytes(head: &Head, slot: usize) -> std::io::Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec(head).map_err(std::io::Error::other)?;
    if bytes.len() >= slot {
        return Err(std::io::Error::other("the head does not fit its slot"));
    }
    bytes.resize(slot - 1, b' ');
    bytes.push(b'\n');
    Ok(bytes)
}

#[cfg(unix)]
fn write_at(file: &File, bytes: &[u8], at: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(bytes, at)
}

#[cfg(not(unix))]
fn write_at(mut file: &File, bytes: &[u8], at: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    file.seek(SeekFrom::Start(at))?;
    file.write_all(bytes)
}

/// The head a head file holds: one JSON document (the earlier form), or two slots of which
/// the valid one sealing more records wins.
///
/// # Errors
/// What is wrong when neither form holds a head.
pub(crate) fn parse(bytes: &[u8]) -> Result<Head, String> {
    let whole = serde_json::from_slice::<Head>(bytes);
    let whole_error = match whole {
        Ok(head) => return Ok(head),
        Err(e) => e.to_string(),
    };
    if bytes.len().is_multiple_of(2) && !bytes.is_empty() {
        let (a, b) = bytes.split_at(bytes.len() / 2);
        let read = |slot: &[u8]| serde_json::from_slice::<Head>(slot.trim_ascii_end()).ok();
        match (read(a), read(b)) {
            (Some(x), Some(y)) => return Ok(if y.records > x.records { y } else { x }),
            (Some(x), None) | (None, Some(x)) => return Ok(x),
            (None, None) => {}
        }
    }
    Err(whole_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(records: u64) -> Head {
        Head {
            session: "s-1".into(),
            records,
            mac: format!("{records:064x}"),
            closed: false,
            key_id: "0123456789abcdef".into(),
        }
    }

    #[test]
    fn heads_alternate_slots_and_the_newer_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = HeadFile::create(dir.path(), "s-1", &head(1)).unwrap();
        let path = head_path(dir.path(), "s-1");
        let len = std::fs::metadata(&path).unwrap().len();
        for n in 2..=5 {
            file.write(&head(n), true).unwrap();
            assert_eq!(parse(&std::fs::read(&path).unwrap()).unwrap(), head(n));
            assert_eq!(std::fs::metadata(&path).unwrap().len(), len, "written in place");
        }
    }

    /// A head file laid out with head 1, then heads 2 (first slot) and 3 (second) written.
    fn three_heads(dir: &Path) -> HeadFile {
        let mut file = HeadFile::create(dir, "s-1", &head(1)).unwrap();
        file.write(&head(2), true).unwrap();
        file.write(&head(3), true).unwrap();
        file
    }

    #[test]
    fn a_torn_slot_leaves_the_other_head() {
        let dir = tempfile::tempdir().unwrap();
        three_heads(dir.path());
        let mut bytes = std::fs::read(head_path(dir.path(), "s-1")).unwrap();
        // The next head was being written over slot 0 (head 2's) when the machine stopped.
        bytes[..40].copy_from_slice(&[b'x'; 40]);
        assert_eq!(parse(&bytes).unwrap(), head(3));
    }

    #[test]
    fn a_head_sealing_several_records_at_once_never_goes_over_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = three_heads(dir.path());
        // Records 4 to 7 sealed by one head: had the slot been picked by the count, 7 would
        // have gone over 3, and a torn write would have left 2.
        file.write(&head(7), true).unwrap();
        let mut bytes = std::fs::read(head_path(dir.path(), "s-1")).unwrap();
        assert_eq!(parse(&bytes).unwrap(), head(7));
        bytes[..40].copy_from_slice(&[b'x'; 40]);
        assert_eq!(parse(&bytes).unwrap(), head(3), "the slot not written holds the head before");
    }

    #[test]
    fn a_head_of_one_document_is_still_read_and_garbage_is_not_a_head() {
        let text = serde_json::to_string(&head(7)).unwrap();
        assert_eq!(parse(text.as_bytes()).unwrap(), head(7));
        assert!(parse(b"{}").is_err());
        assert!(parse(b"").is_err());
        assert!(parse(b"not a head, not a head").is_err());
    }
}
