//! git runs code the repository chooses: its hooks (`pre-commit`, `post-checkout`, `pre-push`,
//! … in `.git/hooks` or `core.hooksPath`) and the programs its configuration names
//! (`core.sshCommand`, `core.fsmonitor`, `core.pager`, a diff driver's `textconv`, a filter,
//! an alias). A command cleared to write may have put them there, so a `git commit` can run
//! `rm` or push under a deny rule on either. Where the repository a git command works in has
//! such code, or the same line writes into a `.git` folder, the command is a doubt for every
//! deny or ask rule (`program.rs`): asked, in every mode.

use std::path::{Path, PathBuf};

use super::paths::{Place, Root};
use crate::shell::{Runs, Script, Segment, base_name};

/// Configuration keys whose value git runs as a program (lowercase, as a fragment of the
/// file's text: a section or a key).
const PROGRAM_KEYS: &[&str] = &[
    "hookspath",
    "sshcommand",
    "fsmonitor",
    "pager",
    "editor",
    "askpass",
    "textconv",
    "[filter",
    "[alias",
    "[credential",
    "[diff \"",
    "[merge \"",
    "gpg.program",
    "[gpg",
    "proxycommand",
    "gitproxy",
    "[sendemail",
    "uploadpack",
    "receivepack",
];

/// How much of a repository's `config` is read (a larger one is a doubt itself).
const CONFIG_MAX_BYTES: u64 = 1 << 20;

/// Whether the simple command `seg` (the `index`th of `script`'s segments) is git working in a
/// repository whose hooks or configuration name programs, or in a line that writes into a
/// `.git` folder.
pub(super) fn runs_repository_code(seg: &Segment, script: &Script, place: Option<&Place>, root: &Root) -> bool {
    let at = match seg.runs {
        Runs::Program(at) => at,
        Runs::Script(_) | Runs::Unknown => return false,
    };
    if seg.words.get(at).is_none_or(|w| base_name(w) != "git") {
        return false;
    }
    if writes_git(script) {
        return true;
    }
    Place::dirs_of(place, root)
        .iter()
        .filter_map(|d| git_dir(d))
        .any(|g| has_hooks(&g) || names_programs(&g))
}

/// Whether a word or a redirection of the line's other commands names a path in a `.git`
/// folder (or the folder), or may (an expansion or a glob: `cd .g?t/hooks`, `> "$D/x"`).
fn writes_git(script: &Script) -> bool {
    let in_git = |w: &str| w == ".git" || w.starts_with(".git/") || w.contains("/.git/") || w.ends_with("/.git");
    let may_be = |w: &str| w.contains(['$', '`', '*', '?', '[', '{', '~']);
    script.all_redirects().into_iter().any(|t| in_git(t) || may_be(t))
        || script.all_segments().iter().any(|s| {
            s.words.first().is_none_or(|p| base_name(p) != "git")
                && s.words
                    .iter()
                    .enumerate()
                    .skip(1)
                    .any(|(i, w)| in_git(w) || s.patterns.contains(&i) || (!s.literal && super::command::is_expanded(w)))
        })
}

/// The repository folder of the work tree `dir` is in: the nearest `.git` above it (a folder,
/// or a file naming one with `gitdir:`).
fn git_dir(dir: &Path) -> Option<PathBuf> {
    let mut at = Some(dir);
    while let Some(d) = at {
        let dot = d.join(".git");
        match std::fs::symlink_metadata(&dot) {
            Ok(m) if m.is_dir() => return Some(dot),
            Ok(m) if m.is_file() => {
                let text = read_bounded(&dot, 4096)?;
                let named = text.trim().strip_prefix("gitdir:")?.trim().to_string();
                return Some(d.join(named));
            }
            _ => at = d.parent(),
        }
    }
    None
}

/// Whether the repository has a hook: a file in `hooks` that is not one of git's samples.
fn has_hooks(git: &Path) -> bool {
    std::fs::read_dir(git.join("hooks"))
        .map(|entries| entries.flatten().any(|e| !e.file_name().to_string_lossy().ends_with(".sample")))
        .unwrap_or(false)
}

/// Whether the repository's configuration names a program git may run (or cannot be read
/// whole).
fn names_programs(git: &Path) -> bool {
    let config = git.join("config");
    if std::fs::symlink_metadata(&config).is_err() {
        return false;
    }
    match read_bounded(&config, CONFIG_MAX_BYTES) {
        Some(text) => {
            let text = text.to_ascii_lowercase();
            PROGRAM_KEYS.iter().any(|k| text.contains(k))
        }
        None => true,
    }
}

/// `path`'s text, when it is a regular file of at most `max` bytes.
fn read_bounded(path: &Path, max: u64) -> Option<String> {
    let file = crate::regular_file::open(path, crate::regular_file::LastLink::Refuse).ok()?;
    let bytes = crate::regular_file::read_bounded(file, max).ok()??;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::parse;

    #[test]
    fn a_line_that_writes_or_may_write_into_git_is_found() {
        for line in [
            "printf x > .git/hooks/pre-commit; git commit",
            "cp h .git/hooks/pre-commit && git commit",
            "cd .git/hooks && printf x > pre-commit; cd ../..; git commit",
            "cd .g?t/hooks && printf x > pre-commit; cd ../..; git commit",
            "printf x > \"$(echo .git)/hooks/pre-commit\"; git commit",
            "cd $D && git commit",
        ] {
            assert!(writes_git(&parse(line)), "{line}");
        }
        for line in [
            "git add -A && git commit -m x",
            "cargo fmt && git commit -am x",
            "echo done > log.txt; git status",
        ] {
            assert!(!writes_git(&parse(line)), "{line}");
        }
    }
}
