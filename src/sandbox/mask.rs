//! Masks: what a path deny rule names stays out of sight of the program, whatever spelling it
//! uses (`grep -r`, `tar cf - .`, a symlink it made, `cd src && cat ../secrets/x`).
//!
//! The caller hands the files and folders to hide ([`Request::hidden`](super::Request), found
//! by the session's policy, absolute with symlinks resolved). bubblewrap mounts over each, after
//! every other bind, so nothing mounted earlier shows them again: an empty read-only tmpfs over
//! a folder, `/dev/null` over a file ([`bwrap_args`]). A mount is reached by every path that
//! leads to it, so a symlink to a masked file, or `current/../prod.key`, reads the mask.
//!
//! Landlock allows hierarchies and cannot take a folder out of one it allows, so [`carve`]
//! allows, in place of a folder that holds a hidden path, its listing and each of its other
//! entries: the hidden path's content is not readable (its name still shows in a listing).
//! That works only where the folder is not writable by the call: a folder the call may write
//! must be allowed whole (a file it makes there must be readable), so a hidden path inside
//! the writable workspace would stay readable under Landlock to a call cleared to write. Such
//! paths are returned as not masked, and the Landlock backend then refuses to run the program
//! (fail closed) rather than leave them to the judgement of its words.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::View;
use crate::paths::outermost;

/// The bubblewrap options that mask `hidden`, given after every other bind; only those the
/// view shows (a confined view shows the workspace and the `confined` folders), since
/// bubblewrap cannot mount where there is nothing and what is not shown needs no mask.
pub(super) fn bwrap_args(hidden: &[PathBuf], view: View, workspace: &Path, confined: &[PathBuf]) -> Vec<OsString> {
    let visible = |p: &Path| view == View::Full || p.starts_with(workspace) || confined.iter().any(|c| p.starts_with(c));
    masks(hidden, &visible)
}

fn masks(hidden: &[PathBuf], visible: &dyn Fn(&Path) -> bool) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    for path in outermost(hidden) {
        if !visible(&path) {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            // Empty, and read-only: nothing can be written where the folder was either.
            for part in [
                "--tmpfs".into(),
                path.clone().into_os_string(),
                "--remount-ro".into(),
                path.into_os_string(),
            ] {
                a.push(part);
            }
        } else {
            for part in ["--ro-bind".into(), OsString::from("/dev/null"), path.into_os_string()] {
                a.push(part);
            }
        }
    }
    a
}

/// The folders strictly inside a writable root (`roots`) on the way to a path of `hidden`,
/// parents first: bubblewrap mounts each on itself so that a command cleared to write cannot
/// rename it (or the masked path, already a mount) and so move the hidden file to a name no
/// rule names. A rename across one of them fails as between two file systems (`EXDEV`; `mv`
/// copies instead). The same holds the workspace in place below a writable folder above it.
pub(super) fn pins(hidden: &[PathBuf], roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for path in outermost(hidden) {
        let Some(root) = roots.iter().filter(|r| path.starts_with(r)).min_by_key(|r| r.components().count()) else {
            continue;
        };
        let mut folder = path.parent();
        while let Some(f) = folder.filter(|f| f.starts_with(root) && *f != root.as_path()) {
            // A real folder only: hidden paths come with their links resolved, and a mount
            // needs something to mount on.
            if std::fs::symlink_metadata(f).is_ok_and(|m| m.is_dir()) {
                out.push(f.to_path_buf());
            }
            folder = f.parent();
        }
    }
    // Parents sort before what they hold, so a pin never covers one made inside it.
    out.sort();
    out.dedup();
    out
}

/// What Landlock allows to read, with `hidden` carved out of `roots` (the hierarchies the view
/// reads): roots kept whole, folders allowed only to be listed, and the hidden paths that could
/// not be carved out because a folder holding them is writable by the call (`writable`).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Carved {
    /// Hierarchies readable whole (folders) and single files.
    pub whole: Vec<PathBuf>,
    /// Folders whose entries may be listed, not read: they hold a hidden path.
    pub listed: Vec<PathBuf>,
    /// Hidden paths left readable: they lie in a folder the call may write.
    pub unmasked: Vec<PathBuf>,
}

/// Carves `hidden` out of `roots` for Landlock (see the module's doc).
pub(super) fn carve(roots: &[PathBuf], hidden: &[PathBuf], writable: &[PathBuf]) -> Carved {
    let hidden = outermost(hidden);
    let (unmasked, hidden): (Vec<PathBuf>, Vec<PathBuf>) = hidden.into_iter().partition(|h| writable.iter().any(|w| h.starts_with(w)));
    let mut out = Carved {
        unmasked,
        ..Carved::default()
    };
    for root in roots {
        split(root, &hidden, &mut out);
    }
    out
}

/// Allows `dir` whole, or, when it holds a hidden path, its listing and each entry but the
/// hidden ones (recursively down to them).
fn split(dir: &Path, hidden: &[PathBuf], out: &mut Carved) {
    if hidden.iter().any(|h| dir.starts_with(h)) {
        return;
    }
    if !hidden.iter().any(|h| h.starts_with(dir)) {
        out.whole.push(dir.to_path_buf());
        return;
    }
    out.listed.push(dir.to_path_buf());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if hidden.contains(&path) {
            continue;
        }
        // A symlink gets no rule: a rule is made on where it leads (Landlock opens the path),
        // which would allow a hidden folder it points at; what it leads to is allowed, or
        // not, on its own.
        match entry.file_type() {
            Ok(t) if t.is_symlink() => {}
            Ok(t) if t.is_dir() => split(&path, hidden, out),
            _ => out.whole.push(path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_gets_an_empty_read_only_tmpfs_and_a_file_dev_null() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        std::fs::create_dir_all(ws.join("secrets")).unwrap();
        std::fs::write(ws.join("secrets/k"), "x").unwrap();
        std::fs::write(ws.join(".env"), "x").unwrap();
        let hidden = [ws.join("secrets/k"), ws.join("secrets"), ws.join(".env"), ws.join("gone")];
        let args = masks(&hidden, &|_| true);
        let s = |p: &Path| p.display().to_string();
        let want: Vec<String> = vec![
            "--ro-bind".into(),
            "/dev/null".into(),
            s(&ws.join(".env")),
            "--tmpfs".into(),
            s(&ws.join("secrets")),
            "--remount-ro".into(),
            s(&ws.join("secrets")),
        ];
        assert_eq!(args.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>(), want);
        assert!(masks(&hidden, &|_| false).is_empty());
        // A confined view shows the workspace and the system's folders only.
        let outside = [PathBuf::from("/home/someone/.ssh")];
        assert!(bwrap_args(&outside, View::Confined, &ws, &[PathBuf::from("/usr")]).is_empty());
    }

    #[test]
    fn landlock_allows_all_but_the_hidden_paths_where_no_write_needs_the_folder_whole() {
        let top = tempfile::tempdir().unwrap();
        let top = top.path().canonicalize().unwrap();
        let ws = top.join("ws");
        for d in ["ws/secrets", "ws/src", "other"] {
            std::fs::create_dir_all(top.join(d)).unwrap();
        }
        std::fs::write(ws.join("README"), "x").unwrap();
        std::os::unix::fs::symlink(ws.join("secrets"), ws.join("current")).unwrap();
        let hidden = [ws.join("secrets")];
        let carved = carve(std::slice::from_ref(&top), &hidden, &[]);
        assert_eq!(carved.listed, vec![top.clone(), ws.clone()]);
        let mut whole = carved.whole.clone();
        whole.sort();
        assert_eq!(whole, vec![top.join("other"), ws.join("README"), ws.join("src")]);
        assert!(carved.unmasked.is_empty());
        // The workspace writable: its hidden paths cannot be carved out.
        let carved = carve(std::slice::from_ref(&top), &hidden, std::slice::from_ref(&ws));
        assert_eq!(carved.unmasked, hidden.to_vec());
        assert_eq!(carved.whole, vec![top.clone()]);
    }

    #[test]
    fn the_writable_folders_on_the_way_to_a_hidden_path_are_pinned_parents_first() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ws = root.join("ws");
        for d in ["ws/config/secrets", "ws/a/b", "ws/link_target", "home/.ssh"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(ws.join("a/b/.env"), "x").unwrap();
        std::os::unix::fs::symlink(ws.join("link_target"), ws.join("link")).unwrap();
        let hidden = [
            ws.join("config/secrets"),
            // Inside another hidden path: pinned through its outermost one only.
            ws.join("config/secrets/deeper"),
            ws.join("a/b/.env"),
            // At the workspace's top: the workspace is a mount already.
            ws.join(".env"),
            // Outside every writable root: read-only there, nothing to pin.
            root.join("home/.ssh"),
            // Through a link: no mount is made on a link.
            ws.join("link/.env"),
        ];
        let pinned = pins(&hidden, std::slice::from_ref(&ws));
        assert_eq!(pinned, vec![ws.join("a"), ws.join("a/b"), ws.join("config")]);
        // A writable root above the workspace pins the folders between them too.
        let pinned = pins(&[ws.join("config/secrets")], &[ws.clone(), root.clone()]);
        assert_eq!(pinned, vec![ws.clone(), ws.join("config")]);
        assert!(pins(&hidden, &[]).is_empty());
    }
}
