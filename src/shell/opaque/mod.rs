//! Commands whose words do not say what runs: they are *opaque*.
//!
//! A rule about `rm` sees the words of every simple command, but some programs run text as
//! code, and that text is not among the words a rule can match: a shell reading its input
//! (`echo rm victim | sh`), an interpreter given code (`python3 -c …`, `awk 'BEGIN{system(…)}'`),
//! a program that runs a command for each thing it finds (`find -exec`, `xargs`), one that runs
//! the commands of a file (`make`, `source`, `npm test`), an alias, a git alias or `git -c`
//! configuration. A program word that is a glob (`/bin/r?`) or an expansion (`$X`) may name
//! any program. Each such command carries, in [`Segment::opaque`](super::Segment::opaque), the
//! reasons it is opaque, written for the person asked about it.
//!
//! An opaque command is never judged Auto and never matched as a certain "no" by a deny or ask
//! rule: the rule answers `Maybe`, and the call is asked, in every mode.
//!
//! The tables (`tables.rs`, and `git.rs` for git) are the judgement's knowledge of which
//! programs run text as code; a program missing from them is read as running what its words
//! say. Where a program runs code only with some options (`find -exec`, `sed 's/x/y/e'`,
//! `git -c`), every spelling of those options counts, and an expansion among its arguments
//! (which may be such an option) makes it opaque too. `awk` and `sed` programs are read in
//! `awk.rs` and `sed.rs`, since their own language decides.

mod awk;
mod git;
mod sed;
mod tables;

use super::flags::{Opt, any, matches};
use super::wrappers::base_name;
use awk::awk;
use git::git;
use sed::sed;
use tables::{FOREIGN_SHELLS, HARMLESS_VARIABLES, INTERPRETERS, NAME_TAKERS, PACKAGE_RUNNERS, RUN_OTHERS, RUNNERS};

use Opt::{Long, Short, Word as W};

/// What the grammar knows of one word of a simple command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Word {
    /// It is literal: the text is what the program receives (a glob aside).
    pub literal: bool,
    /// It holds an unquoted glob: the shell replaces it with the paths it matches.
    pub pattern: bool,
}

/// Whether `text` (a word's unquoted parts) holds a glob: an unescaped `*` or `?`, or an
/// unescaped `[` with a `]` after it. The one reading of it: policy rules match a glob
/// argument as a pattern by the same test.
pub fn has_glob(text: &str) -> bool {
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '*' | '?' => return true,
            '[' if chars.as_str().contains(']') => return true,
            _ => {}
        }
    }
    false
}

/// Whether a variable may be set without changing which program runs or what code it runs.
pub(super) fn harmless_variable(name: &str) -> bool {
    HARMLESS_VARIABLES.contains(&name)
        || name.starts_with("LC_")
        || (!name.chars().any(|c| c.is_ascii_uppercase())
            && !name.starts_with("npm_config")
            && !matches!(name, "auto_resume" | "histchars"))
}

/// Whether arithmetic text names a variable (whose value bash evaluates as an expression).
pub(super) fn names_a_variable(text: &str) -> bool {
    text.chars().any(|c| c.is_ascii_alphabetic() || c == '_' || c == '$' || c == '`')
}

/// Whether a `[ … ]` or `[[ … ]]` test evaluates a variable as arithmetic or a subscript.
pub(super) fn test_evaluates(text: &str) -> bool {
    let ops = ["-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-v", "-R"];
    text.split_whitespace().any(|w| ops.contains(&w))
}

/// A program name without a version suffix: `python3.12` → `python`, `lua5.4` → `lua`.
fn family(name: &str) -> &str {
    // `vim.basic`, `python3.12`: the name before its first dot, less a version.
    let stem = name.split('.').next().filter(|s| !s.is_empty()).unwrap_or(name);
    let trimmed = stem.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-');
    if trimmed.is_empty() { stem } else { trimmed }
}

/// Why the program `words[0]` (with its arguments), once every wrapper is peeled, runs what
/// its words do not show; `None` when they say what runs.
pub(super) fn of_program(words: &[String], flags: &[Word]) -> Option<String> {
    let program = words.first()?;
    let args = &words[1..];
    let arg_flags = flags.get(1..).unwrap_or(&[]);
    let name = base_name(program);
    let fam = family(name);
    if FOREIGN_SHELLS.contains(&name) || FOREIGN_SHELLS.contains(&fam) {
        return Some(format!("`{name}` runs commands in a shell language the judgement does not read"));
    }
    if INTERPRETERS.contains(&name) || INTERPRETERS.contains(&fam) {
        let asks_version = !args.is_empty() && args.iter().all(|a| matches!(a.as_str(), "--version" | "-V" | "--help" | "-h"));
        return (!asks_version).then(|| interpreter(name, args));
    }
    if RUNNERS.contains(&name) || RUNNERS.contains(&fam) {
        return Some(format!("`{name}` runs the commands its file (or its arguments) names"));
    }
    // The dynamic loader (`ld.so`, `/lib64/ld-linux-x86-64.so.2`) runs the program it is given.
    if name == "ld.so" || (name.starts_with("ld-") && name.contains(".so")) {
        return Some(format!("`{name}` runs the program it is given"));
    }
    if RUN_OTHERS.contains(&name) || RUN_OTHERS.contains(&fam) {
        return Some(format!(
            "`{name}` runs a command it is handed in a way the judgement does not follow"
        ));
    }
    if let Some((_, reads)) = PACKAGE_RUNNERS.iter().find(|(p, _)| *p == name || *p == fam) {
        // `npm` alone prints its help; `yarn` alone installs, `deno` alone reads code.
        let only_reads = match args.iter().find(|a| !a.starts_with('-')) {
            Some(sub) => reads.contains(&sub.as_str()),
            None => !matches!(name, "yarn" | "deno" | "npx" | "pnpx" | "bunx"),
        };
        return (!only_reads).then(|| format!("`{name}` runs the scripts a package file names (or those of the packages it installs)"));
    }
    let expanded = arg_flags.iter().any(|f| !f.literal);
    let conditional = match name {
        "sh" | "bash" | "dash" | "ksh" | "mksh" | "ash" | "yash" | "posh" | "zsh" | "rbash" | "lksh" | "pdksh" => {
            return Some(shell(name, args));
        }
        "source" | "." => {
            let file = args.first().map_or("its input", String::as_str);
            return Some(format!("`{name}` runs the commands of the file `{file}`"));
        }
        "alias" => {
            return args
                .iter()
                .any(|a| a.contains('='))
                .then(|| "`alias` defines a command name that runs other words".to_string());
        }
        "fc" => return Some("`fc` runs commands again from the shell's history".into()),
        "let" => return Some("`let` evaluates variables' values as expressions, which can run a command".into()),
        "bind" | "complete" | "compgen" | "mapfile" | "readarray" | "enable" | "hash" => {
            return args
                .iter()
                .any(|a| a.starts_with('-') && a[1..].contains(['x', 'C', 'F', 'f', 'p']))
                .then(|| format!("`{name}` names a command or a library it will run"));
        }
        "awk" | "gawk" | "mawk" | "nawk" | "original-awk" | "goawk" | "busybox-awk" => awk(name, args),
        "sed" | "gsed" => sed(name, args),
        "find" | "gfind" => any_word(
            args,
            &[W("-exec"), W("-execdir"), W("-ok"), W("-okdir")],
            "`find -exec` runs a command for each file it finds",
        ),
        "fd" | "fdfind" => any_word(
            args,
            &[Short('x'), Short('X'), Long("--exec"), Long("--exec-batch")],
            "`fd --exec` runs a command for each file it finds",
        ),
        "git" => git(args),
        "tar" | "gtar" | "bsdtar" => tar(args),
        "rsync" => any_word(
            args,
            &[Short('e'), Long("--rsh"), Long("--rsync-path")],
            "`rsync -e` names the program that runs its transfer",
        ),
        "sort" => any_word(args, &[Long("--compress-program")], "`sort --compress-program` runs a program"),
        "rg" => any_word(
            args,
            &[Long("--pre"), Long("--hostname-bin")],
            "`rg --pre` runs a program for each file",
        ),
        "zip" => (args.iter().any(|a| a.starts_with("-TT") || matches(a, Long("--unzip-command"))))
            .then(|| "`zip -TT` runs a program".to_string()),
        "man" => any_word(
            args,
            &[Short('P'), Long("--pager"), Short('H'), Long("--html")],
            "`man -P` runs the program it names",
        ),
        n if NAME_TAKERS.contains(&n) => args
            .iter()
            .any(|a| a.contains('[') && a.contains(['$', '`']))
            .then(|| format!("`{name}` evaluates the subscript in a variable name, which can run a command")),
        _ => return None,
    };
    // An expansion may be the very option (or git subcommand) that runs a command.
    if expanded {
        return Some(format!(
            "an expansion among `{name}`'s arguments may be an option that runs a command"
        ));
    }
    conditional
}

/// `sh` without `-c`: it reads commands from a file or its input.
fn shell(name: &str, args: &[String]) -> String {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if a == "--" {
            i += 1;
            break;
        }
        if !a.starts_with(['-', '+']) {
            break;
        }
        i += if matches!(a.as_str(), "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
            2
        } else {
            1
        };
    }
    match args.get(i) {
        Some(file) if !args[..i].iter().any(|a| !a.starts_with("--") && a[1..].contains('s')) => {
            format!("`{name}` runs the commands of the file `{file}`")
        }
        _ => format!("`{name}` reads commands from its input"),
    }
}

/// An interpreter: code inline, from a file, or from its input.
fn interpreter(name: &str, args: &[String]) -> String {
    let inline: &[Opt] = match family(name) {
        "python" | "pypy" | "ipython" => &[Short('c')],
        "perl" => &[Short('e'), Short('E')],
        "ruby" | "jruby" | "lua" | "luajit" => &[Short('e')],
        "node" | "nodejs" | "bun" => &[Short('e'), Short('p'), Long("--eval"), Long("--print")],
        "php" => &[Short('r')],
        "gdb" | "lldb" => &[W("-ex"), Long("--eval-command"), Short('o')],
        "vim" | "vi" | "nvim" | "view" | "ex" => &[Short('c'), W("--cmd")],
        "emacs" | "emacsclient" => &[Long("--eval")],
        _ => &[],
    };
    let inline = args.iter().take_while(|a| a.starts_with(['-', '+'])).find(|a| any(a, inline));
    if let Some(flag) = inline {
        return format!("`{name} {flag}` runs its argument as code");
    }
    match args.iter().find(|a| !a.starts_with('-')) {
        Some(file) => format!("`{name}` runs the code of `{file}`"),
        None => format!("`{name}` runs the code on its input"),
    }
}

/// The reason when any argument is one of `opts`.
fn any_word(args: &[String], opts: &[Opt], why: &str) -> Option<String> {
    args.iter().any(|a| any(a, opts)).then(|| why.to_string())
}

/// `tar`: options that run a program, in every spelling (old-style `tar cIf …` included).
fn tar(args: &[String]) -> Option<String> {
    let long = [
        Long("--to-command"),
        Long("--use-compress-program"),
        Long("--checkpoint-action"),
        Long("--info-script"),
        Long("--new-volume-script"),
        Long("--rsh-command"),
        Long("--rmt-command"),
    ];
    let old_style = args.first().is_some_and(|a| !a.starts_with('-') && a.contains(['I', 'F']));
    let short = args
        .iter()
        .any(|a| a.starts_with('-') && !a.starts_with("--") && a[1..].contains(['I', 'F']));
    (old_style || short || args.iter().any(|a| any(a, &long)))
        .then(|| "`tar` runs a program it is given (`-I`, `--to-command`, …)".to_string())
}

#[cfg(test)]
#[path = "opaque_tests.rs"]
mod tests;
