//! Files the write tools refuse to write: those that steer what runs next (`tools.protected`).
//!
//! A read-only `git status` runs the program `.git/config` names in `core.fsmonitor`; a hook
//! runs at the next commit; toolslot's own policy files decide what is asked. A write to one of
//! them is a way to run code, or to widen approval, without a command being approved, so
//! write_file and edit_file refuse them whatever the mode.

use std::path::Path;

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
    let Some(glob) = globs.iter().find(|g| matches(g, &parts)) else {
        return Ok(());
    };
    let shown = parts.join("/");
    Err(ToolError {
        category: ErrorCategory::NotApproved,
        message: format!(
            "`{shown}` is protected (it matches `{glob}` in tools.protected): it decides what runs next or what is asked, so no tool writes it. Change it yourself, or ask the user to."
        ),
        field: Some("path".into()),
        started: false,
    })
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
        for p in [".git/config", ".git/hooks/pre-commit", ".toolslot/policy.toml"] {
            let err = check(ws.path(), &root.join(p), &cfg.tools.protected).unwrap_err();
            assert_eq!(err.category, ErrorCategory::NotApproved, "{p}");
            assert!(err.message.contains("tools.protected"), "{}", err.message);
        }
        for p in ["src/main.rs", ".gitignore", "git/config"] {
            assert!(check(ws.path(), &root.join(p), &cfg.tools.protected).is_ok(), "{p}");
        }
    }
}
