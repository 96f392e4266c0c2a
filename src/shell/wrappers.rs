//! Programs that run another program: `env git push`, `sudo make`, `sh -c 'git push'`.
//!
//! A rule about `git push`, or a judgement of `rm`, must see the program a wrapper runs, so each
//! wrapper's own options are skipped as its manual describes them and what it runs is named:
//! a program and its arguments, a script (for shells, `eval`, `watch`, `su -c`), or nothing the
//! words say (`xargs` takes its arguments from its input, `sudo -s` opens a shell).

use super::grammar::{Script, parse_nested};

/// What a simple command runs once its wrappers are peeled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runs {
    /// The words from this index on: a program and its arguments.
    Program(usize),
    /// The script a shell wrapper runs (`sh -c SCRIPT`, `eval`, `watch`, `su -c`), parsed.
    Script(Box<Script>),
    /// Something the words do not say: `xargs`'s command gets arguments from its input,
    /// `sudo -s` opens a shell, a wrapper's command is missing or could not be followed.
    Unknown,
}

/// How a wrapper's options are read.
struct Wrapper {
    name: &'static str,
    /// Options that take the next word as their value (or glued: `-uroot`, `--user=root`).
    valued: &'static [&'static str],
    /// Positional words before the command (timeout's duration, taskset's mask, flock's file).
    leading: usize,
    /// `NAME=VALUE` words before the command are assignments (env).
    assignments: bool,
}

const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        name: "env",
        valued: &[
            "-u",
            "--unset",
            "-C",
            "--chdir",
            "-S",
            "--split-string",
            "--block-signal",
            "--default-signal",
            "--ignore-signal",
        ],
        leading: 0,
        assignments: true,
    },
    Wrapper {
        name: "nice",
        valued: &["-n", "--adjustment"],
        leading: 0,
        assignments: false,
    },
    Wrapper {
        name: "nohup",
        valued: &[],
        leading: 0,
        assignments: false,
    },
    Wrapper {
        name: "timeout",
        valued: &["-s", "--signal", "-k", "--kill-after"],
        leading: 1,
        assignments: false,
    },
    Wrapper {
        name: "stdbuf",
        valued: &["-i", "-o", "-e", "--input", "--output", "--error"],
        leading: 0,
        assignments: false,
    },
    Wrapper {
        name: "ionice",
        valued: &["-c", "--class", "-n", "--classdata"],
        leading: 0,
        assignments: false,
    },
    Wrapper {
        name: "time",
        valued: &["-f", "--format", "-o", "--output"],
        leading: 0,
        assignments: false,
    },
    Wrapper {
        name: "command",
        valued: &[],
        leading: 0,
        assignments: false,
    },
    Wrapper {
        name: "builtin",
        valued: &[],
        leading: 0,
        assignments: false,
    },
    Wrapper {
        name: "exec",
        valued: &["-a"],
        leading: 0,
        assignments: false,
    },
    Wrapper {
        name: "sudo",
        valued: &[
            "-u",
            "--user",
            "-g",
            "--group",
            "-h",
            "--host",
            "-p",
            "--prompt",
            "-C",
            "--close-from",
            "-D",
            "--chdir",
            "-r",
            "--role",
            "-t",
            "--type",
            "-T",
            "--command-timeout",
            "-U",
            "--other-user",
        ],
        leading: 0,
        assignments: true,
    },
    Wrapper {
        name: "doas",
        valued: &["-u", "-C"],
        leading: 0,
        assignments: false,
    },
    Wrapper {
        name: "setsid",
        valued: &[],
        leading: 0,
        assignments: false,
    },
    Wrapper {
        name: "taskset",
        valued: &[],
        leading: 1,
        assignments: false,
    },
    Wrapper {
        name: "chrt",
        valued: &[],
        leading: 1,
        assignments: false,
    },
    Wrapper {
        name: "flock",
        valued: &["-w", "--timeout", "-E", "--conflict-exit-code"],
        leading: 1,
        assignments: false,
    },
    Wrapper {
        name: "xargs",
        valued: &[
            "-a",
            "--arg-file",
            "-d",
            "--delimiter",
            "-E",
            "-e",
            "--eof",
            "-I",
            "-i",
            "--replace",
            "-L",
            "-l",
            "--max-lines",
            "-n",
            "--max-args",
            "-P",
            "--max-procs",
            "-s",
            "--max-chars",
            "--process-slot-var",
        ],
        leading: 0,
        assignments: false,
    },
    Wrapper {
        name: "watch",
        valued: &["-n", "--interval", "-d", "--differences", "-q", "--equexit"],
        leading: 0,
        assignments: false,
    },
    Wrapper {
        name: "strace",
        valued: &["-e", "-o", "-p", "-s", "-u", "-E", "-P", "-S", "-X", "-a", "-b", "-I", "-O"],
        leading: 0,
        assignments: false,
    },
    Wrapper {
        name: "ltrace",
        valued: &["-e", "-o", "-p", "-s", "-u", "-a", "-A", "-D", "-F", "-l", "-n"],
        leading: 0,
        assignments: false,
    },
    Wrapper {
        name: "busybox",
        valued: &[],
        leading: 0,
        assignments: false,
    },
    Wrapper {
        name: "unbuffer",
        valued: &[],
        leading: 0,
        assignments: false,
    },
    Wrapper {
        name: "caffeinate",
        valued: &["-t", "-w"],
        leading: 0,
        assignments: false,
    },
];

/// Shells whose `-c` argument is a script in a grammar close enough to bash's to follow.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh"];

/// The last path component of a program word: `/usr/bin/env` runs `env` just the same.
pub fn base_name(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// Peels the wrappers off `words`: the wrapper program words (outermost first) and what runs
/// inside them. `nesting` is how many shells deep `words` already are.
pub fn unwrap(words: &[String], nesting: usize) -> (Vec<String>, Runs) {
    let mut wrappers = Vec::new();
    let mut at = 0;
    loop {
        let Some(program) = words.get(at) else {
            let runs = if wrappers.is_empty() { Runs::Program(0) } else { Runs::Unknown };
            return (wrappers, runs);
        };
        let name = base_name(program);
        if SHELLS.contains(&name) {
            return match shell_script(&words[at + 1..]) {
                Some(script) => {
                    wrappers.push(program.clone());
                    (wrappers, Runs::Script(Box::new(parse_nested(script, nesting + 1))))
                }
                // `bash script.sh`, `sh` reading stdin: a program, running a file.
                None => (wrappers, Runs::Program(at)),
            };
        }
        match name {
            "eval" => {
                wrappers.push(program.clone());
                let script = words[at + 1..].join(" ");
                return (wrappers, Runs::Script(Box::new(parse_nested(&script, nesting + 1))));
            }
            "su" | "runuser" => {
                let rest = &words[at + 1..];
                wrappers.push(program.clone());
                return match rest.iter().position(|w| w == "-c" || w == "--command") {
                    Some(i) => match rest.get(i + 1) {
                        Some(script) => (wrappers, Runs::Script(Box::new(parse_nested(script, nesting + 1)))),
                        None => (wrappers, Runs::Unknown),
                    },
                    None => (wrappers, Runs::Unknown),
                };
            }
            _ => {}
        }
        let Some(w) = WRAPPERS.iter().find(|w| w.name == name) else {
            return (wrappers, Runs::Program(at));
        };
        match skip_options(w, &words[at + 1..]) {
            Skipped::Command(offset) => {
                wrappers.push(program.clone());
                if name == "xargs" {
                    // Its command's arguments come from its input.
                    return (wrappers, Runs::Unknown);
                }
                if name == "watch" && !words[at + 1..].iter().any(|w| w == "-x" || w == "--exec") {
                    // watch hands its words to `sh -c`, joined.
                    let script = words[at + 1 + offset..].join(" ");
                    return (wrappers, Runs::Script(Box::new(parse_nested(&script, nesting + 1))));
                }
                at += 1 + offset;
            }
            Skipped::Script(script) => {
                wrappers.push(program.clone());
                return (wrappers, Runs::Script(Box::new(parse_nested(&script, nesting + 1))));
            }
            Skipped::Unknown => {
                wrappers.push(program.clone());
                return (wrappers, Runs::Unknown);
            }
            Skipped::NotWrapping => return (wrappers, Runs::Program(at)),
        }
    }
}

enum Skipped {
    /// The command starts this many words after the wrapper.
    Command(usize),
    /// The wrapper runs this script (`env -S`, `flock -c`).
    Script(String),
    /// It runs something the words do not say (`sudo -s`, `xargs` without a command).
    Unknown,
    /// It runs nothing: `env` alone prints, `command -v` looks up, `exec` alone redirects.
    NotWrapping,
}

fn skip_options(w: &Wrapper, rest: &[String]) -> Skipped {
    let mut i = 0;
    let mut leading = w.leading;
    while let Some(word) = rest.get(i) {
        if word == "--" {
            i += 1;
            break;
        }
        if w.assignments && !word.starts_with('-') && word.contains('=') && word.split('=').next().is_some_and(is_name) {
            i += 1;
            continue;
        }
        if word.starts_with('-') && word.len() > 1 {
            let (flag, glued) = match word.split_once('=') {
                Some((f, _)) => (f, true),
                None => (word.as_str(), false),
            };
            // What the option changes about what runs.
            match (w.name, flag) {
                ("env", "-S" | "--split-string") | ("flock", "-c" | "--command") => {
                    let script = if glued {
                        word.split_once('=').map(|(_, v)| v.to_string())
                    } else {
                        rest.get(i + 1).cloned()
                    };
                    let mut script = script.unwrap_or_default();
                    let after = if glued { i + 1 } else { i + 2 };
                    for extra in rest.iter().skip(after) {
                        script.push(' ');
                        script.push_str(extra);
                    }
                    return Skipped::Script(script);
                }
                ("sudo", "-s" | "--shell" | "-i" | "--login") => return Skipped::Unknown,
                ("sudo", "-e" | "--edit" | "-l" | "--list" | "-v" | "--validate" | "-k" | "-K") => return Skipped::NotWrapping,
                ("command", "-v" | "-V") => return Skipped::NotWrapping,
                _ => {}
            }
            let takes_value = w.valued.contains(&flag);
            i += if takes_value && !glued && !short_glued(word, w.valued) {
                2
            } else {
                1
            };
            continue;
        }
        if leading > 0 {
            leading -= 1;
            i += 1;
            continue;
        }
        break;
    }
    if i < rest.len() {
        Skipped::Command(i)
    } else if w.name == "xargs" {
        // Runs `echo` with its input.
        Skipped::Unknown
    } else {
        Skipped::NotWrapping
    }
}

/// `-uroot`: a short valued option with its value glued on.
fn short_glued(word: &str, valued: &[&str]) -> bool {
    !word.starts_with("--") && word.len() > 2 && valued.iter().any(|v| v.len() == 2 && word.starts_with(v))
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
