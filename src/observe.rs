//! Result observers: hooks that learn from results before the next batch runs.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::builtin::workspace;
use crate::tool::SessionServices;

/// Sees every successful call after it ran, in index order, before the next batch starts, so
/// what call 0 observed counts for call 3 of the same round.
pub trait ResultObserver: Send + Sync {
    /// Called once per successful call.
    fn observe(&self, tool: &str, input: &Value, workspace: &Path, services: &dyn SessionServices);
}

/// The built-in tools that write a whole file the model named in `path`.
pub const FILE_EDITING_TOOLS: &[&str] = &["write_file", "edit_file"];

/// The file a call of a file-editing built-in wrote (`write_file`, `edit_file`), resolved
/// inside the workspace as the tool resolved it; `None` for any other call.
pub fn edited_file(tool: &str, input: &Value, ws: &Path) -> Option<PathBuf> {
    if !FILE_EDITING_TOOLS.contains(&tool) {
        return None;
    }
    let path = input.get("path").and_then(Value::as_str)?;
    workspace::confine(ws, path, "path").ok()
}

/// Records the files the session has read (and their modification times), so edit tools can
/// refuse to edit a file never read or changed since.
#[derive(Debug, Default)]
pub struct FileReadObserver;

impl ResultObserver for FileReadObserver {
    fn observe(&self, tool: &str, input: &Value, ws: &Path, services: &dyn SessionServices) {
        if tool != "read_file" {
            return;
        }
        let Some(path) = input.get("path").and_then(Value::as_str) else {
            return;
        };
        let Ok(real) = workspace::confine(ws, path, "path") else {
            return;
        };
        if let Ok(modified) = std::fs::metadata(&real).and_then(|m| m.modified()) {
            services.record_file_state(&real, modified);
        }
    }
}

/// The text of the file an edit just wrote, read back for its language server as `read_file`
/// reads a file: confined to the workspace `ws` (no link put there since it was resolved is followed), a
/// regular file only, opened without blocking, at most `max_bytes`. The edit happened a moment
/// ago, but a process running in the workspace may have swapped the file since: a FIFO would
/// hold the read (and its thread) for ever, a link to `/dev/zero` would read until memory ran
/// out.
///
/// # Errors
/// Why it is not read, in words, for the note the edit's result gets.
pub fn read_back(ws: &Path, path: &Path, max_bytes: u64) -> Result<String, String> {
    let file = workspace::open_regular(ws, path, "path").map_err(|e| e.message)?;
    let bytes = workspace::read_bounded(file, max_bytes)
        .map_err(|e| format!("the file could not be read back: {e}"))?
        .ok_or_else(|| format!("the file is larger than lsp.max_file_bytes ({max_bytes} bytes); not sent"))?;
    String::from_utf8(bytes).map_err(|_| "the file is not UTF-8 text; not sent".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `read_back` on another thread, so a read that blocks fails the test instead of
    /// holding it.
    fn read_back_in_time(ws: &Path, path: &Path, max: u64) -> Result<String, String> {
        let (ws, path) = (ws.to_path_buf(), path.to_path_buf());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(read_back(&ws, &path, max)));
        rx.recv_timeout(std::time::Duration::from_secs(20)).expect("read_back blocked")
    }

    #[test]
    fn a_file_swapped_after_its_edit_is_not_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        let file = ws.join("a.py");
        std::fs::write(&file, "x = 1\n").unwrap();
        assert_eq!(read_back_in_time(&ws, &file, 100).unwrap(), "x = 1\n");

        // Larger than the bound, whatever else it is.
        std::fs::write(&file, "x".repeat(101)).unwrap();
        let e = read_back_in_time(&ws, &file, 100).unwrap_err();
        assert!(e.contains("lsp.max_file_bytes (100 bytes)"), "{e}");

        // A FIFO in its place: refused at once, not waited on.
        std::fs::remove_file(&file).unwrap();
        let fifo = std::ffi::CString::new(file.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let e = read_back_in_time(&ws, &file, 100).unwrap_err();
        assert!(e.contains("FIFO") && e.contains("not a regular file"), "{e}");

        // A link to a device in its place: not followed.
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &file).unwrap();
        let e = read_back_in_time(&ws, &file, 100).unwrap_err();
        assert!(e.contains("symlink"), "{e}");

        // Not text.
        std::fs::remove_file(&file).unwrap();
        std::fs::write(&file, [0xff, 0xfe, 0x00]).unwrap();
        let e = read_back_in_time(&ws, &file, 100).unwrap_err();
        assert!(e.contains("not UTF-8"), "{e}");
    }
}
