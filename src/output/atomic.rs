//! Atomic file writes: a reader sees the old file or the new one, never half of either.

use std::io::Write;
use std::path::Path;

use crate::tool::ToolError;

/// Writes `content` to `path` through a temporary file in the same folder and a rename,
/// creating parent folders. Returns the new modification time.
///
/// # Errors
/// A `tool_error` naming the path when any step fails; the temporary file is removed.
pub fn write_atomic(path: &Path, content: &[u8], shown: &str) -> Result<std::time::SystemTime, ToolError> {
    let parent = path
        .parent()
        .ok_or_else(|| ToolError::tool(format!("`{shown}` has no parent folder")))?;
    std::fs::create_dir_all(parent).map_err(|e| ToolError::tool(format!("cannot create the folder of `{shown}`: {e}")))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = parent.join(format!(".{name}.toolslot-{}.tmp", super::random_hex(6)));
    let result = (|| -> std::io::Result<std::time::SystemTime> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(content)?;
        f.sync_all()?;
        if let Ok(meta) = std::fs::metadata(path) {
            // Keep the old file's permissions (an executable script stays executable).
            std::fs::set_permissions(&tmp, meta.permissions())?;
        }
        std::fs::rename(&tmp, path)?;
        std::fs::metadata(path)?.modified()
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        ToolError::tool(format!("cannot write `{shown}`: {e}"))
    })
}
