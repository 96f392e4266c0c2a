//! The judgement of a shell command: Auto (runs without asking) only when it can neither write,
//! nor run another program, nor read outside the workspace, nor produce output without end;
//! Required otherwise, with the reasons.
//!
//! Auto is an allow-list: a plain command whose every segment is a program of [`READERS`] (or
//! a read-only `git` / `cargo` subcommand), with none of the options that write, execute or
//! read a file they name (in any spelling, see [`super::flags`]), and no argument that names a
//! path outside the workspace (absolute, `~`, `..`, or a glob that could match `..`).
//! Programs that run code named by files the model can write (git's repository config, cargo's
//! workspace config) are on the list only because exec_shell runs Auto commands in the
//! read-only sandbox, where that code can write nothing, reach no network and see nothing
//! outside the workspace; without a sandbox exec_shell has no Auto at all.

mod readers;

use super::flags::{Opt, any, is_option};
use super::grammar::{Script, Segment};
use super::wrappers::Runs;
use crate::tool::ApprovalRequirement;
use readers::{Args, CARGO_FORBIDDEN, CARGO_READERS, GIT_FORBIDDEN, GIT_GLOBAL_OK, GIT_READERS, READERS};

/// What a command needs before it runs, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    /// `Auto` or `Required`.
    pub requirement: ApprovalRequirement,
    /// Why it is not Auto (empty when it is).
    pub reasons: Vec<String>,
}

impl Judgement {
    fn auto() -> Self {
        Self {
            requirement: ApprovalRequirement::Auto,
            reasons: Vec::new(),
        }
    }
}

/// Judges a parsed command.
pub fn judge(script: &Script) -> Judgement {
    let mut reasons = Vec::new();
    if !script.is_plain() {
        reasons.push(format!("not a plain command: {}", script.not_plain.join("; ")));
    } else {
        for segment in script.top_level() {
            if let Err(why) = judge_segment(segment) {
                reasons.push(why);
            }
        }
    }
    if reasons.is_empty() {
        Judgement::auto()
    } else {
        Judgement {
            requirement: ApprovalRequirement::Required,
            reasons,
        }
    }
}

/// Judges one simple command: Ok when it only reads inside the workspace.
fn judge_segment(segment: &Segment) -> Result<(), String> {
    if !segment.wrappers.is_empty() || !matches!(segment.runs, Runs::Program(0)) {
        return Err(format!(
            "`{}` runs another program",
            segment.wrappers.first().map_or("", String::as_str)
        ));
    }
    if let Some(why) = segment.opaque.first() {
        return Err(format!("opaque: {why}"));
    }
    let words = &segment.words;
    let Some(program) = words.first() else {
        return Err("an empty command".into());
    };
    match program.as_str() {
        "git" => return judge_git(&words[1..]),
        "cargo" => return judge_cargo(&words[1..]),
        _ => {}
    }
    let Some(reader) = READERS.iter().find(|r| r.program == program) else {
        return Err(format!("`{program}` is not on the read-only list"));
    };
    check_args(program, &words[1..], reader.forbidden, reader.args)
}

fn check_args(program: &str, args: &[String], forbidden: &[Opt], kind: Args) -> Result<(), String> {
    let mut options_end = false;
    let mut positional = 0usize;
    let pattern_given = kind == Args::PatternThenPaths
        && args.iter().any(|a| {
            a == "-e" || a.starts_with("--regexp") || a == "--files" || (a.starts_with('-') && !a.starts_with("--") && a.ends_with('e'))
        });
    let mut in_expression = false;
    for word in args {
        if !options_end && word == "--" {
            options_end = true;
            continue;
        }
        if !options_end && is_option(word) {
            if any(word, forbidden) {
                return Err(format!(
                    "`{program} {word}` can write a file, run a program or read a file it names"
                ));
            }
            if kind == Args::FindStarts {
                in_expression = true;
            }
            // A path glued to an option: `--exclude-dir=/x` is checked like any path.
            if let Some((_, value)) = word.split_once('=')
                && kind != Args::NotPaths
                && let Some(why) = escapes(value)
            {
                return Err(why);
            }
            continue;
        }
        positional += 1;
        let is_path = match kind {
            Args::Paths => true,
            Args::OnePath => {
                if positional > 1 {
                    return Err(format!("`{program}` writes its second file argument"));
                }
                true
            }
            Args::PatternThenPaths => pattern_given || positional > 1,
            Args::FindStarts => {
                if word == "(" || word == "!" || word == "," {
                    in_expression = true;
                }
                !in_expression
            }
            Args::NotPaths => false,
        };
        if is_path && let Some(why) = escapes(word) {
            return Err(why);
        }
    }
    Ok(())
}

fn judge_git(args: &[String]) -> Result<(), String> {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if !is_option(a) {
            break;
        }
        if a == "-C" {
            let dir = args.get(i + 1).ok_or("`git -C` without a folder")?;
            if let Some(why) = escapes(dir) {
                return Err(why);
            }
            i += 2;
            continue;
        }
        if !GIT_GLOBAL_OK.contains(&a.as_str()) {
            return Err(format!("`git {a}` changes what git runs or where it looks"));
        }
        i += 1;
    }
    let Some(sub) = args.get(i) else {
        return Err("`git` without a subcommand".into());
    };
    if !GIT_READERS.contains(&sub.as_str()) {
        return Err(format!("`git {sub}` is not a read-only git subcommand"));
    }
    // Revisions and pathspecs: none may name a path outside the workspace.
    check_args("git", &args[i + 1..], GIT_FORBIDDEN, Args::Paths)
}

fn judge_cargo(args: &[String]) -> Result<(), String> {
    let Some(sub) = args.iter().find(|a| !is_option(a)) else {
        return Err("`cargo` without a subcommand".into());
    };
    if let Some(toolchain) = args.iter().find(|a| a.starts_with('+')) {
        return Err(format!("`cargo {toolchain}` runs another toolchain"));
    }
    if !CARGO_READERS.contains(&sub.as_str()) {
        return Err(format!("`cargo {sub}` builds or runs code"));
    }
    for (n, a) in args.iter().enumerate() {
        if any(a, CARGO_FORBIDDEN) {
            return Err(format!("`cargo {a}` can run other code"));
        }
        if a == "--manifest-path"
            && let Some(path) = args.get(n + 1)
            && let Some(why) = escapes(path)
        {
            return Err(why);
        }
        if let Some(path) = a.strip_prefix("--manifest-path=")
            && let Some(why) = escapes(path)
        {
            return Err(why);
        }
    }
    Ok(())
}

/// Why `word`, read as a path, may name something outside the workspace: an absolute path, a
/// home folder (`~`), a parent (`..`), or a glob whose component could match `..` (`.*`).
pub fn escapes(word: &str) -> Option<String> {
    if word.starts_with('/') {
        return Some(format!("`{word}` is an absolute path (outside the workspace unless approved)"));
    }
    if word.starts_with('~') {
        return Some(format!("`{word}` names a home folder, outside the workspace"));
    }
    for part in word.split('/') {
        if part == ".." {
            return Some(format!("`{word}` climbs out of the folder (`..`)"));
        }
        if (part.starts_with('.') || part.starts_with('[')) && part.contains(['*', '?', '[']) {
            return Some(format!("`{word}` is a pattern that can match `..`"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;

    fn auto(command: &str) -> bool {
        judge(&parse(command)).requirement == ApprovalRequirement::Auto
    }

    #[test]
    fn reading_commands_are_auto() {
        for c in [
            "ls -la",
            "ls",
            "cat src/main.rs",
            "head -n 20 README.md",
            "tail -c 100 log.txt",
            "git status",
            "git status --porcelain",
            "git diff HEAD~1",
            "git -C . status",
            "git log --oneline -5 main..feature",
            "git show HEAD:src/lib.rs",
            "grep -rn 'a|b' src",
            "rg TODO",
            "find . -name '*.rs'",
            "find src -type f -newer Cargo.toml",
            "wc -l src/*.rs",
            "ls | wc -l",
            "git status && git diff",
            "echo /etc/passwd",
            "sort data.txt",
            "uniq data.txt",
            "cargo metadata --format-version 1",
            "tree -L 2",
            "date +%Y",
        ] {
            let j = judge(&parse(c));
            assert_eq!(j.requirement, ApprovalRequirement::Auto, "{c}: {:?}", j.reasons);
        }
    }

    #[test]
    fn commands_that_write_execute_or_read_outside_are_not() {
        for c in [
            "ls\ntouch PWNED",
            "ls\rtouch PWNED",
            "ls; touch PWNED",
            "ls && touch PWNED",
            "ls | sh",
            "ls & touch PWNED",
            "ls $(touch PWNED)",
            "ls `touch PWNED`",
            "cat <(touch PWNED)",
            "ls > PWNED",
            "cat <<EOF\nx\nEOF",
            "A=1 ls",
            "(ls)",
            "f() { ls; }; f",
            "find . -fprint0 FILE",
            "find . -fprint FILE",
            "find . -fprintf FILE %p",
            "find . -fls FILE",
            "find . -exec touch PWNED {} +",
            "find . -execdir touch PWNED ;",
            "find . -ok touch PWNED ;",
            "find . -delete",
            "find / -name shadow",
            "git log --output=FILE",
            "git log --output FILE",
            "git log --outp=FILE",
            "git diff --output=FILE",
            "git show --output=FILE",
            "git diff --ext-diff",
            "git log -p --textconv",
            "git -c core.fsmonitor=x status",
            "git --git-dir=/outside/.git status",
            "git --work-tree=/ status",
            "git -C /outside status",
            "git -C .. status",
            "git diff --no-index /etc/passwd x",
            "git grep -O x",
            "git push",
            "git config core.fsmonitor x",
            "cat /outside/secret",
            "cat ../secret",
            "cat ~/.ssh/id_rsa",
            "cat .*/secret",
            "grep -r X /outside",
            "grep -r X ..",
            "grep -f /etc/shadow x",
            "head -c 400000000 /dev/zero",
            "cat /proc/1/environ",
            "env",
            "printenv",
            "sort -o FILE data",
            "sort -oFILE data",
            "sort --output=FILE data",
            "sort --compress-program=sh data",
            "tee FILE",
            "less README.md",
            "more README.md",
            "awk 'BEGIN{system(\"touch X\")}'",
            "sed -i s/a/b/ file",
            "sed e file",
            "xargs touch",
            "echo x | xargs touch",
            "uniq in out",
            "tree -o FILE",
            "rg --pre sh x",
            "rg -z x",
            "env ls",
            "nice ls",
            "sh -c ls",
            "./ls",
            "/bin/ls",
            "python3 -c 'print(1)'",
            "cargo build",
            "cargo +nightly tree",
            "cargo metadata --config 'build.rustc-wrapper=\"x\"'",
            "date -s 2020-01-01",
            "wc --files0-from=list",
            "ls {/etc,x}",
        ] {
            assert!(!auto(c), "{c:?} was judged read-only");
        }
    }

    #[test]
    fn a_command_is_as_dangerous_as_its_worst_segment() {
        let j = judge(&parse("ls && rm -rf x && cat /etc/passwd"));
        assert_eq!(j.requirement, ApprovalRequirement::Required);
        assert_eq!(j.reasons.len(), 2, "{:?}", j.reasons);
    }
}
