//! The path-like arguments of a call, as the files they name relative to the workspace.
//!
//! A rule's `path` glob is written relative to the workspace (`secrets/**`, `**/.env`) or
//! absolute (`/etc/**`), so each argument is made into both spellings the file has: the one its
//! words give (`./src/../.env` → `.env`, `~/x` → the home folder's) and the one the kernel
//! reaches, symlinks followed one component at a time, so `current/../prod.key` is where the
//! folder `current` leads, not the workspace. A rule that restricts matches either; one that
//! allows needs both.
//!
//! A relative argument is read from the folder its command runs in ([`places`]): the shell's
//! `cd` moves the commands after it, and a program's own `-C DIR`, `--chdir`, `--directory`
//! (`env -C`, `git -C`, `make -C`, `tar -C`) moves its own words. Where the words do not say
//! the folder (`cd $X`, `cd` into a folder the same command makes), relative arguments after it
//! may name any file.

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

/// Where one simple command of a script runs, as far as its words say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Place {
    /// The folders (absolute, as the words spell them) its relative arguments may be read from;
    /// more than one where a program's `-C` moves them, or where a `cd` may have failed.
    pub dirs: Vec<PathBuf>,
    /// A `cd` before it went where the words do not say: its relative arguments may name any
    /// file.
    pub unsure: bool,
}

impl Place {
    /// The folders of `place`, or the workspace where nothing says where a command runs.
    pub fn dirs_of(place: Option<&Place>, root: &Root) -> Vec<PathBuf> {
        place.map_or_else(|| root.place().dirs, |p| p.dirs.clone())
    }
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

    /// The workspace as its words spell it (absolute, cleaned).
    pub fn lexical(&self) -> &Path {
        &self.lexical
    }

    /// The workspace with its symlinks resolved.
    pub fn resolved(&self) -> &Path {
        &self.resolved
    }

    /// Where a command runs when nothing moved it: the workspace.
    pub fn place(&self) -> Place {
        Place {
            dirs: vec![self.lexical.clone()],
            unsure: false,
        }
    }
}

/// Where each simple command of `script` runs, in the order of [`Script::all_segments`].
///
/// A `cd` (or `pushd`) to a folder that exists now, and that no other command of the script
/// names, moves every command after it there; one to a folder that does not exist fails and
/// moves nothing; one the script itself may make or replace (`mkdir x && cd x`,
/// `ln -s secrets a && cd a`), or one the words do not spell (`cd $X`, `cd -`, `popd`), leaves
/// the place unsure. A program's own `-C DIR`, `--chdir DIR` and `--directory DIR` add DIR (from
/// each folder it may run in) for its own words.
pub(super) fn places(script: &Script, root: &Root) -> Vec<Place> {
    let segments = script.all_segments();
    let mut current = vec![root.lexical.clone()];
    let mut unsure = false;
    let mut out = Vec::with_capacity(segments.len());
    for (i, seg) in segments.iter().enumerate() {
        let words = seg.command().unwrap_or(&seg.words);
        let mut dirs = current.clone();
        let mut unsure_here = unsure;
        for (at, word) in seg.words.iter().enumerate() {
            let value = match word.as_str() {
                "-C" | "--chdir" | "--directory" => seg.words.get(at + 1).map(String::as_str),
                w => w.strip_prefix("--chdir=").or_else(|| w.strip_prefix("--directory=")),
            };
            let Some(value) = value else { continue };
            if !seg.literal && super::command::is_expanded(value) {
                unsure_here = true;
                continue;
            }
            for c in &current {
                let d = clean(&c.join(home(value)));
                if !dirs.contains(&d) {
                    dirs.push(d);
                }
            }
        }
        out.push(Place { dirs, unsure: unsure_here });
        let program = words.first().map(|w| crate::shell::base_name(w));
        match program {
            Some("cd" | "pushd") => {
                let target = words.iter().skip(1).find(|w| !w.starts_with('-') || w.as_str() == "-");
                match target {
                    None => {
                        if let Some(h) = std::env::var_os("HOME") {
                            current = vec![PathBuf::from(h)];
                        }
                    }
                    Some(t) if t == "-" || (!seg.literal && super::command::is_expanded(t)) => unsure = true,
                    Some(t) => {
                        let mut next = Vec::new();
                        for c in &current {
                            let d = clean(&c.join(home(t)));
                            if d.file_name().is_some_and(|n| named_elsewhere(script, i, n)) {
                                unsure = true;
                                next.push(d);
                            } else if d.is_dir() {
                                next.push(d);
                            } else {
                                // A cd that fails leaves the folder as it was.
                                next.push(c.clone());
                            }
                        }
                        next.dedup();
                        current = next;
                    }
                }
            }
            Some("popd") => unsure = true,
            _ => {}
        }
    }
    out
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

/// Whether a command of `script` other than the `by`th (of `all_segments`) names a path whose
/// last component is `name`, as an argument or a redirection: it may make or replace that file
/// (`mkdir x`, `ln -s /bin/rm del`, `> del`). The folder it is read from may differ from the
/// reader's, so the name is what counts.
pub(super) fn named_elsewhere(script: &Script, by: usize, name: &std::ffi::OsStr) -> bool {
    let last = |w: &str| Path::new(w).file_name().is_some_and(|n| n == name);
    script
        .all_segments()
        .iter()
        .enumerate()
        .any(|(i, s)| i != by && s.words.iter().skip(1).any(|w| last(w)))
        || script.all_redirects().into_iter().any(last)
}

/// The arguments of every simple command of `script` that may name files (every word after
/// the program but options, the value of `--option=value`), and the files it redirects to, each
/// read from every folder its command may run in (`places`, from [`places`]).
pub(super) fn of_script(script: &Script, root: &Root, places: &[Place]) -> Vec<PathArg> {
    let mut out = Vec::new();
    for (seg, place) in script.all_segments().into_iter().zip(places) {
        out.extend(of_segment(seg, root, place));
    }
    out.extend(of_redirects(script, root, places));
    out
}

/// The arguments of one simple command that may name files, read from the folders of `place`.
pub(super) fn of_segment(seg: &Segment, root: &Root, place: &Place) -> Vec<PathArg> {
    let mut out = Vec::new();
    let git = seg
        .command()
        .and_then(|w| w.first())
        .is_some_and(|p| crate::shell::base_name(p) == "git");
    for (i, word) in seg.words.iter().enumerate().skip(1) {
        let expanded = !seg.literal && super::command::is_expanded(word);
        let value = if word.starts_with('-') && !expanded {
            match word.split_once('=') {
                Some((_, v)) if !v.is_empty() => v,
                _ => continue,
            }
        } else {
            word.as_str()
        };
        out.extend(in_place(value, expanded, root, place));
        if git && !expanded {
            out.extend(git_object_path(value, root, place));
        }
        // A glob stands for the paths it expands to (`pattern.rs`): those there are now are
        // arguments too, read from each folder the command may run in.
        if seg.patterns.contains(&i) && !expanded {
            let pattern = home(value);
            let pattern = pattern.to_string_lossy();
            let dirs = if pattern.starts_with('/') {
                &place.dirs[..place.dirs.len().min(1)]
            } else {
                &place.dirs[..]
            };
            for dir in dirs {
                for found in super::pattern::expand(dir, &pattern) {
                    out.push(arg_in(&found.to_string_lossy(), false, root, dir));
                }
            }
        }
    }
    out
}

/// The file a git object name names (`HEAD:config/key`, `:config/key`, `:2:config/key`, as
/// `git show` and `git cat-file` take them): a path from the top of the repository (taken as
/// the workspace's, and, since a repository may be a folder of it, the command's folder's
/// too), or from the command's folder when it starts with `./` or `../`. `git show
/// HEAD:secrets/key` prints the file as committed, which no mask of the working tree hides.
fn git_object_path(word: &str, root: &Root, place: &Place) -> Vec<PathArg> {
    let path = match word.strip_prefix(':') {
        // `:N:path`, a stage of the index.
        Some(rest) => match rest.split_once(':') {
            Some((stage, path)) if stage.len() == 1 && stage.bytes().all(|b| b.is_ascii_digit()) => path,
            _ => rest,
        },
        None => match word.split_once(':') {
            Some((rev, path)) if !rev.is_empty() => path,
            _ => return Vec::new(),
        },
    };
    if path.is_empty() || path.starts_with('/') {
        return Vec::new();
    }
    let mut out = in_place(path, false, root, place);
    if !path.starts_with("./") && !path.starts_with("../") {
        out.push(arg(path, false, root));
    }
    out
}

/// The redirection targets of `script` and of the scripts its wrappers run, read from every
/// folder one of its commands may run in (`places`, in the order of `all_segments`).
pub(super) fn of_redirects(script: &Script, root: &Root, places: &[Place]) -> Vec<PathArg> {
    let mut all = root.place();
    for p in places {
        all.unsure |= p.unsure;
        for d in &p.dirs {
            if !all.dirs.contains(d) {
                all.dirs.push(d.clone());
            }
        }
    }
    script
        .all_redirects()
        .into_iter()
        .flat_map(|t| in_place(t, super::command::is_expanded(t), root, &all))
        .collect()
}

/// `raw` read from each folder of `place`: one argument per folder (an absolute path, one).
fn in_place(raw: &str, expanded: bool, root: &Root, place: &Place) -> Vec<PathArg> {
    let relative_word = !raw.starts_with('/') && !raw.starts_with('~');
    let expanded = expanded || (place.unsure && relative_word);
    if !relative_word {
        return vec![arg_in(raw, expanded, root, &root.lexical)];
    }
    place.dirs.iter().map(|d| arg_in(raw, expanded, root, d)).collect()
}

fn arg(raw: &str, expanded: bool, root: &Root) -> PathArg {
    arg_in(raw, expanded, root, &root.lexical)
}

/// `raw` read from the folder `dir` (absolute).
fn arg_in(raw: &str, expanded: bool, root: &Root, dir: &Path) -> PathArg {
    let joined = dir.join(home(raw));
    let lexical = relative(&clean(&joined), &root.lexical);
    let resolved = physical(&joined).map(|r| relative(&r, &root.resolved));
    PathArg {
        lexical,
        resolved,
        expanded,
    }
}

/// `~` and `~/…` as the home folder's.
fn home(raw: &str) -> PathBuf {
    match (raw.strip_prefix('~'), std::env::var_os("HOME")) {
        (Some(rest), Some(h)) if rest.is_empty() || rest.starts_with('/') => PathBuf::from(h).join(rest.trim_start_matches('/')),
        _ => PathBuf::from(raw),
    }
}

/// `.` and `..` removed by the words alone (`..` at the root stays at the root).
pub(super) fn clean(path: &Path) -> PathBuf {
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

/// `path` (absolute, not cleaned) as the kernel walks it: one component at a time, a symlink
/// replaced by where it leads before the next component is read, so a `..` after a symlink
/// leaves the folder the link leads to. Once a component does not exist the rest is appended by
/// its words. `None` past the kernel's own limit of links in one walk (the open fails there).
pub(super) fn physical(path: &Path) -> Option<PathBuf> {
    // Linux's MAXSYMLINKS: a walk through more links fails with ELOOP, so no file is named.
    const MAX_LINKS: usize = 40;
    fn push(stack: &mut Vec<std::ffi::OsString>, p: &Path) {
        for c in p.components().rev() {
            match c {
                Component::Normal(n) => stack.push(n.to_os_string()),
                Component::ParentDir => stack.push("..".into()),
                Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            }
        }
    }
    // The components still to walk, last first; a link's target is walked in its place.
    let mut stack: Vec<std::ffi::OsString> = Vec::new();
    push(&mut stack, path);
    let mut out = PathBuf::from("/");
    let mut exists = true;
    let mut links = 0;
    while let Some(part) = stack.pop() {
        if part == ".." {
            out.pop();
            continue;
        }
        out.push(&part);
        if !exists {
            continue;
        }
        match std::fs::symlink_metadata(&out) {
            Ok(m) if m.file_type().is_symlink() => {
                links += 1;
                if links > MAX_LINKS {
                    return None;
                }
                let target = std::fs::read_link(&out).ok()?;
                out.pop();
                if target.is_absolute() {
                    out = PathBuf::from("/");
                }
                push(&mut stack, &target);
            }
            Ok(_) => {}
            Err(_) => exists = false,
        }
    }
    Some(out)
}

/// `path` relative to `root` with `/` between components (`""` for the root itself), or
/// absolute when it lies outside.
pub(super) fn relative(path: &Path, root: &Path) -> String {
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
        let found: Vec<String> = of_script(&script, &root, &places(&script, &root))
            .into_iter()
            .map(|a| a.lexical)
            .collect();
        for want in ["a", "b", "c", "d", "e"] {
            assert!(found.contains(&want.to_string()), "{want} in {found:?}");
        }
        assert!(!found.iter().any(|f| f.ends_with("-n")));
        let input = json!({"path": "x", "paths": ["y"], "source_file": "z", "content": "not a path"});
        let found: Vec<String> = of_input(&input, || &root).into_iter().map(|a| a.lexical).collect();
        assert_eq!(found, vec!["x", "y", "z"]);
    }

    /// The spellings every path argument of `command` has.
    fn spellings(ws: &Path, command: &str) -> Vec<String> {
        let root = Root::new(ws);
        let script = parse(command);
        of_script(&script, &root, &places(&script, &root))
            .iter()
            .flat_map(|a| a.spellings().map(str::to_string).collect::<Vec<_>>())
            .collect()
    }

    #[test]
    fn a_dot_dot_after_a_symlink_leaves_where_the_link_leads() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join("secrets/v2")).unwrap();
        std::os::unix::fs::symlink("secrets/v2", ws.path().join("current")).unwrap();
        let root = Root::new(ws.path());
        // The words say `prod.key`; the kernel reads `secrets/prod.key`.
        let a = arg("current/../prod.key", false, &root);
        assert_eq!(a.spellings().collect::<Vec<_>>(), vec!["prod.key", "secrets/prod.key"]);
        // A loop of links names nothing (the open fails with ELOOP).
        std::os::unix::fs::symlink("loop", ws.path().join("loop")).unwrap();
        assert_eq!(arg("loop/x", false, &root).resolved, None);
    }

    #[test]
    fn relative_arguments_are_read_where_their_command_runs() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join("src/inner")).unwrap();
        let has = |command: &str, want: &str| {
            let found = spellings(ws.path(), command);
            assert!(found.iter().any(|f| f == want), "{command}: {want} in {found:?}");
        };
        has("cd src && cat ../secrets/prod.key", "secrets/prod.key");
        has("cd src; cd inner; cat ../../secrets/prod.key", "secrets/prod.key");
        has("env -C src cat ../secrets/prod.key", "secrets/prod.key");
        has("env --chdir=src cat ../secrets/prod.key", "secrets/prod.key");
        has("git -C src show ../secrets/prod.key", "secrets/prod.key");
        // Git's object names: the file as committed, staged, or at a stage of a merge.
        has("git show HEAD:secrets/prod.key", "secrets/prod.key");
        has("git show origin/main~2:secrets/prod.key", "secrets/prod.key");
        has("git cat-file -p :secrets/prod.key", "secrets/prod.key");
        has("git show :2:secrets/prod.key", "secrets/prod.key");
        has("cd src && git show HEAD:secrets/prod.key", "secrets/prod.key");
        has("cd src && git show HEAD:../secrets/prod.key", "secrets/prod.key");
        has("make --directory src ../secrets/prod.key", "secrets/prod.key");
        has("sh -c 'cd src && cat ../secrets/prod.key'", "secrets/prod.key");
        has("cd src && cat x > ../secrets/out", "secrets/out");
        // A cd that fails moves nothing: the words are read from the workspace.
        has("cd nowhere; cat secrets/prod.key", "secrets/prod.key");
    }

    #[test]
    fn a_cd_the_words_do_not_spell_makes_relative_arguments_unsure() {
        let ws = tempfile::tempdir().unwrap();
        let root = Root::new(ws.path());
        for command in ["cd $D && cat x", "cd - && cat x", "mkdir d && cd d && cat x", "popd; cat x"] {
            let script = parse(command);
            let args = of_script(&script, &root, &places(&script, &root));
            let x: Vec<&PathArg> = args.iter().filter(|a| a.lexical.ends_with('x')).collect();
            assert!(!x.is_empty() && x.iter().all(|a| a.expanded), "{command}: {args:?}");
        }
        let script = parse("cd /etc && cat x");
        let args = of_script(&script, &root, &places(&script, &root));
        assert!(args.iter().any(|a| a.lexical == "/etc/x" && !a.expanded), "{args:?}");
    }
}
