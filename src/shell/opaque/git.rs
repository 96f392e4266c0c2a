//! `git`: which of its words run a program git is configured with or given, or name a command
//! that is not git's own (an alias).

use crate::shell::flags::{Opt, any};

use Opt::{Long, Short};

/// git's own commands (an alias of one of them is ignored by git); any other word after the
/// global options may be an alias or a `git-<name>` program.
const GIT_COMMANDS: &[&str] = &[
    "add",
    "am",
    "annotate",
    "apply",
    "archive",
    "backfill",
    "bisect",
    "blame",
    "branch",
    "bundle",
    "cat-file",
    "check-attr",
    "check-ignore",
    "check-mailmap",
    "check-ref-format",
    "checkout",
    "checkout-index",
    "cherry",
    "cherry-pick",
    "citool",
    "clean",
    "clone",
    "column",
    "commit",
    "commit-graph",
    "commit-tree",
    "config",
    "count-objects",
    "credential",
    "describe",
    "diagnose",
    "diff",
    "diff-files",
    "diff-index",
    "diff-tree",
    "difftool",
    "fast-export",
    "fast-import",
    "fetch",
    "fetch-pack",
    "filter-branch",
    "fmt-merge-msg",
    "for-each-ref",
    "for-each-repo",
    "format-patch",
    "fsck",
    "gc",
    "get-tar-commit-id",
    "grep",
    "gui",
    "hash-object",
    "help",
    "index-pack",
    "init",
    "instaweb",
    "interpret-trailers",
    "log",
    "ls-files",
    "ls-remote",
    "ls-tree",
    "mailinfo",
    "mailsplit",
    "maintenance",
    "merge",
    "merge-base",
    "merge-file",
    "merge-index",
    "merge-tree",
    "mergetool",
    "mktag",
    "mktree",
    "multi-pack-index",
    "mv",
    "name-rev",
    "notes",
    "pack-objects",
    "pack-redundant",
    "pack-refs",
    "patch-id",
    "prune",
    "prune-packed",
    "pull",
    "push",
    "range-diff",
    "read-tree",
    "rebase",
    "reflog",
    "refs",
    "remote",
    "repack",
    "replace",
    "replay",
    "request-pull",
    "rerere",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "send-email",
    "shortlog",
    "show",
    "show-branch",
    "show-index",
    "show-ref",
    "sparse-checkout",
    "stage",
    "stash",
    "status",
    "stripspace",
    "submodule",
    "switch",
    "symbolic-ref",
    "tag",
    "unpack-file",
    "unpack-objects",
    "update-index",
    "update-ref",
    "update-server-info",
    "var",
    "verify-commit",
    "verify-pack",
    "verify-tag",
    "version",
    "whatchanged",
    "worktree",
    "write-tree",
];

/// git's global options that take no value and change nothing git runs.
const GIT_GLOBAL_FLAGS: &[&str] = &[
    "--no-pager",
    "-p",
    "--paginate",
    "-P",
    "--bare",
    "--no-replace-objects",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-optional-locks",
    "--no-lazy-fetch",
    "--no-advice",
    "-v",
    "--version",
    "-h",
    "--help",
    "--html-path",
    "--man-path",
    "--info-path",
    "--exec-path",
];

/// git's global options that take a value (glued with `=` or the next word) and change nothing
/// git runs.
const GIT_GLOBAL_VALUED: &[&str] = &["--work-tree", "--namespace", "--list-cmds", "--attr-source", "--super-prefix"];

/// git subcommands that run a command they are given or configured with, whatever the options.
const GIT_RUNS: &[&str] = &["filter-branch", "difftool", "mergetool", "instaweb", "citool", "gui"];

/// Options of git subcommands that run a program (any abbreviation of the long ones counts).
const GIT_RUN_OPTIONS: &[(&[&str], &[Opt])] = &[
    (&["rebase"], &[Short('x'), Long("--exec")]),
    (&["grep"], &[Short('O'), Long("--open-files-in-pager")]),
    (
        &["fetch", "pull", "clone", "push", "ls-remote", "archive", "remote", "submodule"],
        &[Long("--upload-pack"), Long("--receive-pack"), Long("--exec")],
    ),
    (&["clone"], &[Short('u'), Long("--template"), Long("--config")]),
    (&["init"], &[Long("--template")]),
    (
        &["send-email"],
        &[
            Long("--to-cmd"),
            Long("--cc-cmd"),
            Long("--header-cmd"),
            Long("--sendmail-cmd"),
            Long("--smtp-server"),
        ],
    ),
    (
        &[
            "log",
            "diff",
            "show",
            "whatchanged",
            "format-patch",
            "stash",
            "range-diff",
            "blame",
            "annotate",
            "cat-file",
        ],
        &[Long("--ext-diff"), Long("--textconv"), Long("--filters")],
    ),
];

/// `git`: configuration given on the line, an alias, another repository's configuration, or
/// an option that runs a program.
pub(super) fn git(args: &[String]) -> Option<String> {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if !a.starts_with('-') {
            break;
        }
        if a == "--" {
            // git refuses it, and runs nothing.
            return None;
        }
        if a == "-c" || a.starts_with("--config-env") || (a.starts_with("-c") && !a.starts_with("--")) {
            return Some(format!(
                "`git {a}` sets configuration, which can name a command git runs (an alias, a pager, a hook)"
            ));
        }
        if a.starts_with("--exec-path=") {
            return Some(format!("`git {a}` names where git finds the commands it runs"));
        }
        if a == "-C" || a == "--git-dir" || a.starts_with("--git-dir=") {
            let value = match a.split_once('=') {
                Some((_, v)) => v,
                None => {
                    i += 1;
                    args.get(i).map_or("", String::as_str)
                }
            };
            if !matches!(value, "." | "./" | ".git" | "./.git") {
                let spelled = if a.contains('=') { a.clone() } else { format!("{a} {value}") };
                return Some(format!(
                    "`git {spelled}` reads that repository's configuration, which can name commands git runs"
                ));
            }
            i += 1;
            continue;
        }
        let flag = a.split_once('=').map_or(a.as_str(), |(f, _)| f);
        if GIT_GLOBAL_VALUED.contains(&flag) {
            i += if a.contains('=') { 1 } else { 2 };
            continue;
        }
        if GIT_GLOBAL_FLAGS.contains(&a.as_str()) {
            i += 1;
            continue;
        }
        return Some(format!("`git {a}` is an option the judgement does not know exactly"));
    }
    let sub = args.get(i)?;
    if !GIT_COMMANDS.contains(&sub.as_str()) {
        return Some(format!(
            "`git {sub}` is not a git command: it may be an alias (or a `git-{sub}` program) that runs anything"
        ));
    }
    let rest = &args[i + 1..];
    if GIT_RUNS.contains(&sub.as_str()) {
        return Some(format!("`git {sub}` runs a command it is given or configured with"));
    }
    match sub.as_str() {
        "config" => {
            let reads = rest.iter().any(|a| {
                matches!(
                    a.as_str(),
                    "--get" | "--get-all" | "--get-regexp" | "--get-urlmatch" | "-l" | "--list" | "get" | "list"
                )
            });
            if !reads {
                return Some("`git config` can set a command git runs later (an alias, a pager, a hook path)".into());
            }
        }
        "bisect" if rest.first().is_some_and(|a| a == "run") => {
            return Some("`git bisect run` runs a command".into());
        }
        "submodule" if rest.iter().any(|a| a == "foreach") => {
            return Some("`git submodule foreach` runs a command in each submodule".into());
        }
        _ => {}
    }
    for (subs, opts) in GIT_RUN_OPTIONS {
        if subs.contains(&sub.as_str())
            && let Some(o) = rest.iter().find(|a| any(a, opts))
        {
            return Some(format!("`git {sub} {o}` runs a program"));
        }
    }
    None
}
