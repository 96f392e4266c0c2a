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
