//! Which folder a session may work in: the one rule `toolslot serve` applies when a session is
//! opened and again whenever a durable session is taken over, so a session recorded under one
//! dispatcher's `server.workspace_root` never runs outside another's.

use std::path::{Path, PathBuf};

/// The workspace a session may have: the folder asked for, which must exist and, when `root`
/// (`server.workspace_root`) is set, be inside it once symlinks are resolved (so a link inside
/// the root cannot lead out of it); with no folder asked for, the root.
///
/// # Errors
/// A one-line reason: the root cannot be resolved, the folder is missing, or it lies outside
/// the root.
pub fn admit(asked: Option<&Path>, root: &str) -> Result<Option<PathBuf>, String> {
    let root = (!root.is_empty())
        .then(|| std::fs::canonicalize(toolslot::config::expand_home(root)))
        .transpose()
        .map_err(|e| format!("server.workspace_root `{root}` cannot be used: {e}"))?;
    let Some(p) = asked else {
        return Ok(root);
    };
    let shown = p.display();
    if !p.is_dir() {
        return Err(format!("workspace `{shown}` is not a folder"));
    }
    if let Some(root) = root {
        let real = std::fs::canonicalize(p).map_err(|e| format!("workspace `{shown}`: {e}"))?;
        if !real.starts_with(&root) {
            return Err(format!("workspace `{shown}` is outside server.workspace_root"));
        }
        return Ok(Some(real));
    }
    Ok(Some(p.to_path_buf()))
}
