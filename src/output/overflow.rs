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
    #[error(
        "`{0}` is not a saved-output ref (expected the ref=<pid>-<millis>-<seq> value from a truncation marker, or a handle such as h1)"
    )]
    BadRef(String),
    /// The slice asked for is not valid.
    #[error("{0}")]
    BadSlice(String),
}

/// Told of every output the store saves, so that a host can keep a copy where another process
/// can reach it (durable sessions keep one in NATS: a dispatcher that takes a session over
/// restores them with [`OverflowStore::restore`]).
pub trait SavedObserver: Send + Sync {
    /// `file` (in `session`'s folder) was just saved whole; called on the saving thread, so it
    /// should hand the work on rather than do it.
    fn saved(&self, session: &str, file: &Path);
}

/// Saved full outputs, one folder per session. Ids hold the process id, a millisecond
/// timestamp and a sequence number, so two processes writing to one folder never collide.
pub struct OverflowStore {
    dir: PathBuf,
    observer: std::sync::OnceLock<std::sync::Arc<dyn SavedObserver>>,
}

impl std::fmt::Debug for OverflowStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OverflowStore").field("dir", &self.dir).finish_non_exhaustive()
    }
}

/// One sequence for the whole process, so two stores over one folder never collide either.
static SEQ: AtomicU64 = AtomicU64::new(0);

impl OverflowStore {
    /// A store in `dir` (created on first save).
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            observer: std::sync::OnceLock::new(),
        }
    }

    /// Tells `observer` of every output saved from now on (once; a second observer is ignored).
    pub fn observe(&self, observer: std::sync::Arc<dyn SavedObserver>) {
        let _ = self.observer.set(observer);
    }

    fn tell(&self, session: &str, file: &Path) {
        if let Some(o) = self.observer.get() {
            o.saved(session, file);
        }
    }

    /// Puts back a file this store saved for `session` (by its file name, as the observer was
    /// told it), unless one of that name is already here. Written atomically; a name this
    /// store would never make is refused, so a copy kept elsewhere cannot write outside the
    /// session's folder.
    ///
    /// # Errors
    /// [`OverflowError::BadRef`] for a foreign name, [`OverflowError::Write`] when the file
    /// cannot be written.
    pub fn restore(&self, session: &str, name: &str, data: &[u8]) -> Result<(), OverflowError> {
        if !is_saved_name(name) {
            return Err(OverflowError::BadRef(name.to_string()));
        }
        let dir = self.session_dir(session);
        let done = dir.join(name);
        if done.exists() {
            return Ok(());
        }
        let tmp = dir.join(format!(".r-{}-{}.tmp", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)));
        write_whole(&dir, &tmp, &done, data)
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
            session: session.to_string(),
            observer: self.observer.get().cloned(),
        }
    }

    /// Saves `text` for `session`, atomically (temp file + rename), and returns its ref.
    ///
    /// # Errors
    /// [`OverflowError::Write`] when the folder or file cannot be written.
    pub fn save(&self, session: &str, text: &str) -> Result<String, OverflowError> {
        let dir = self.session_dir(session);
        let id = Self::next_id();
        let done = dir.join(format!("{id}.txt"));
        write_whole(&dir, &dir.join(format!(".{id}.tmp")), &done, text.as_bytes())?;
        self.tell(session, &done);
        Ok(id)
    }

    /// Saves binary `data` for `session` (a media block too large to pass on) as
    /// `<id>.<extension>`, atomically, and returns the file's path.
    ///
    /// # Errors
    /// [`OverflowError::Write`] when the folder or file cannot be written.
    pub fn save_bytes(&self, session: &str, extension: &str, data: &[u8]) -> Result<PathBuf, OverflowError> {
        let dir = self.session_dir(session);
        let id = Self::next_id();
        let ext: String = extension.chars().filter(char::is_ascii_alphanumeric).take(8).collect();
        let done = dir.join(format!("{id}.{}", if ext.is_empty() { "bin" } else { &ext }));
        write_whole(&dir, &dir.join(format!(".{id}.tmp")), &done, data)?;
        self.tell(session, &done);
        Ok(done)
    }

    /// Saves a structured result's JSON `text` for `session` under the next free handle
    /// (`h1`, `h2`, … per session) and returns it. The handle is claimed by hard-linking a
    /// finished temp file to `h<N>.json`, which fails if another writer took `N` first, so two
    /// processes sharing the folder never hand out one handle twice, and nothing half-written
    /// is ever visible under a handle.
    ///
    /// # Errors
    /// [`OverflowError::Write`] when the folder or file cannot be written.
    pub fn save_handle(&self, session: &str, text: &str) -> Result<String, OverflowError> {
        let dir = self.session_dir(session);
        let err = |source| OverflowError::Write { dir: dir.clone(), source };
        std::fs::create_dir_all(&dir).map_err(err)?;
        let tmp = dir.join(format!(".h-{}-{}.tmp", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()
        };
        if let Err(e) = write() {
            let _ = std::fs::remove_file(&tmp);
            return Err(err(e));
        }
        // Handles already given out in this session, counted once; a number taken meanwhile
        // by another writer is skipped by the link failing.
        let taken = std::fs::read_dir(&dir)
            .map(|d| {
                d.flatten()
                    .filter(|e| handle_number(&e.file_name().to_string_lossy()).is_some())
                    .count()
            })
            .unwrap_or(0);
        let mut n = taken + 1;
        let claimed = loop {
            let handle = format!("h{n}");
            match std::fs::hard_link(&tmp, dir.join(format!("{handle}.json"))) {
                Ok(()) => break Ok(handle),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
                Err(e) => break Err(err(e)),
            }
        };
        let _ = std::fs::remove_file(&tmp);
        if let Ok(handle) = &claimed {
            self.tell(session, &dir.join(format!("{handle}.json")));
        }
        claimed
    }

    /// Reads a handle's JSON text back, for the session that saved it only.
    ///
    /// # Errors
    /// [`OverflowError::BadRef`] for something that is not a handle, [`OverflowError::NotFound`]
    /// for an unknown, expired or another session's handle.
    pub fn load_handle(&self, session: &str, handle: &str) -> Result<String, OverflowError> {
        if !is_handle(handle) {
            return Err(OverflowError::BadRef(handle.to_string()));
        }
        std::fs::read_to_string(self.session_dir(session).join(format!("{handle}.json")))
            .map_err(|_| OverflowError::NotFound(handle.to_string()))
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

/// Whether `s` has the form of a handle (`h` and a number).
pub fn is_handle(s: &str) -> bool {
    s.len() > 1 && s.starts_with('h') && s[1..].bytes().all(|b| b.is_ascii_digit())
}

/// The number of a handle's file name (`h12.json` → 12).
fn handle_number(file: &str) -> Option<u64> {
    let stem = file.strip_suffix(".json")?;
    if is_handle(stem) { stem[1..].parse().ok() } else { None }
}

/// Whether `name` is a file name [`OverflowStore`] makes: `<pid>-<millis>-<seq>.<ext>` or
/// `h<N>.json`, nothing that could name another folder.
fn is_saved_name(name: &str) -> bool {
    if handle_number(name).is_some() {
        return true;
    }
    let Some((id, ext)) = name.split_once('.') else {
        return false;
    };
    let parts: Vec<&str> = id.split('-').collect();
    parts.len() == 3
        && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        && !ext.is_empty()
        && ext.len() <= 8
        && ext.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Writes `data` to `tmp` in `dir` (created if missing), syncs it and renames it to `done`, so a
/// reader finds the whole file or none; the temp file goes if any step fails.
fn write_whole(dir: &Path, tmp: &Path, done: &Path, data: &[u8]) -> Result<(), OverflowError> {
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let mut f = std::fs::File::create(tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(tmp, done)
    };
    write().map_err(|source| {
        let _ = std::fs::remove_file(tmp);
        OverflowError::Write {
            dir: dir.to_path_buf(),
            source,
        }
    })
}

/// An output being saved as it streams (see [`OverflowStore::writer`]): written to a temp file,
/// renamed to its final name when committed, so a reader never sees half of it.
pub struct OverflowWriter {
    dir: PathBuf,
    id: String,
    file: Option<std::fs::File>,
    /// Whether the temp file exists (and must go if the writer is dropped uncommitted).
    created: bool,
    session: String,
    observer: Option<std::sync::Arc<dyn SavedObserver>>,
}

impl std::fmt::Debug for OverflowWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OverflowWriter")
            .field("dir", &self.dir)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
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
        let done = self.dir.join(format!("{}.txt", self.id));
        std::fs::rename(self.tmp(), &done)?;
        self.created = false;
        if let Some(o) = &self.observer {
            o.saved(&self.session, &done);
        }
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

    #[derive(Default)]
    struct Seen(std::sync::Mutex<Vec<(String, PathBuf)>>);

    impl SavedObserver for Seen {
        fn saved(&self, session: &str, file: &Path) {
            self.0.lock().unwrap().push((session.to_string(), file.to_path_buf()));
        }
    }

    #[test]
    fn every_save_is_observed_and_restores_into_another_store() {
        use crate::tool::OutputFile;
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let first = OverflowStore::new(a.path().to_path_buf());
        let seen = std::sync::Arc::new(Seen::default());
        first.observe(seen.clone());
        let id = first.save("s1", "whole text").unwrap();
        let handle = first.save_handle("s1", "{\"k\":1}").unwrap();
        let media = first.save_bytes("s1", "png", b"\x89PNG").unwrap();
        let mut w = Box::new(first.writer("s1"));
        w.write(b"streamed").unwrap();
        let streamed = w.commit().unwrap();
        let seen = seen.0.lock().unwrap().clone();
        assert_eq!(seen.len(), 4, "{seen:?}");
        assert!(seen.iter().all(|(s, f)| s == "s1" && f.exists()), "{seen:?}");
        assert_eq!(seen[2].1, media);

        // Another process's store, given the files back by name, reads them as the first did
        // and numbers the next handle after the restored ones.
        let second = OverflowStore::new(b.path().to_path_buf());
        for (_, f) in &seen {
            let name = f.file_name().unwrap().to_str().unwrap();
            second.restore("s1", name, &std::fs::read(f).unwrap()).unwrap();
        }
        assert_eq!(second.load("s1", &id).unwrap(), "whole text");
        assert_eq!(second.load("s1", &streamed).unwrap(), "streamed");
        assert_eq!(second.load_handle("s1", &handle).unwrap(), "{\"k\":1}");
        assert_eq!(second.save_handle("s1", "2").unwrap(), "h2");
        // A restore never replaces what is there, and never writes a name the store would not make.
        second.restore("s1", "h1.json", b"other").unwrap();
        assert_eq!(second.load_handle("s1", "h1").unwrap(), "{\"k\":1}");
        for bad in [
            "../x.txt",
            "h1.json/../../y",
            ".hidden",
            "1-2-3",
            "1-2.txt",
            "a-b-c.txt",
            "1-2-3.t/x",
        ] {
            assert!(matches!(second.restore("s1", bad, b"x"), Err(OverflowError::BadRef(_))), "{bad}");
        }
    }

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
    fn handles_count_per_session_and_stay_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let a = OverflowStore::new(dir.path().to_path_buf());
        let b = OverflowStore::new(dir.path().to_path_buf());
        assert_eq!(a.save_handle("s1", "{\"a\":1}").unwrap(), "h1");
        assert_eq!(
            b.save_handle("s1", "[1]").unwrap(),
            "h2",
            "a second store over the folder does not reuse h1"
        );
        assert_eq!(a.save_handle("s2", "{}").unwrap(), "h1", "handles are per session");
        assert_eq!(a.load_handle("s1", "h2").unwrap(), "[1]");
        assert!(matches!(a.load_handle("s2", "h2"), Err(OverflowError::NotFound(_))));
        assert!(matches!(a.load_handle("s1", "../s2/h1"), Err(OverflowError::BadRef(_))));
        assert!(matches!(a.load_handle("s1", "h"), Err(OverflowError::BadRef(_))));
        let names: Vec<String> = std::fs::read_dir(dir.path().join("s1"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into())
            .collect();
        assert_eq!(names.len(), 2, "no temp file is left: {names:?}");
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let store = OverflowStore::new(dir.path().to_path_buf());
                std::thread::spawn(move || store.save_handle("s3", "0").unwrap())
            })
            .collect();
        let mut got: Vec<String> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        got.sort();
        got.dedup();
        assert_eq!(got.len(), 8, "concurrent writers never share a handle");
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
