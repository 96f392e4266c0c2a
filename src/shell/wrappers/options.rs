//! A wrapper's options, skipped as its getopt reads them, to find the command it runs.

use super::is_name;
use super::table::Wrapper;
use crate::shell::opaque::{self, Word};

/// Where a wrapper's options end, and what comes after them.
pub(super) enum Skipped {
    /// The command starts this many words after the wrapper.
    Command(usize),
    /// The wrapper runs this script (`env -S`, `flock FILE -c`).
    Script(String),
    /// It runs something the words do not say (`sudo -s`, `xargs` without a command, an
    /// option the model does not know).
    Unknown,
    /// It runs nothing: `env` alone prints, `command -v` looks up, `exec` alone redirects.
    NotWrapping,
}

/// What an option does besides being skipped.
enum Effect {
    /// Nothing: it is skipped.
    None,
    /// Its value (and the words after it) is a script: `env -S`.
    Script,
    /// The wrapper opens a shell: `sudo -s`.
    Unknown,
    /// The wrapper runs no command: `command -v`, `sudo -l`.
    NotWrapping,
}

/// What `-c` (short, `c`) or `--name` (long) does for wrapper `w`.
fn effect(w: &str, option: &str) -> Effect {
    match (w, option) {
        ("env", "S" | "--split-string") => Effect::Script,
        ("sudo", "s" | "i" | "--shell" | "--login") | ("doas", "s") => Effect::Unknown,
        ("sudo", "e" | "l" | "v" | "K" | "V" | "--edit" | "--list" | "--validate" | "--remove-timestamp" | "--help" | "--version")
        | ("doas", "L")
        | ("command", "v" | "V")
        | ("ionice", "p" | "P" | "u" | "--pid" | "--pgid" | "--uid")
        | ("taskset", "p" | "--pid") => Effect::NotWrapping,
        (_, "--help" | "--version") => Effect::NotWrapping,
        _ => Effect::None,
    }
}

/// Skips the options of wrapper `w` in `rest` (whose grammar flags are `flags`); reasons the
/// command is opaque are added to `why`.
pub(super) fn skip_options(w: &Wrapper, rest: &[String], flags: &[Word], why: &mut Vec<String>) -> Skipped {
    let strict = w.opaque.is_none();
    let name = w.name;
    let unknown = |why: &mut Vec<String>, word: &str| {
        why.push(format!(
            "`{name} {word}` is an option the judgement does not know exactly (an abbreviation, or one it does not model): the program it runs is not sure"
        ));
        Skipped::Unknown
    };
    let script_from = |value: String, after: usize, why: &mut Vec<String>| {
        why.push(format!("`{name} -S` splits its argument into a command"));
        let mut text = value;
        for extra in rest.iter().skip(after) {
            text.push(' ');
            text.push_str(extra);
        }
        Skipped::Script(text)
    };
    let mut i = 0;
    let mut leading = w.leading;
    while let Some(word) = rest.get(i) {
        if flags.get(i).is_some_and(|f| !f.literal) && leading == 0 {
            // An option, or the program itself: either way the next wrapper down says so.
            break;
        }
        if word == "--" {
            i += 1;
            break;
        }
        if w.assignments
            && !word.starts_with('-')
            && let Some((var, _)) = word.split_once('=')
            && is_name(var)
        {
            if !opaque::harmless_variable(var) {
                why.push(format!(
                    "`{var}=…` sets a variable a program may read as code or as where to find programs"
                ));
            }
            i += 1;
            continue;
        }
        if name == "env" && word == "-" {
            i += 1;
            continue;
        }
        if let Some(long) = word.strip_prefix("--").filter(|l| !l.is_empty()) {
            let (flag, value) = match long.split_once('=') {
                Some((f, v)) => (format!("--{f}"), Some(v)),
                None => (word.clone(), None),
            };
            let known = (w.long_flags.contains(&flag.as_str()) && value.is_none())
                || w.long_optional.contains(&flag.as_str())
                || w.long_valued.contains(&flag.as_str());
            if strict && !known {
                return unknown(why, word);
            }
            match effect(name, &flag) {
                Effect::Script => {
                    return match value {
                        Some(v) => script_from(v.to_string(), i + 1, why),
                        None => script_from(rest.get(i + 1).cloned().unwrap_or_default(), i + 2, why),
                    };
                }
                Effect::Unknown => return Skipped::Unknown,
                Effect::NotWrapping => return Skipped::NotWrapping,
                Effect::None => {}
            }
            i += if w.long_valued.contains(&flag.as_str()) && value.is_none() {
                2
            } else {
                1
            };
            continue;
        }
        if word.starts_with('-') && word.len() > 1 {
            // `nice -5`: the old spelling of an adjustment.
            if name == "nice" && word[1..].chars().all(|c| c.is_ascii_digit()) {
                i += 1;
                continue;
            }
            let cluster: Vec<char> = word[1..].chars().collect();
            let mut used = 1;
            for (k, c) in cluster.iter().enumerate() {
                let glued: String = cluster[k + 1..].iter().collect();
                let known = w.flags.contains(*c) || w.valued.contains(*c);
                if strict && !known {
                    return unknown(why, word);
                }
                match effect(name, &c.to_string()) {
                    Effect::Script => {
                        if k > 0 {
                            why.push(format!("`{name} {word}` clusters flags with one that takes a value"));
                        }
                        return if glued.is_empty() {
                            script_from(rest.get(i + 1).cloned().unwrap_or_default(), i + 2, why)
                        } else {
                            script_from(glued, i + 1, why)
                        };
                    }
                    Effect::Unknown => return Skipped::Unknown,
                    Effect::NotWrapping => return Skipped::NotWrapping,
                    Effect::None => {}
                }
                if w.valued.contains(*c) {
                    if k > 0 && strict {
                        why.push(format!(
                            "`{name} {word}` clusters flags with one that takes a value: the program it runs is not sure"
                        ));
                        return Skipped::Unknown;
                    }
                    if glued.is_empty() {
                        used = 2;
                    }
                    break;
                }
            }
            i += used;
            continue;
        }
        if leading > 0 {
            leading -= 1;
            i += 1;
            continue;
        }
        break;
    }
    // Word splitting may turn an expansion among the options into options, or into the program.
    if flags.iter().take(i).any(|f| !f.literal) {
        why.push(format!(
            "an expansion among `{name}`'s arguments may change which word is the program"
        ));
    }
    if name == "flock"
        && let Some(option) = rest.get(i)
        && (option == "-c" || option == "--command")
    {
        why.push("`flock FILE -c` runs its argument as a script".to_string());
        return Skipped::Script(rest.get(i + 1).cloned().unwrap_or_default());
    }
    if i < rest.len() {
        Skipped::Command(i)
    } else if name == "xargs" {
        // Runs `echo` with its input.
        Skipped::Unknown
    } else {
        Skipped::NotWrapping
    }
}
