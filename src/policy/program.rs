//! A rule on a program matches the program that runs, not the word it is called by.
//!
//! `command.rs` matches words; a word is only a name. `ln -s /bin/rm del && ./del victim`,
//! a copy of `rm` under another name, or `git send-pack` for a denied `git push` run the
//! denied program (or do its work) under a word no rule names. So a deny or ask rule's program
//! is also compared with what each command's program word leads to ([`segment`]):
//! - by identity: the file the word resolves to (a path from the folder the command runs in,
//!   else the first match on PATH, symlinks followed) is the same file (device and inode) as
//!   one the rule's program names on PATH, or a regular file with the same content (SHA-256,
//!   for files up to `policy.program_hash_max_bytes`);
//! - by doubt: a program word that does not resolve now, or that another command of the same
//!   line names as a file it may make or replace (`ln -s /bin/rm del && ./del`), may be the
//!   denied program: the rule may match (asked), when its other words could;
//! - by where it lies: a program word that is a path into the workspace, and not the rule's
//!   program by identity (`./s.sh`, a copy of `rm` with a byte added, a link to `env`), is code
//!   the checkout or a call chose, which may run anything: a doubt, where the rule could match;
//! - for git, by the code the repository chooses: a git command in a repository with hooks or
//!   a configuration that names programs may run anything (a doubt, `git_code.rs`);
//! - for git, by the plumbing that does a porcelain command's work ([`GIT_PLUMBING`]) and the
//!   dashed spellings git runs (`git-send-pack`, `ssh host git-receive-pack`).
//!
//! Only words the rule could match are looked at: the program word is put in the rule's
//! program's place and the words matched as `command.rs` matches them, so a rule `git push`
//! never asks about `./build.sh`.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use sha2::{Digest, Sha256};

use super::command;
use super::paths::{Place, Root, named_elsewhere, physical};
use super::rule::Match;
use crate::shell::{Runs, Script, Segment, base_name};

/// What `fetch`, `pull` and `clone` run to receive objects (one list: they are the same work).
const RECEIVE_OBJECTS: &[&str] = &[
    "fetch-pack",
    "http-fetch",
    "upload-pack",
    "remote-ext",
    "remote-fd",
    "remote-http",
    "remote-https",
];

/// git's porcelain commands and the plumbing that does the same work, so a rule denying one
/// denies the others. Each row is what the porcelain command does, in git's own plumbing:
/// - `push` sends objects and updates remote refs: `send-pack` (and `http-push`), the
///   `receive-pack` it runs on the other side (a local path, or `ssh host git-receive-pack`),
///   and the remote helpers that speak the same protocol on stdin (`remote-ext` runs any
///   command).
/// - `fetch`, `pull` and `clone` receive objects: `fetch-pack`, `http-fetch`, the
///   `upload-pack` they run on the other side, and the same remote helpers.
/// - `commit` is `commit-tree` plus `update-ref`; `tag` is `mktag` plus `update-ref`;
///   `branch` moves refs with `update-ref`.
/// - `merge`, `rebase`, `cherry-pick`, `revert` and `am` write trees and commits:
///   `merge-tree`, `merge-file`, `merge-index`, `read-tree`, `commit-tree`, `update-ref`.
/// - `reset`, `checkout`, `switch` and `restore` rewrite the index and files: `read-tree`,
///   `checkout-index`, `update-index`, `update-ref`, `symbolic-ref`.
/// - `add`, `rm` and `mv` change the index: `update-index`.
/// - `gc` and `prune` drop objects: `prune`, `prune-packed`, `repack`, `reflog`.
const GIT_PLUMBING: &[(&str, &[&str])] = &[
    (
        "push",
        &[
            "send-pack",
            "http-push",
            "receive-pack",
            "remote-ext",
            "remote-fd",
            "remote-http",
            "remote-https",
        ],
    ),
    ("fetch", RECEIVE_OBJECTS),
    ("pull", RECEIVE_OBJECTS),
    ("clone", RECEIVE_OBJECTS),
    ("commit", &["commit-tree", "update-ref"]),
    ("tag", &["mktag", "update-ref"]),
    ("branch", &["update-ref"]),
    (
        "merge",
        &["merge-tree", "merge-file", "merge-index", "read-tree", "commit-tree", "update-ref"],
    ),
    ("rebase", &["merge-tree", "read-tree", "commit-tree", "update-ref"]),
    ("cherry-pick", &["merge-tree", "read-tree", "commit-tree", "update-ref"]),
    ("revert", &["merge-tree", "read-tree", "commit-tree", "update-ref"]),
    ("am", &["apply", "commit-tree", "update-ref"]),
    (
        "reset",
        &["read-tree", "checkout-index", "update-index", "update-ref", "symbolic-ref"],
    ),
    (
        "checkout",
        &["read-tree", "checkout-index", "update-index", "update-ref", "symbolic-ref"],
    ),
    (
        "switch",
        &["read-tree", "checkout-index", "update-index", "update-ref", "symbolic-ref"],
    ),
    ("restore", &["read-tree", "checkout-index", "update-index"]),
    ("add", &["update-index"]),
    ("rm", &["update-index"]),
    ("mv", &["update-index"]),
    ("gc", &["prune", "prune-packed", "repack", "reflog"]),
    ("prune", &["prune-packed"]),
];

/// What `sh` runs itself, never looked up on PATH: such a word is not a program file.
const SHELL_BUILTINS: &[&str] = &[
    ".", ":", "[", "alias", "bg", "break", "cd", "command", "continue", "echo", "eval", "exec", "exit", "export", "false", "fc", "fg",
    "getopts", "hash", "jobs", "kill", "local", "popd", "printf", "pushd", "pwd", "read", "readonly", "return", "set", "shift", "source",
    "test", "times", "trap", "true", "type", "ulimit", "umask", "unalias", "unset", "wait",
];

/// What [`segment`] reads besides the rule and the command: the workspace, where each command
/// runs, the script the command is part of, and the content-comparison limit.
pub(super) struct Context<'a> {
    /// The workspace.
    pub root: &'a Root,
    /// The whole command line.
    pub script: &'a Script,
    /// Where each of its simple commands runs, in `all_segments` order.
    pub places: &'a [Place],
    /// `policy.program_hash_max_bytes`: 0 compares no content.
    pub hash_max_bytes: u64,
}

/// The rule's words and those of the plumbing that does the same work (the rule's first).
pub(super) fn equivalents(rule: &[String]) -> Vec<Vec<String>> {
    let mut out = vec![rule.to_vec()];
    if let [program, sub, rest @ ..] = rule
        && base_name(program) == "git"
        && let Some((_, plumbing)) = GIT_PLUMBING.iter().find(|(p, _)| p == sub)
    {
        for p in *plumbing {
            let mut words = vec![program.clone(), p.to_string()];
            words.extend(rest.iter().cloned());
            out.push(words);
        }
    }
    out
}

/// How far a deny or ask rule's words match `script`, the program that runs included.
pub(super) fn restricts(rule: &[String], cx: &Context<'_>) -> Match {
    let mut best = command::restricts(rule, cx.script);
    let eqs = equivalents(rule);
    for (index, seg) in cx.script.all_segments().into_iter().enumerate() {
        if best == Match::Yes {
            break;
        }
        best = best.max(beyond_words(&eqs, seg, index, cx));
    }
    best
}

/// How far a deny or ask rule's words match the simple command `seg` (the `index`th of
/// `all_segments`): by its words, by the plumbing that does the same work, and by the program
/// its program word leads to.
pub(super) fn segment(rule: &[String], seg: &Segment, index: usize, cx: &Context<'_>) -> Match {
    let found = command::segment(rule, seg);
    if found == Match::Yes {
        return found;
    }
    found.max(beyond_words(&equivalents(rule), seg, index, cx))
}

/// What the words of the rule alone do not find: the plumbing's words (`eqs` past the first,
/// which is the rule's), git's dashed spellings, and the program the word leads to.
fn beyond_words(eqs: &[Vec<String>], seg: &Segment, index: usize, cx: &Context<'_>) -> Match {
    let mut best = Match::No;
    for words in eqs.iter().skip(1) {
        best = best.max(command::segment(words, seg));
        if best == Match::Yes {
            return best;
        }
    }
    best = best.max(dashed(eqs, seg));
    if best == Match::Yes {
        return best;
    }
    best = best.max(identity(eqs, seg, index, cx));
    if best == Match::No && super::git_code::runs_repository_code(seg, cx.script, cx.places.get(index), cx.root) {
        // Its hooks or configured programs may run anything, the rule's program too.
        best = Match::Maybe;
    }
    best
}

/// git's dashed spellings: `git-send-pack` as the program is `git send-pack`; as another
/// program's argument (`ssh host git-receive-pack repo`) it may run there (a doubt).
fn dashed(eqs: &[Vec<String>], seg: &Segment) -> Match {
    let Some(program) = eqs.first().and_then(|r| r.first()) else {
        return Match::No;
    };
    if base_name(program) != "git" {
        return Match::No;
    }
    let at = match seg.runs {
        Runs::Program(at) => at,
        Runs::Script(_) | Runs::Unknown => 0,
    };
    let mut best = Match::No;
    for (i, word) in seg.words.iter().enumerate() {
        let Some(sub) = base_name(word).strip_prefix("git-") else {
            continue;
        };
        if i == at {
            let mut words = seg.words[..at].to_vec();
            words.extend(["git".to_string(), sub.to_string()]);
            words.extend(seg.words[at + 1..].iter().cloned());
            let spelled = Segment { words, ..seg.clone() };
            for e in eqs {
                best = best.max(command::segment(e, &spelled));
            }
        } else if eqs.iter().any(|e| e.get(1).is_some_and(|s| s == sub)) {
            best = best.max(Match::Maybe);
        }
    }
    best
}

/// The program word of `seg` against the rule's program by what it leads to.
fn identity(eqs: &[Vec<String>], seg: &Segment, index: usize, cx: &Context<'_>) -> Match {
    let (Runs::Program(at), Some(rule_program)) = (&seg.runs, eqs.first().and_then(|r| r.first())) else {
        return Match::No;
    };
    let Some(word) = seg.words.get(*at) else {
        return Match::No;
    };
    if rule_program == "*" || (!seg.literal && command::is_expanded(word)) || word == rule_program {
        return Match::No;
    }
    if !rule_program.contains('/') && base_name(word) == rule_program {
        // Matched by name already (`command.rs`).
        return Match::No;
    }
    // Could the rule match at all, were this word its program?
    let mut words = seg.words.clone();
    words[*at] = rule_program.clone();
    let spelled = Segment { words, ..seg.clone() };
    let could = eqs.iter().map(|e| command::segment(e, &spelled)).max().unwrap_or(Match::No);
    if could == Match::No {
        return Match::No;
    }
    if !word.contains('/') && SHELL_BUILTINS.contains(&word.as_str()) {
        return Match::No;
    }
    // Another command of the line may make or replace it: what it is now says nothing.
    if Path::new(word).file_name().is_some_and(|n| named_elsewhere(cx.script, index, n)) {
        return Match::Maybe;
    }
    let Some(denied) = denied(rule_program) else {
        // The rule's program is not installed: nothing here can be a link to it or a copy.
        return Match::No;
    };
    let files = resolve(word, cx.places.get(index), cx.root);
    if files.is_empty() {
        // It does not exist now: only something else can make it, and that may be anything.
        return Match::Maybe;
    }
    for file in &files {
        let Ok(meta) = std::fs::metadata(file) else { continue };
        for d in &denied {
            let same_file = meta.dev() == d.dev && meta.ino() == d.ino;
            let same_content = !same_file
                && meta.is_file()
                && meta.len() == d.size
                && d.size <= cx.hash_max_bytes
                && digest(file, cx.hash_max_bytes).is_some_and(|h| Some(h) == d.digest(cx.hash_max_bytes));
            if !(same_file || same_content) {
                continue;
            }
            if d.name == base_name(rule_program) {
                return could;
            }
            // A program that decides what it is by the name it is run under (busybox, a
            // coreutils multi-call binary) is another program under another of its names:
            // `ls` on PATH is the same file as `rm` but runs `ls`. Only a name it is not
            // installed under may be the denied one.
            return if crate::child_env::on_host_path(base_name(word)).is_some_and(|p| same(&p, d)) {
                Match::No
            } else {
                Match::Maybe
            };
        }
    }
    // A program in the workspace that is not the rule's (`./s.sh`, a copy of `rm` with a byte
    // added, a link to `env` that runs what follows it) is code the checkout or a call chose:
    // what it runs is in neither its words nor its identity.
    if word.contains('/') && in_workspace(word, cx.places.get(index), cx.root) {
        return Match::Maybe;
    }
    Match::No
}

/// The files a program word leads to: a path from each folder its command may run in, or the
/// first executable of that name on PATH (whose folders are where the child's PATH, the same
/// variable, looks).
fn resolve(word: &str, place: Option<&Place>, root: &Root) -> Vec<PathBuf> {
    if word.contains('/') {
        return Place::dirs_of(place, root)
            .iter()
            .filter_map(|d| physical(&d.join(word)))
            .filter(|p| p.is_file())
            .collect();
    }
    crate::child_env::on_host_path(word).into_iter().collect()
}

/// Whether the path `word`, read from a folder its command may run in, lies in the workspace
/// (its folders' links followed, not its last component's: a link there is the workspace's).
fn in_workspace(word: &str, place: Option<&Place>, root: &Root) -> bool {
    Place::dirs_of(place, root).iter().any(|d| {
        let joined = d.join(word);
        let Some(name) = joined.file_name() else {
            return false;
        };
        let folder = joined.parent().and_then(physical);
        folder.is_some_and(|f| f.starts_with(root.resolved()) && f.join(name).symlink_metadata().is_ok())
    })
}

/// A file as of one change: device, inode, size, modification time (seconds, nanoseconds).
type FileVersion = (u64, u64, u64, (i64, i64));

/// A file the rule's program names, as what identifies it.
#[derive(Debug, Clone)]
struct Denied {
    path: PathBuf,
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    /// The name of the file itself, its links resolved (`rm`, or `busybox` for a multi-call).
    name: String,
}

impl Denied {
    fn digest(&self, max: u64) -> Option<[u8; 32]> {
        // Hashed once per file and change, not per command.
        static CACHE: OnceLock<Mutex<HashMap<FileVersion, [u8; 32]>>> = OnceLock::new();
        let key = (self.dev, self.ino, self.size, self.mtime);
        let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
        if let Some(h) = cache.lock().ok().and_then(|c| c.get(&key).copied()) {
            return Some(h);
        }
        let h = digest(&self.path, max)?;
        if let Ok(mut c) = cache.lock() {
            c.insert(key, h);
        }
        Some(h)
    }
}

fn same(path: &Path, d: &Denied) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.dev() == d.dev && m.ino() == d.ino)
}

/// Every file the rule's program names: the word itself when it is a path, else each
/// executable of that name in a folder of the PATH (different folders may hold different
/// files); `None` when there is none.
fn denied(program: &str) -> Option<Vec<Denied>> {
    let candidates: Vec<PathBuf> = if program.contains('/') {
        vec![PathBuf::from(program)]
    } else {
        let dirs = crate::child_env::host_path_dirs();
        if dirs.is_empty() {
            return None;
        }
        dirs.into_iter().map(|d| d.join(program)).collect()
    };
    let mut out: Vec<Denied> = Vec::new();
    for c in candidates {
        let Ok(meta) = std::fs::metadata(&c) else { continue };
        if !meta.is_file() || out.iter().any(|d| d.dev == meta.dev() && d.ino == meta.ino()) {
            continue;
        }
        let real = c.canonicalize().unwrap_or_else(|_| c.clone());
        out.push(Denied {
            name: real.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            path: real,
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
        });
    }
    (!out.is_empty()).then_some(out)
}

/// The SHA-256 of a regular file of at most `max` bytes.
fn digest(path: &Path, max: u64) -> Option<[u8; 32]> {
    // The file was a regular one when it was looked at; a FIFO swapped in since must not
    // hold the judgement (and the thread of every session judged there).
    let file = crate::regular_file::open(path, crate::regular_file::LastLink::Follow).ok()?;
    let mut hasher = Sha256::new();
    let mut reader = file.take(max.saturating_add(1));
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = reader.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&buf[..n]);
    }
    (total <= max).then(|| hasher.finalize().into())
}

#[cfg(test)]
#[path = "program_tests.rs"]
mod tests;
