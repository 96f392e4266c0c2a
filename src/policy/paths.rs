//! The path-like arguments of a call, as the files they name relative to the workspace.
//!
//! A rule's `path` glob is written relative to the workspace (`secrets/**`, `**/.env`) or
//! absolute (`/etc/**`), so each argument is made into both spellings the file has: the one its
//! words give (`./src/../.env` → `.env`, `~/x` → the home folder's) and the one its symlinks
//! lead to, when it exists. A rule that restricts matches either; one that allows needs both.

use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use crate::shell::{Script, Segment};

/// Input fields that name files, besides any ending in `_path`, `_paths`, `_file` or `_dir`:
/// the built-in tools' and the common MCP servers' (`source`/`destination` of a move).
const PATH_KEYS: &[&str] = &[
    "path",
    "paths",
    "file",
    "files",
    "filename",
    "dir",
    "directory",
    "cwd",
    "workdir",
    "source",
    "destination",
];

/// One path-like argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PathArg {
    /// Cleaned of `.` and `..` by its words: relative to the workspace when inside it (`""` for
    /// the workspace itself), absolute otherwise.
    pub lexical: String,
    /// Where its symlinks lead (for the part that exists), spelled the same way.
    pub resolved: Option<String>,
    /// The shell expands it (a variable, a substitution): it may name any file.
    pub expanded: bool,
}

impl PathArg {
    /// Both spellings.
    pub fn spellings(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.lexical.as_str()).chain(self.resolved.as_deref().filter(|r| *r != self.lexical))
    }
}

/// The workspace as both spellings are made relative to.
#[derive(Debug, Clone)]
pub(super) struct Root {
    lexical: PathBuf,
    resolved: PathBuf,
}

impl Root {
    /// `workspace`, made absolute.
    pub fn new(workspace: &Path) -> Self {
        let absolute = if workspace.is_absolute() {
            workspace.to_path_buf()
        } else {
            std::env::current_dir()
                .map(|d| d.join(workspace))
                .unwrap_or_else(|_| workspace.to_path_buf())
        };
        let lexical = clean(&absolute);
        let resolved = lexical.canonicalize().unwrap_or_else(|_| lexical.clone());
        Self { lexical, resolved }
    }
}

/// The path-like fields of a tool's input.
pub(super) fn of_input<'r>(input: &Value, root: impl Fn() -> &'r Root) -> Vec<PathArg> {
    let Some(fields) = input.as_object() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, value) in fields {
        let k = key.to_ascii_lowercase();
        let named = PATH_KEYS.contains(&k.as_str()) || ["_path", "_paths", "_file", "_dir"].iter().any(|s| k.ends_with(s));
        if !named {
            continue;
        }
        match value {
            Value::String(s) => out.push(arg(s, false, root())),
            Value::Array(items) => out.extend(items.iter().filter_map(Value::as_str).map(|s| arg(s, false, root()))),
            _ => {}
        }
    }
    out
}

/// The arguments of every simple command of `script` that may name files (every word after
/// the program but options, the value of `--option=value`), and the files it redirects to.
pub(super) fn of_script(script: &Script, root: &Root) -> Vec<PathArg> {
    let mut out = Vec::new();
    for seg in script.all_segments() {
        out.extend(of_segment(seg, root));
    }
    for target in script.all_redirects() {
        out.push(arg(target, super::command::is_expanded(target), root));
    }
    out
}

/// The arguments of one simple command that may name files.
pub(super) fn of_segment(seg: &Segment, root: &Root) -> Vec<PathArg> {
    let mut out = Vec::new();
    for word in seg.words.iter().skip(1) {
        let expanded = !seg.literal && super::command::is_expanded(word);
        let value = if word.starts_with('-') && !expanded {
            match word.split_once('=') {
                Some((_, v)) if !v.is_empty() => v,
                _ => continue,
            }
        } else {
            word.as_str()
        };
        out.push(arg(value, expanded, root));
    }
    out
}

/// The redirection targets of `script` and of the scripts its wrappers run.
pub(super) fn of_redirects(script: &Script, root: &Root) -> Vec<PathArg> {
    script
        .all_redirects()
        .into_iter()
        .map(|t| arg(t, super::command::is_expanded(t), root))
        .collect()
}

fn arg(raw: &str, expanded: bool, root: &Root) -> PathArg {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let raw_path = match (raw.strip_prefix('~'), &home) {
        (Some(rest), Some(h)) if rest.is_empty() || rest.starts_with('/') => h.join(rest.trim_start_matches('/')),
        _ => PathBuf::from(raw),
    };
    let absolute = clean(&root.lexical.join(raw_path));
    let lexical = relative(&absolute, &root.lexical);
    let resolved = resolve(&absolute).map(|r| relative(&r, &root.resolved));
    PathArg {
        lexical,
        resolved,
        expanded,
    }
}

/// `.` and `..` removed by the words alone (`..` at the root stays at the root).
fn clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The existing part of `path` with its symlinks resolved, and the rest appended.
fn resolve(path: &Path) -> Option<PathBuf> {
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return Some(clean(&out));
        }
        rest.push(existing.file_name()?.to_os_string());
        existing = existing.parent()?;
    }
}

/// `path` relative to `root` with `/` between components (`""` for the root itself), or
/// absolute when it lies outside.
fn relative(path: &Path, root: &Path) -> String {
    match path.strip_prefix(root) {
        Ok(rel) => rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/"),
        Err(_) => path.to_string_lossy().into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::parse;
    use serde_json::json;

    #[test]
    fn arguments_become_workspace_relative_paths() {
        let ws = tempfile::tempdir().unwrap();
        let root = Root::new(ws.path());
        let lex = |s: &str| arg(s, false, &root).lexical;
        assert_eq!(lex("./src/../.env"), ".env");
        assert_eq!(lex("a/b"), "a/b");
        assert_eq!(lex("."), "");
        assert_eq!(lex("/etc/passwd"), "/etc/passwd");
        assert!(lex("../x").ends_with("/x") && lex("../x").starts_with('/'));
    }

    #[test]
    fn a_symlink_is_also_spelled_as_where_it_leads() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join("secrets")).unwrap();
        std::os::unix::fs::symlink(ws.path().join("secrets"), ws.path().join("innocent")).unwrap();
        let root = Root::new(ws.path());
        let a = arg("innocent/key", false, &root);
        assert_eq!(a.spellings().collect::<Vec<_>>(), vec!["innocent/key", "secrets/key"]);
    }

    #[test]
    fn shell_words_and_redirections_are_path_arguments() {
        let ws = tempfile::tempdir().unwrap();
        let root = Root::new(ws.path());
        let script = parse("cat -n a --file=b -o c > d; sh -c 'rm e'");
        let found: Vec<String> = of_script(&script, &root).into_iter().map(|a| a.lexical).collect();
        for want in ["a", "b", "c", "d", "e"] {
            assert!(found.contains(&want.to_string()), "{want} in {found:?}");
        }
        assert!(!found.iter().any(|f| f.ends_with("-n")));
        let input = json!({"path": "x", "paths": ["y"], "source_file": "z", "content": "not a path"});
        let found: Vec<String> = of_input(&input, || &root).into_iter().map(|a| a.lexical).collect();
        assert_eq!(found, vec!["x", "y", "z"]);
    }
}
