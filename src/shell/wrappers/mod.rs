//! Programs that run another program: `env git push`, `sudo make`, `sh -c 'git push'`.
//!
//! A rule about `git push`, or a judgement of `rm`, must see the program a wrapper runs, so each
//! wrapper's own options are skipped as its manual describes them and what it runs is named:
//! a program and its arguments, a script (for shells, `eval`, `trap`, `watch`, `su -c`), or
//! nothing the words say (`xargs` takes its arguments from its input, `sudo -s` opens a shell).
//!
//! The options of the common wrappers are modelled exactly, as their getopt reads them (short
//! options clustered, a value glued or in the next word, options ending at the first word that
//! is not one). A word the model does not know exactly (an abbreviated long option such as
//! `timeout --sig`, short flags clustered with one that takes a value such as `env -iu X`, an
//! expansion before the program) makes the command opaque, since the wrong word could then be
//! taken for the program; so do wrappers that run text as code (`sh -c`, `eval`, `env -S`,
//! `watch`, `xargs`) or run as another user (`sudo`, `su`). The command they run is still
//! followed, so a rule can match it with certainty.

mod options;
mod table;

use super::grammar::{Script, parse_nested};
use super::opaque::{self, Word};
use options::{Skipped, skip_options};
use table::{SHELLS, WRAPPERS};

/// What a simple command runs once its wrappers are peeled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runs {
    /// The words from this index on: a program and its arguments.
    Program(usize),
    /// The script a shell wrapper runs (`sh -c SCRIPT`, `eval`, `trap`, `watch`, `su -c`),
    /// parsed.
    Script(Box<Script>),
    /// Something the words do not say: `xargs`'s command gets arguments from its input,
    /// `sudo -s` opens a shell, a wrapper's command is missing or could not be followed.
    Unknown,
}

/// A simple command with its wrappers peeled.
#[derive(Debug)]
pub(super) struct Unwrapped {
    /// The wrapper program words, outermost first.
    pub wrappers: Vec<String>,
    /// What runs inside them.
    pub runs: Runs,
    /// Why what runs is not (all) in the words, in the order found.
    pub opaque: Vec<String>,
}

/// The last path component of a program word: `/usr/bin/env` runs `env` just the same.
pub fn base_name(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// Peels the wrappers off `words` (whose grammar flags are `flags`): the wrapper program words
/// (outermost first), what runs inside them, and why that is not sure. `nesting` is how many
/// shells deep `words` already are.
pub(super) fn unwrap(words: &[String], flags: &[Word], nesting: usize) -> Unwrapped {
    let mut out = Unwrapped {
        wrappers: Vec::new(),
        runs: Runs::Unknown,
        opaque: Vec::new(),
    };
    let flags_from = |at: usize| flags.get(at..).unwrap_or(&[]);
    let script = |text: &str| Runs::Script(Box::new(parse_nested(text, nesting + 1)));
    let mut at = 0;
    loop {
        let Some(program) = words.get(at) else {
            out.runs = if out.wrappers.is_empty() { Runs::Program(0) } else { Runs::Unknown };
            return out;
        };
        let word = flags.get(at).copied().unwrap_or(Word {
            literal: true,
            pattern: false,
        });
        if !word.literal || word.pattern {
            let what = if word.literal { "a glob" } else { "an expansion" };
            out.opaque
                .push(format!("the program word `{program}` is {what}: it may name any program"));
            out.runs = Runs::Program(at);
            return out;
        }
        let name = base_name(program);
        let rest = &words[at + 1..];
        if SHELLS.contains(&name) {
            match shell_script(rest) {
                Some(text) => {
                    out.wrappers.push(program.clone());
                    out.opaque.push(format!("`{name} -c` runs its argument as a script"));
                    out.runs = script(text);
                }
                // `bash script.sh`, `sh` reading stdin: a program, running a file.
                None => {
                    out.runs = Runs::Program(at);
                    out.opaque.extend(opaque::of_program(&words[at..], flags_from(at)));
                }
            }
            return out;
        }
        let inner = match name {
            "eval" => Some((Some(rest.join(" ")), "`eval` runs its arguments as a script".to_string())),
            "trap" => trap_action(rest).map(|action| {
                (
                    Some(action.to_string()),
                    "`trap` runs its argument as a script when a signal comes or the shell exits".to_string(),
                )
            }),
            "su" | "runuser" | "sg" => Some((
                command_option(rest, &["--command", "--session-command"]),
                format!("`{name}` runs a command as another user, through that user's shell"),
            )),
            "script" => Some((
                command_option(rest, &["--command"]),
                "`script` runs a command through a shell (`-c`), or opens one".to_string(),
            )),
            _ => None,
        };
        if let Some((text, why)) = inner {
            out.wrappers.push(program.clone());
            out.opaque.push(why);
            out.runs = text.map_or(Runs::Unknown, |t| script(&t));
            return out;
        }
        let Some(w) = WRAPPERS.iter().find(|w| w.name == name) else {
            out.runs = Runs::Program(at);
            out.opaque.extend(opaque::of_program(&words[at..], flags_from(at)));
            return out;
        };
        if let Some(why) = w.opaque {
            out.opaque.push(format!("`{name}` {why}"));
        }
        match skip_options(w, rest, flags_from(at + 1), &mut out.opaque) {
            Skipped::Command(offset) => {
                out.wrappers.push(program.clone());
                if name == "xargs" {
                    // Its command's arguments come from its input.
                    out.runs = Runs::Unknown;
                    let command = &rest[offset..];
                    out.opaque
                        .extend(xargs(&rest[..offset], command, flags_from(at + 1 + offset), nesting));
                    return out;
                }
                if name == "watch" && !rest.iter().any(|w| w == "-x" || w == "--exec") {
                    // watch hands its words to `sh -c`, joined.
                    out.runs = script(&rest[offset..].join(" "));
                    return out;
                }
                at += 1 + offset;
            }
            Skipped::Script(text) => {
                out.wrappers.push(program.clone());
                out.runs = script(&text);
                return out;
            }
            Skipped::Unknown => {
                out.wrappers.push(program.clone());
                out.runs = Runs::Unknown;
                return out;
            }
            Skipped::NotWrapping => {
                out.runs = Runs::Program(at);
                return out;
            }
        }
    }
}

/// Why `xargs OPTIONS COMMAND` runs what its words do not show: its input goes into the
/// command's words (`-I`), or becomes a command because the command is a wrapper or a shell
/// left without its own (`xargs env`, `xargs sh -c`), or the command itself is opaque.
fn xargs(options: &[String], command: &[String], flags: &[Word], nesting: usize) -> Vec<String> {
    let mut replace: Vec<&str> = Vec::new();
    let mut i = 0;
    while let Some(o) = options.get(i) {
        if o == "-I" {
            replace.extend(options.get(i + 1).map(String::as_str));
            i += 1;
        } else if let Some(r) = o.strip_prefix("-I") {
            replace.push(r);
        } else if let Some(r) = o.strip_prefix("--replace") {
            replace.push(r.strip_prefix('=').filter(|r| !r.is_empty()).unwrap_or("{}"));
        } else if let Some(r) = o.strip_prefix("-i") {
            replace.push(if r.is_empty() { "{}" } else { r });
        }
        i += 1;
    }
    if let Some(r) = replace.iter().find(|r| !r.is_empty() && command.iter().any(|w| w.contains(*r))) {
        return vec![format!("`xargs -I {r}` puts its input into the words of its command")];
    }
    let inner = unwrap(command, flags, nesting);
    let program = match inner.runs {
        Runs::Program(at) => command.get(at).map(|w| base_name(w)),
        Runs::Script(_) | Runs::Unknown => None,
    };
    let runs_input = |p: &str| {
        WRAPPERS.iter().any(|w| w.name == p) || SHELLS.contains(&p) || matches!(p, "eval" | "trap" | "su" | "runuser" | "sg" | "script")
    };
    match program {
        Some(p) if runs_input(p) => vec![format!(
            "`xargs` adds its input to the words of `{p}`, which runs them as a command"
        )],
        _ => inner.opaque,
    }
}

/// The action of `trap ACTION SIGNAL…`, when it has one (`trap -p`, `trap - INT` have none).
fn trap_action(rest: &[String]) -> Option<&str> {
    let rest = match rest.first() {
        Some(first) if first == "--" => &rest[1..],
        _ => rest,
    };
    let action = rest.first()?;
    (!matches!(action.as_str(), "-" | "" | "-p" | "-l" | "-P")).then_some(action.as_str())
}

/// The command of `su -c CMD`, `su --command=CMD`, `script -qc CMD`: a short cluster ending in
/// `c`, or one of `long`.
fn command_option(rest: &[String], long: &[&str]) -> Option<String> {
    for (i, w) in rest.iter().enumerate() {
        if let Some((flag, value)) = w.split_once('=')
            && long.contains(&flag)
        {
            return Some(value.to_string());
        }
        let short = w.starts_with('-') && !w.starts_with("--") && w.ends_with('c') && w[1..].chars().all(|c| c.is_ascii_alphabetic());
        if short || long.contains(&w.as_str()) {
            return rest.get(i + 1).cloned();
        }
    }
    None
}

/// A shell variable name.
fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The script of `sh -c SCRIPT`, `bash -lc SCRIPT`, `sh -e -c SCRIPT`.
fn shell_script(args: &[String]) -> Option<&str> {
    let mut i = 0;
    let mut command_flag = false;
    while let Some(a) = args.get(i) {
        if a == "--" || !a.starts_with(['-', '+']) {
            break;
        }
        if a == "-o" || a == "+o" || a == "-O" || a == "+O" || a == "--rcfile" || a == "--init-file" {
            i += 2;
            continue;
        }
        if !a.starts_with("--") && a[1..].contains('c') {
            command_flag = true;
        }
        i += 1;
    }
    if !command_flag {
        return None;
    }
    if args.get(i).is_some_and(|a| a == "--") {
        i += 1;
    }
    args.get(i).map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::super::parse;
    use super::*;

    fn inner(command: &str) -> (Vec<String>, Option<Vec<String>>) {
        let script = parse(command);
        let seg = &script.segments[0];
        let cmd = match &seg.runs {
            Runs::Program(at) => Some(seg.words[*at..].to_vec()),
            Runs::Script(s) => s.segments.first().map(|s| s.words.clone()),
            Runs::Unknown => None,
        };
        (seg.wrappers.clone(), cmd)
    }

    #[track_caller]
    fn sees(command: &str, wrappers: &[&str], program: Option<&[&str]>) {
        let (w, cmd) = inner(command);
        assert_eq!(w, wrappers, "{command}");
        assert_eq!(
            cmd,
            program.map(|p| p.iter().map(|s| s.to_string()).collect::<Vec<_>>()),
            "{command}"
        );
    }

    #[test]
    fn wrappers_are_seen_through() {
        sees("git push", &[], Some(&["git", "push"]));
        sees("env git push", &["env"], Some(&["git", "push"]));
        sees("env -i A=1 -u B git push", &["env"], Some(&["git", "push"]));
        sees("/usr/bin/env git push", &["/usr/bin/env"], Some(&["git", "push"]));
        sees("sudo -u root nice -n 5 git push", &["sudo", "nice"], Some(&["git", "push"]));
        sees("timeout -s KILL 10 git push", &["timeout"], Some(&["git", "push"]));
        sees("nohup git push", &["nohup"], Some(&["git", "push"]));
        sees("command git push", &["command"], Some(&["git", "push"]));
        sees("exec git push", &["exec"], Some(&["git", "push"]));
        sees("sh -c 'git push'", &["sh"], Some(&["git", "push"]));
        sees("bash -lc 'git push origin'", &["bash"], Some(&["git", "push", "origin"]));
        sees("env -S 'git push'", &["env"], Some(&["git", "push"]));
        sees("eval git push", &["eval"], Some(&["git", "push"]));
        sees("watch -n 1 git push", &["watch"], Some(&["git", "push"]));
        sees("su -c 'git push' bob", &["su"], Some(&["git", "push"]));
        sees("xargs git push", &["xargs"], None);
        sees("sudo -s", &["sudo"], None);
        // Nothing wrapped: the wrapper is the program.
        sees("env", &[], Some(&["env"]));
        sees("command -v git", &[], Some(&["command", "-v", "git"]));
        sees("bash script.sh", &[], Some(&["bash", "script.sh"]));
    }

    #[test]
    fn nested_shells_stop_at_a_depth() {
        let c = format!("{}git push", "eval ".repeat(20));
        let script = parse(&c);
        assert!(!script.all_segments().iter().any(|s| s.words == ["git", "push"]));
        assert!(script.all_segments().len() <= 12);
        let c = format!("{}git push", "eval ".repeat(5));
        assert!(parse(&c).all_segments().iter().any(|s| s.words == ["git", "push"]));
    }
}
