//! Reading a workspace's own policy file (`.toolslot/policy.toml`), which a checkout brings.
//!
//! The repository is not trusted, so the file is read only as the workspace's own: a link out
//! of the checkout (to `/dev/zero`, to `/dev/stdin`, to a secret elsewhere) would make toolslot
//! read without end, read its own input, or take rules (and echo parse errors) from a file the
//! project has no business naming. A FIFO would block the read for ever. So the file's
//! canonical path must be the canonical workspace's `.toolslot/policy.toml` (as trust requires:
//! `trust::trust_key`), it is opened without following a last link and without blocking, it
//! must be a regular file, and it is read up to `policy.project_file_max_bytes`.

use std::io::Read;
use std::path::Path;

use crate::regular_file::LastLink;

use super::PROJECT_FILE;

/// The bytes of `workspace`'s policy file; `Ok(None)` when there is none.
///
/// # Errors
/// Why the file is not read, in words: it resolves out of the workspace, it is not a regular
/// file, it is larger than `max_bytes`, or the system refused it.
pub fn read_project_file(workspace: &Path, max_bytes: u64) -> Result<Option<Vec<u8>>, String> {
    let path = workspace.join(PROJECT_FILE);
    // The folder first: a `.toolslot` that is a link holds no policy of the workspace's own,
    // and "none" would let a rule approved for the project be written through it (to the
    // user's own policy folder, say, which every workspace applies unasked).
    if let Some(folder) = path.parent()
        && std::fs::symlink_metadata(folder).is_ok_and(|m| m.file_type().is_symlink())
    {
        let to = std::fs::read_link(folder).map(|t| t.display().to_string()).unwrap_or_default();
        return Err(format!(
            "its folder `{}` is a link (to `{to}`), not a folder of the workspace's own; not read",
            folder.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
        ));
    }
    if let Err(e) = std::fs::symlink_metadata(&path) {
        return match e.kind() {
            std::io::ErrorKind::NotFound => Ok(None),
            _ => Err(e.to_string()),
        };
    }
    let own = workspace.canonicalize().map_err(|e| e.to_string())?.join(PROJECT_FILE);
    let real = match path.canonicalize() {
        Ok(real) => real,
        // A link to nothing: not a file the workspace holds.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err("it is a link to nothing; not read".into());
        }
        Err(e) => return Err(e.to_string()),
    };
    if real != own {
        return Err(format!(
            "it resolves to {}, out of the workspace: a checkout's policy file must be its own; not read",
            real.display()
        ));
    }
    let file = crate::regular_file::open(&path, LastLink::Refuse).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidInput => "it is not a regular file; not read".to_string(),
        _ => e.to_string(),
    })?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if meta.len() > max_bytes {
        return Err(format!(
            "it is {} bytes, more than policy.project_file_max_bytes ({max_bytes}); not read",
            meta.len()
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // Bounded again: the file may grow while it is read.
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > max_bytes {
        return Err(format!(
            "it grew past policy.project_file_max_bytes ({max_bytes}) while read; not read"
        ));
    }
    Ok(Some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace_with(make: impl FnOnce(&Path)) -> tempfile::TempDir {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join(".toolslot")).unwrap();
        make(&ws.path().join(PROJECT_FILE));
        ws
    }

    #[test]
    fn the_workspaces_own_file_is_read_and_nothing_else() {
        let ws = workspace_with(|p| std::fs::write(p, "[policy]\n").unwrap());
        assert_eq!(read_project_file(ws.path(), 1024).unwrap().unwrap(), b"[policy]\n");
        let none = tempfile::tempdir().unwrap();
        assert_eq!(read_project_file(none.path(), 1024).unwrap(), None);
        for target in ["/dev/zero", "/dev/stdin", "/etc/hostname", "/nonexistent"] {
            let ws = workspace_with(|p| std::os::unix::fs::symlink(target, p).unwrap());
            let err = read_project_file(ws.path(), 1024).unwrap_err();
            assert!(err.contains("not read"), "{target}: {err}");
        }
        // The folder a link out: the same.
        let outside = workspace_with(|p| std::fs::write(p, "[policy]\n").unwrap());
        let ws = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path().join(".toolslot"), ws.path().join(".toolslot")).unwrap();
        assert!(read_project_file(ws.path(), 1024).unwrap_err().contains("is a link"));
        // Also when it holds no file: "none" would have a rule written through the link.
        let empty = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(empty.path(), ws.path().join(".toolslot")).unwrap();
        assert!(read_project_file(ws.path(), 1024).unwrap_err().contains("is a link"));
        let ws = workspace_with(|p| std::fs::write(p, "# x\n").unwrap());
        let fifo = workspace_with(|p| assert!(std::process::Command::new("mkfifo").arg(p).status().unwrap().success()));
        assert!(read_project_file(fifo.path(), 1024).unwrap_err().contains("not a regular file"));
        assert!(read_project_file(ws.path(), 3).unwrap_err().contains("project_file_max_bytes"));
    }
}
