//! Files the write tools refuse to write: those that steer what runs next (`tools.protected`).
//!
//! A read-only `git status` runs the program `.git/config` names in `core.fsmonitor`; a hook
//! runs at the next commit; toolslot's own policy files decide what is asked. A write to one of
//! them is a way to run code, or to widen approval, without a command being approved, so
//! write_file and edit_file refuse them whatever the mode.
//!
//! Git also reads as its folder whatever a `.git` file (`gitdir: …`) or a `commondir` names,
//! so the folders those pointers name are protected like `.git` itself, wherever they lie in
//! the workspace ([`git_folders`]).

use std::path::{Path, PathBuf};

use crate::tool::{ErrorCategory, ToolError};

/// Refuses `path` (already confined: absolute, symlinks resolved) when it matches one of
/// `globs`, relative to the workspace root.
///
/// # Errors
/// A `not_approved` error on `path`, nothing written, naming the file and the config key.
pub fn check(workspace: &Path, path: &Path, globs: &[String]) -> Result<(), ToolError> {
    let root = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    let Ok(rel) = path.strip_prefix(&root) else {
        return Ok(());
    };
    let parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    let shown = parts.join("/");
    let why = match globs.iter().find(|g| matches(g, &parts)) {
        Some(glob) => format!("it matches `{glob}` in tools.protected"),
        None => match git_folders(&root, path).into_iter().find(|(folder, _)| path.starts_with(folder)) {
            Some((_, pointer)) => format!("git reads it as its own folder, named by `{pointer}`"),
            None => return Ok(()),
        },
    };
    Err(ToolError {
        category: ErrorCategory::NotApproved,
        message: format!(
            "`{shown}` is protected ({why}): it decides what runs next or what is asked, so no tool writes it. Change it yourself, or ask the user to."
        ),
        field: Some("path".into()),
        started: false,
    })
}

/// The folders git reads as a repository's own (its config, hooks, info) for a file at `path`
/// in `root`: what the `.git` file of `root` or of a folder holding `path` names (`gitdir: X`),
/// and what the `commondir` of that folder or of a `.git` folder names; each with the pointer
/// that named it, relative to `root` for the message. Pointers that do not parse name nothing.
///
/// Only `root` and the folders on the way to `path` are looked at: those are the repositories a
/// `git` run where the file lies would read. A `.git` file elsewhere that points here is the
/// user's own setup (the write tools refuse to make one: `**/.git` is protected).
pub fn git_folders(root: &Path, path: &Path) -> Vec<(PathBuf, String)> {
    let shown = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
    let mut out = Vec::new();
    let mut holders: Vec<&Path> = path.ancestors().skip(1).take_while(|a| a.starts_with(root)).collect();
    if holders.is_empty() {
        holders.push(root);
    }
    for holder in holders {
        let dot_git = holder.join(".git");
        let Ok(meta) = std::fs::symlink_metadata(&dot_git) else {
            continue;
        };
        let git_dir = if meta.is_file() {
            // A worktree's or submodule's `.git` file: `gitdir: <folder>`, relative to it.
            let Some(target) = pointer(&dot_git, Some("gitdir:")) else {
                continue;
            };
            let folder = holder.join(target);
            let folder = folder.canonicalize().unwrap_or(folder);
            out.push((folder.clone(), shown(&dot_git)));
            folder
        } else {
            dot_git.canonicalize().unwrap_or(dot_git)
        };
        // `commondir` (a linked worktree's) names where the shared config and hooks lie.
        let common_file = git_dir.join("commondir");
        if let Some(target) = pointer(&common_file, None) {
            let folder = git_dir.join(target);
            out.push((folder.canonicalize().unwrap_or(folder), shown(&common_file)));
        }
    }
    out
}

/// The one line a git pointer file holds (after `prefix`, when given), trimmed; `None` when it
/// cannot be read or does not start with `prefix`.
fn pointer(file: &Path, prefix: Option<&str>) -> Option<PathBuf> {
    use std::io::Read;
    // A pointer is one path on one line, so no more than the longest path the system takes
    // (and its prefix) is read: a large file made to look like one is not read whole.
    let most = libc::PATH_MAX as u64 + 64;
    let mut text = String::new();
    // A regular file only, opened without blocking: a FIFO, or a link to `/dev/stdin`, planted
    // where git looks would otherwise hold the call (or read toolslot's own input).
    let opened = crate::regular_file::open(file, crate::regular_file::LastLink::Follow).ok()?;
    opened.take(most).read_to_string(&mut text).ok()?;
    let line = text.lines().next()?.trim();
    let target = match prefix {
        Some(p) => line.strip_prefix(p)?.trim(),
        None => line,
    };
    (!target.is_empty()).then(|| PathBuf::from(target))
}

/// Whether the path components `parts` match `glob` (`*` within one component, `**` across any
/// number, including none).
fn matches(glob: &str, parts: &[String]) -> bool {
    let pattern: Vec<&str> = glob.split('/').filter(|p| !p.is_empty()).collect();
    matches_from(&pattern, parts)
}

fn matches_from(pattern: &[&str], parts: &[String]) -> bool {
    match pattern.split_first() {
        None => parts.is_empty(),
        Some((&"**", rest)) => (0..=parts.len()).any(|skip| matches_from(rest, &parts[skip..])),
        Some((first, rest)) => parts
            .split_first()
            .is_some_and(|(part, tail)| component(first, part) && matches_from(rest, tail)),
    }
}

/// One component against a pattern with `*`.
fn component(pattern: &str, text: &str) -> bool {
    let pieces: Vec<&str> = pattern.split('*').collect();
    let Some((first, rest)) = pieces.split_first() else {
        return text.is_empty();
    };
    let Some(mut remaining) = text.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return remaining.is_empty();
    };
    for piece in middle {
        match remaining.find(piece) {
            Some(at) => remaining = &remaining[at + piece.len()..],
            None => return false,
        }
    }
    remaining.len() >= last.len() && remaining.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(p: &str) -> Vec<String> {
        p.split('/').map(str::to_string).collect()
    }

    #[test]
    fn globs_match_paths() {
        assert!(matches(".git/config", &parts(".git/config")));
        assert!(!matches(".git/config", &parts(".git/configx")));
        assert!(matches(".git/hooks/**", &parts(".git/hooks/pre-commit")));
        assert!(matches(".git/hooks/**", &parts(".git/hooks/a/b")));
        assert!(matches(".git/modules/*/config", &parts(".git/modules/sub/config")));
        assert!(!matches(".git/modules/*/config", &parts(".git/modules/a/b/config")));
        assert!(matches("**/.envrc", &parts("a/b/.envrc")));
        assert!(matches("**/.envrc", &parts(".envrc")));
        assert!(!matches(".toolslot/**", &parts("src/.toolslot")));
    }

    #[test]
    fn the_built_in_list_protects_what_steers_execution() {
        let cfg = crate::config::Config::builtin();
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        for p in [
            ".git/config",
            ".git/hooks/pre-commit",
            ".git/commondir",
            ".git/info/attributes",
            ".git/worktrees/w/commondir",
            ".git",
            "sub/.git",
            "sub/.git/config",
            ".toolslot/policy.toml",
        ] {
            let err = check(ws.path(), &root.join(p), &cfg.tools.protected).unwrap_err();
            assert_eq!(err.category, ErrorCategory::NotApproved, "{p}");
            assert!(err.message.contains("tools.protected"), "{}", err.message);
        }
        for p in [
            "src/main.rs",
            ".gitignore",
            "git/config",
            ".github/workflows/ci.yml",
            "sub/.gitmodules",
        ] {
            assert!(check(ws.path(), &root.join(p), &cfg.tools.protected).is_ok(), "{p}");
        }
    }

    #[test]
    fn the_folders_git_pointers_name_are_protected_too() {
        let cfg = crate::config::Config::builtin();
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        // A worktree-like checkout: `.git` is a file naming a folder in the workspace, whose
        // `commondir` names another; a subfolder is a submodule with its own `.git` file.
        std::fs::create_dir_all(root.join("meta/wt")).unwrap();
        std::fs::create_dir_all(root.join("common")).unwrap();
        std::fs::write(root.join(".git"), "gitdir: meta/wt\n").unwrap();
        std::fs::write(root.join("meta/wt/commondir"), "../../common\n").unwrap();
        std::fs::create_dir_all(root.join("lib/sub/gd")).unwrap();
        std::fs::write(root.join("lib/sub/.git"), "gitdir: gd").unwrap();
        for (p, pointer) in [
            ("meta/wt/config", "`.git`"),
            ("common/config", "`meta/wt/commondir`"),
            ("common/hooks/pre-commit", "`meta/wt/commondir`"),
            ("lib/sub/gd/config", "`lib/sub/.git`"),
        ] {
            let err = match check(ws.path(), &root.join(p), &cfg.tools.protected) {
                Err(e) => e,
                Ok(()) => panic!("{p} was not protected"),
            };
            assert!(err.message.contains(pointer), "{p}: {}", err.message);
        }
        // Not every file is a git folder: the pointers name these folders only.
        for p in ["src/main.rs", "meta/notes.txt", "lib/other/config"] {
            assert!(check(ws.path(), &root.join(p), &cfg.tools.protected).is_ok(), "{p}");
        }
    }

    #[test]
    fn a_pointer_that_is_a_fifo_is_not_read() {
        // Opening one would hold the thread before any write (a link to `/dev/stdin` would read
        // toolslot's own input): only a regular file is read.
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("meta/wt")).unwrap();
        std::fs::write(root.join(".git"), "gitdir: meta/wt\n").unwrap();
        let mkfifo = |p: &Path| assert!(std::process::Command::new("mkfifo").arg(p).status().unwrap().success());
        mkfifo(&root.join("meta/wt/commondir"));
        std::fs::create_dir_all(root.join("lib/sub")).unwrap();
        mkfifo(&root.join("lib/sub/.git"));
        let (tx, rx) = std::sync::mpsc::channel();
        let at = root.clone();
        std::thread::spawn(move || tx.send(git_folders(&at, &at.join("lib/sub/file.txt"))).unwrap());
        let found = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("git_folders returns");
        assert_eq!(found, vec![(root.join("meta/wt"), ".git".to_string())]);
    }

    #[test]
    fn shell_commands_that_write_under_git_are_required() {
        use crate::tool::{ApprovalRequirement, ToolSpec};
        // Judged as code whatever the sandbox: never Auto, so asked in every mode but full-auto.
        let shell = super::super::ExecShell::new(&crate::config::Config::builtin());
        for c in [
            "printf ../evil > .git/commondir",
            "echo x >> .git/info/attributes",
            "git config core.fsmonitor 'touch x'",
            "cp evil/config .git/config",
            "ln -sf ../evil .git/commondir",
            "tee .git/commondir",
            "mv evil .git/modules/x",
        ] {
            let input = serde_json::json!({ "command": c });
            let got = shell.approval_requirement_for_input(&input, crate::config::NetworkPolicy::Prompt);
            assert_eq!(got, ApprovalRequirement::Required, "{c}");
        }
    }
}
