//! Result observers: hooks that learn from results before the next batch runs.

use std::path::Path;

use serde_json::Value;

use crate::builtin::workspace;
use crate::tool::SessionServices;

/// Sees every successful call after it ran, in index order, before the next batch starts, so
/// what call 0 observed counts for call 3 of the same round.
pub trait ResultObserver: Send + Sync {
    /// Called once per successful call.
    fn observe(&self, tool: &str, input: &Value, workspace: &Path, services: &dyn SessionServices);
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
