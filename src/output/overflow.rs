//! The overflow store: full outputs saved at the instant they are truncated.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Why saving or reading a full output failed.
#[derive(Debug, thiserror::Error)]
pub enum OverflowError {
    /// Writing the file failed (disk full, unwritable folder).
    #[error("could not save the full output in {}: {source}", dir.display())]
    Write {
        /// The folder.
        dir: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// No such output for this session: unknown, expired, or another session's.
    #[error("no saved output `{0}` in this session (unknown, expired after the retention period, or saved by another session)")]
    NotFound(String),
    /// The ref is not of the form this store hands out.
    #[error("`{0}` is not a saved-output ref (expected the ref=<pid>-<millis>-<seq> value from a truncation marker)")]
    BadRef(String),
    /// The slice asked for is not valid.
    #[error("{0}")]
    BadSlice(String),
}

/// Saved full outputs, one folder per session. Ids hold the process id, a millisecond
/// timestamp and a sequence number, so two processes writing to one folder never collide.
#[derive(Debug)]
pub struct OverflowStore {
    dir: PathBuf,
}

/// One sequence for the whole process, so two stores over one folder never collide either.
static SEQ: AtomicU64 = AtomicU64::new(0);

impl OverflowStore {
    /// A store in `dir` (created on first save).
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// The store's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn session_dir(&self, session: &str) -> PathBuf {
        let safe: String = session
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(80)
            .collect();
        self.dir.join(if safe.is_empty() { "_".to_string() } else { safe })
    }

    fn next_id() -> String {
        let millis = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
        format!("{}-{}-{}", std::process::id(), millis, SEQ.fetch_add(1, Ordering::Relaxed))
    }

    /// A file for `session` that an output is streamed into while it is produced; readable
    /// under its ref once committed, removed if dropped before.
    pub fn writer(&self, session: &str) -> OverflowWriter {
        OverflowWriter {
            dir: self.session_dir(session),
            id: Self::next_id(),
            file: None,
            created: false,
        }
    }

    /// Saves `text` for `session`, atomically (temp file + rename), and returns its ref.
    ///
    /// # Errors
    /// [`OverflowError::Write`] when the folder or file cannot be written.
    pub fn save(&self, session: &str, text: &str) -> Result<String, OverflowError> {
        let dir = self.session_dir(session);
        let err = |source| OverflowError::Write { dir: dir.clone(), source };
        std::fs::create_dir_all(&dir).map_err(err)?;
        let id = Self::next_id();
        let tmp = dir.join(format!(".{id}.tmp"));
        let done = dir.join(format!("{id}.txt"));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &done)
        };
        if let Err(e) = write() {
            let _ = std::fs::remove_file(&tmp);
            return Err(err(e));
        }
        Ok(id)
    }

    /// Reads a saved output back, for the session that saved it only.
    ///
    /// # Errors
    /// [`OverflowError::BadRef`] for a malformed ref, [`OverflowError::NotFound`] otherwise.
    pub fn load(&self, session: &str, id: &str) -> Result<String, OverflowError> {
        let parts: Vec<&str> = id.split('-').collect();
        if parts.len() != 3 || parts.iter().any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) {
            return Err(OverflowError::BadRef(id.to_string()));
        }
        std::fs::read_to_string(self.session_dir(session).join(format!("{id}.txt"))).map_err(|_| OverflowError::NotFound(id.to_string()))
    }

    /// Removes saved outputs older than `days` (0 keeps everything); returns how many went.
    pub fn remove_older_than(&self, days: u64) -> usize {
        if days == 0 {
            return 0;
        }
        let cutoff = SystemTime::now()
            .checked_sub(Duration::from_secs(days * 86_400))
            .unwrap_or(UNIX_EPOCH);
        let mut removed = 0;
        let Ok(sessions) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        for session in sessions.flatten() {
            let Ok(files) = std::fs::read_dir(session.path()) else {
                continue;
            };
            for f in files.flatten() {
                let old = f.metadata().and_then(|m| m.modified()).is_ok_and(|t| t < cutoff);
                if old && std::fs::remove_file(f.path()).is_ok() {
                    removed += 1;
                }
            }
        }
        removed
    }
}

/// An output being saved as it streams (see [`OverflowStore::writer`]): written to a temp file,
/// renamed to its final name when committed, so a reader never sees half of it.
#[derive(Debug)]
pub struct OverflowWriter {
    dir: PathBuf,
    id: String,
    file: Option<std::fs::File>,
    /// Whether the temp file exists (and must go if the writer is dropped uncommitted).
    created: bool,
}

impl OverflowWriter {
    fn tmp(&self) -> PathBuf {
        self.dir.join(format!(".{}.tmp", self.id))
    }
}

impl crate::tool::OutputFile for OverflowWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.file.is_none() {
            std::fs::create_dir_all(&self.dir)?;
            self.file = Some(std::fs::File::create(self.tmp())?);
            self.created = true;
        }
        match &mut self.file {
            Some(f) => f.write_all(bytes),
            None => Ok(()),
        }
    }

    fn commit(mut self: Box<Self>) -> std::io::Result<String> {
        if self.file.is_none() {
            self.write(&[])?;
        }
        if let Some(f) = self.file.take() {
            f.sync_all()?;
        }
        std::fs::rename(self.tmp(), self.dir.join(format!("{}.txt", self.id)))?;
        self.created = false;
        Ok(std::mem::take(&mut self.id))
    }
}

impl Drop for OverflowWriter {
    fn drop(&mut self) {
        // Committed, or never written: nothing to remove.
        if self.created {
            let _ = std::fs::remove_file(self.tmp());
        }
    }
}

/// Which part of a saved output to hand back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slice {
    /// Bytes from `offset`, at most `limit`.
    Bytes {
        /// Start byte.
        offset: usize,
        /// Bytes at most.
        limit: usize,
    },
    /// Lines from `offset` (0-based), at most `limit`.
    Lines {
        /// First line.
        offset: usize,
        /// Lines at most.
        limit: usize,
    },
    /// The first lines.
    Head(usize),
    /// The last lines.
    Tail(usize),
    /// Lines matching a regex, with context lines around each.
    Grep {
        /// The pattern.
        pattern: String,
        /// Lines of context.
        context: usize,
    },
}

impl Slice {
    /// Cuts `text` as asked, bounded to `max_bytes` (a cut result says so).
    ///
    /// # Errors
    /// [`OverflowError::BadSlice`] for an invalid pattern.
    pub fn apply(&self, text: &str, max_bytes: usize) -> Result<String, OverflowError> {
        let lines: Vec<&str> = text.lines().collect();
        let numbered = |from: usize, to: usize| -> String {
            (from..to.min(lines.len()))
                .map(|i| format!("{:>6}\t{}\n", i + 1, lines[i]))
                .collect()
        };
        let out = match self {
            Slice::Bytes { offset, limit } => {
                let mut start = (*offset).min(text.len());
                while !text.is_char_boundary(start) {
                    start += 1;
                }
                let mut end = start.saturating_add(*limit).min(text.len());
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                text[start..end].to_string()
            }
            Slice::Lines { offset, limit } => numbered(*offset, offset.saturating_add(*limit)),
            Slice::Head(n) => numbered(0, *n),
            Slice::Tail(n) => numbered(lines.len().saturating_sub(*n), lines.len()),
            Slice::Grep { pattern, context } => {
                let re = regex::Regex::new(pattern).map_err(|e| OverflowError::BadSlice(format!("invalid pattern `{pattern}`: {e}")))?;
                let mut keep = vec![false; lines.len()];
                for (i, l) in lines.iter().enumerate() {
                    if re.is_match(l) {
                        for k in keep
                            .iter_mut()
                            .take((i + context + 1).min(lines.len()))
                            .skip(i.saturating_sub(*context))
                        {
                            *k = true;
                        }
                    }
                }
                let mut out = String::new();
                let mut last: Option<usize> = None;
                for (i, l) in lines.iter().enumerate().filter(|(i, _)| keep[*i]) {
                    if last.is_some_and(|p| p + 1 != i) {
                        out.push_str("--\n");
                    }
                    out.push_str(&format!("{:>6}\t{}\n", i + 1, l));
                    last = Some(i);
                }
                if out.is_empty() {
                    format!("no line matches `{pattern}`")
                } else {
                    out
                }
            }
        };
        if out.len() <= max_bytes {
            return Ok(out);
        }
        let mut end = max_bytes;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        Ok(format!(
            "{}\n[... slice cut at {max_bytes} bytes; ask for a smaller range ...]",
            &out[..end]
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_session_isolation() {
        let dir = tempfile::tempdir().unwrap();
        let store = OverflowStore::new(dir.path().to_path_buf());
        let id = store.save("s1", "alpha\nbeta\ngamma\n").unwrap();
        assert_eq!(store.load("s1", &id).unwrap(), "alpha\nbeta\ngamma\n");
        assert!(matches!(store.load("s2", &id), Err(OverflowError::NotFound(_))));
        assert!(matches!(store.load("s1", "../../etc/passwd"), Err(OverflowError::BadRef(_))));
        assert!(matches!(store.load("s1", "1-2-99999"), Err(OverflowError::NotFound(_))));
        // No temp file is left behind.
        let names: Vec<String> = std::fs::read_dir(dir.path().join("s1"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into())
            .collect();
        assert_eq!(names, vec![format!("{id}.txt")]);
    }

    #[test]
    fn ids_never_collide() {
        let dir = tempfile::tempdir().unwrap();
        let a = OverflowStore::new(dir.path().to_path_buf());
        let b = OverflowStore::new(dir.path().to_path_buf());
        let mut ids = std::collections::HashSet::new();
        for i in 0..50 {
            assert!(ids.insert(a.save("s", &i.to_string()).unwrap()));
            assert!(ids.insert(b.save("s", &i.to_string()).unwrap()));
        }
    }

    #[test]
    fn unwritable_folder_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, "x").unwrap();
        let store = OverflowStore::new(file);
        assert!(matches!(store.save("s", "text"), Err(OverflowError::Write { .. })));
    }

    #[test]
    fn retention_removes_old_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = OverflowStore::new(dir.path().to_path_buf());
        let old = store.save("s", "old").unwrap();
        let new = store.save("s", "new").unwrap();
        let old_path = dir.path().join("s").join(format!("{old}.txt"));
        let f = std::fs::File::options().write(true).open(&old_path).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(8 * 86_400)).unwrap();
        assert_eq!(store.remove_older_than(7), 1);
        assert!(store.load("s", &old).is_err());
        assert!(store.load("s", &new).is_ok());
        assert_eq!(store.remove_older_than(0), 0);
    }

    #[test]
    fn slices() {
        let text = "a\nb\nc\nerror here\nd\ne\n";
        assert_eq!(Slice::Head(2).apply(text, 1000).unwrap(), "     1\ta\n     2\tb\n");
        assert_eq!(Slice::Tail(1).apply(text, 1000).unwrap(), "     6\te\n");
        assert_eq!(Slice::Lines { offset: 2, limit: 1 }.apply(text, 1000).unwrap(), "     3\tc\n");
        assert_eq!(Slice::Bytes { offset: 2, limit: 3 }.apply(text, 1000).unwrap(), "b\nc");
        assert_eq!(
            Slice::Grep {
                pattern: "error".into(),
                context: 1
            }
            .apply(text, 1000)
            .unwrap(),
            "     3\tc\n     4\terror here\n     5\td\n"
        );
        assert!(
            Slice::Grep {
                pattern: "(".into(),
                context: 0
            }
            .apply(text, 1000)
            .is_err()
        );
        assert!(Slice::Head(6).apply(text, 10).unwrap().contains("slice cut at 10 bytes"));
    }
}
