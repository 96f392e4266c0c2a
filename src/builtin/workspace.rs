//! Confinement of file tools to the session's workspace root.

use std::path::{Component, Path, PathBuf};

use crate::tool::ToolError;

/// Resolves `path` (relative to `workspace`, or absolute inside it) to a real path inside the
/// workspace, following symlinks. A path that resolves outside (`..`, another absolute path,
/// a symlink pointing out) is refused. A path that does not exist yet (a new file) is
/// resolved through its nearest existing ancestor, so a symlinked folder cannot smuggle a
/// write out either.
///
/// # Errors
/// An `invalid_input` error on field `field` saying why.
pub fn confine(workspace: &Path, path: &str, field: &str) -> Result<PathBuf, ToolError> {
    if path.is_empty() {
        return Err(ToolError::invalid(
            field,
            format!("`{field}` is empty; give a path inside the workspace"),
        ));
    }
    if path.contains('\0') {
        return Err(ToolError::invalid(field, format!("`{field}` contains a NUL byte")));
    }
    let root = workspace
        .canonicalize()
        .map_err(|e| ToolError::tool(format!("the workspace {} is not usable: {e}", workspace.display())))?;
    let joined = if Path::new(path).is_absolute() {
        PathBuf::from(path)
    } else {
        root.join(path)
    };
    // Walk up to the nearest existing ancestor, keeping the missing tail.
    let mut existing = joined.as_path();
    let mut tail: Vec<&std::ffi::OsStr> = Vec::new();
    let resolved = loop {
        match existing.canonicalize() {
            Ok(real) => break real,
            Err(_) => {
                let Some(name) = existing.file_name() else {
                    return Err(outside(field, path));
                };
                tail.push(name);
                existing = existing.parent().ok_or_else(|| outside(field, path))?;
            }
        }
    };
    let mut full = resolved;
    for part in tail.iter().rev() {
        if Path::new(part).components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(outside(field, path));
        }
        full.push(part);
    }
    // A `..` in the missing tail was not resolved by canonicalize; normalize it by hand.
    let mut normal = PathBuf::new();
    for c in full.components() {
        match c {
            Component::ParentDir => {
                normal.pop();
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    if !normal.starts_with(&root) {
        return Err(outside(field, path));
    }
    Ok(normal)
}

fn outside(field: &str, path: &str) -> ToolError {
    ToolError::invalid(
        field,
        format!("`{path}` is outside the workspace; only paths inside the workspace root may be used"),
    )
}

/// The path shown to the model: relative to the workspace where possible.
pub fn display(workspace: &Path, path: &Path) -> String {
    let root = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    path.strip_prefix(&root)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir(ws.join("src")).unwrap();
        std::fs::write(ws.join("src/a.txt"), "x").unwrap();
        let root = ws.canonicalize().unwrap();
        assert_eq!(confine(ws, "src/a.txt", "path").unwrap(), root.join("src/a.txt"));
        assert_eq!(confine(ws, "src/new/b.txt", "path").unwrap(), root.join("src/new/b.txt"));
        assert_eq!(
            confine(ws, root.join("src/a.txt").to_str().unwrap(), "path").unwrap(),
            root.join("src/a.txt")
        );
        for bad in ["../x", "src/../../x", "/etc/passwd", "new/../../x", ""] {
            let err = confine(ws, bad, "path").unwrap_err();
            assert_eq!(err.field.as_deref(), Some("path"), "{bad}");
        }
    }

    #[test]
    fn symlinks_pointing_out_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside_dir = tempfile::tempdir().unwrap();
        std::fs::write(outside_dir.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside_dir.path(), dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink(outside_dir.path().join("secret"), dir.path().join("file_link")).unwrap();
        assert!(confine(dir.path(), "link/secret", "path").is_err());
        assert!(confine(dir.path(), "link/new_file", "path").is_err());
        assert!(confine(dir.path(), "file_link", "path").is_err());
    }
}
