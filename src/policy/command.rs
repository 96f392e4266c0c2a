//! A rule's `command` words against a shell command, as the shell would run it.
//!
//! A deny or ask rule must not be evaded by the way the command is written, so it is matched
//! leniently ([`restricts`]): against every simple command of the script, nested and wrapped
//! ones included (`(git push)`, `x && git push`, `env git push`, `sh -c 'git push'`), by the
//! program's last path component (`/usr/bin/git`), skipping options and their values between
//! the rule's words (`git -C . push`), and with a doubt ([`Match::Maybe`]) wherever the words
//! are not what runs (an expansion, a parse error, `xargs`, the words as another program's
//! arguments). An allow rule is matched strictly ([`permits`]): the literal words as written,
//! nothing more unless its last word is `*`.

use super::rule::Match;
use crate::shell::{Runs, Script, Segment, base_name};

/// How far a deny or ask rule's words match `script`.
pub(super) fn restricts(rule: &[String], script: &Script) -> Match {
    let mut best = if script.is_ambiguous() { Match::Maybe } else { Match::No };
    for seg in script.all_segments() {
        best = best.max(segment(rule, seg));
        if best == Match::Yes {
            break;
        }
    }
    best
}

/// Whether an allow rule's words cover the simple command `seg` exactly: its literal words
/// are the rule's (`*` is any one word, or any rest as the last word).
pub(super) fn permits(rule: &[String], seg: &Segment) -> bool {
    if !seg.literal {
        return false;
    }
    let words = &seg.words;
    for (i, r) in rule.iter().enumerate() {
        if r == "*" && i + 1 == rule.len() {
            return words.len() >= i;
        }
        match words.get(i) {
            Some(w) if r == "*" || r == w => {}
            _ => return false,
        }
    }
    words.len() == rule.len()
}

/// Whether every script a plain `script` runs is plain too (`sh -c 'a > b'` is not).
pub(super) fn fully_plain(script: &Script) -> bool {
    script.is_plain()
        && script.segments.iter().all(|s| match &s.runs {
            Runs::Script(inner) => fully_plain(inner),
            _ => true,
        })
}

pub(super) fn segment(rule: &[String], seg: &Segment) -> Match {
    let words = &seg.words;
    let Some(first) = words.first() else {
        return Match::No;
    };
    // A program word the shell expands (`$X push`, `$(echo git) push`) may be any program.
    if !seg.literal && is_expanded(first) {
        return Match::Maybe;
    }
    let mut best = Match::No;
    for start in program_starts(seg) {
        best = best.max(words_match(rule, &words[start..], seg.literal));
    }
    if best == Match::Yes {
        return best;
    }
    if seg.runs == Runs::Unknown {
        // `xargs git push`, `sudo -s`: what runs is partly not in the words. Any word may be
        // the program; where the rule's program is there, its rest may come from the input.
        for start in 1..words.len() {
            if program_eq(&rule[0], &words[start]) {
                match words_match(rule, &words[start..], seg.literal) {
                    Match::Yes => return Match::Yes,
                    _ => best = Match::Maybe,
                }
            }
        }
        if words.len() == seg.wrappers.len() || words.iter().all(|w| w.starts_with('-') || seg.wrappers.contains(w)) {
            best = Match::Maybe;
        }
    }
    if best == Match::No && mentions(rule, &words[1..]) {
        best = Match::Maybe;
    }
    best
}

/// Where a program starts in the words: the first word, each wrapper's word, and the program
/// the wrappers run.
fn program_starts(seg: &Segment) -> Vec<usize> {
    let mut starts = vec![0];
    let mut from = 1;
    for w in seg.wrappers.iter().skip(1) {
        if let Some(at) = seg.words.iter().skip(from).position(|x| x == w) {
            starts.push(from + at);
            from += at + 1;
        }
    }
    if let Runs::Program(at) = seg.runs
        && !starts.contains(&at)
        && at < seg.words.len()
    {
        starts.push(at);
    }
    starts
}

/// The rule's words at the start of `words` (a program and its arguments), leniently.
fn words_match(rule: &[String], words: &[String], literal: bool) -> Match {
    let (Some(program), Some(first)) = (rule.first(), words.first()) else {
        return Match::No;
    };
    if !program_eq(program, first) {
        return Match::No;
    }
    let mut unsure = false;
    let mut at = 1;
    for (i, r) in rule.iter().enumerate().skip(1) {
        if r == "*" && i + 1 == rule.len() {
            return Match::Yes;
        }
        // Find the word, skipping only options and the value an option may take.
        let mut k = at;
        let mut after_option = false;
        loop {
            let Some(w) = words.get(k) else {
                return if unsure { Match::Maybe } else { Match::No };
            };
            if r == "*" || r == w {
                at = k + 1;
                break;
            }
            if !literal && is_expanded(w) {
                // It may expand to the word, or to nothing.
                unsure = true;
                k += 1;
                continue;
            }
            if w == "--" {
                return if unsure { Match::Maybe } else { Match::No };
            }
            if w.starts_with('-') && w.len() > 1 {
                after_option = !w.contains('=');
                k += 1;
                continue;
            }
            if after_option {
                after_option = false;
                k += 1;
                continue;
            }
            return if unsure { Match::Maybe } else { Match::No };
        }
    }
    if unsure { Match::Maybe } else { Match::Yes }
}

/// A rule's program against a program word: the same word, or its last path component
/// (`/usr/bin/git`, `./git`) when the rule names none.
fn program_eq(rule: &str, word: &str) -> bool {
    rule == "*" || rule == word || (!rule.contains('/') && base_name(word) == rule)
}

/// Whether a word of a command that is not literal is one the shell expands.
pub(super) fn is_expanded(word: &str) -> bool {
    word.contains(['$', '`', '*', '?', '[', '{', '~', '\'', '"', '\\'])
}

/// Whether the rule's words (two or more) appear among `args`, one after another or inside one
/// argument (`find . -exec git push ;`, `python3 -c "os.system('git push')"`).
fn mentions(rule: &[String], args: &[String]) -> bool {
    let words: Vec<&str> = rule.iter().map(String::as_str).filter(|w| *w != "*").collect();
    if words.len() < 2 {
        return false;
    }
    let phrase = words.join(" ");
    args.windows(words.len())
        .any(|w| program_eq(words[0], &w[0]) && w[1..].iter().zip(&words[1..]).all(|(a, b)| a == b))
        || args
            .iter()
            .any(|a| a.split_whitespace().collect::<Vec<_>>().join(" ").contains(&phrase))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::parse;

    fn rule(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[track_caller]
    fn check(r: &[&str], command: &str, want: Match) {
        assert_eq!(restricts(&rule(r), &parse(command)), want, "{r:?} against {command:?}");
    }

    #[test]
    fn every_spelling_of_git_push_is_caught() {
        for c in [
            "git push",
            "git push origin main",
            "(git push)",
            "x && git push",
            "git  push",
            "env git push",
            "sh -c 'git push'",
            "bash -lc \"cd x && git push\"",
            "g''it push",
            "\"git\" push",
            "command git push",
            "exec git push",
            "xargs git push",
            "git -C . push",
            "git --git-dir=.git -c a=b push",
            "/usr/bin/git push",
            "./git push",
            "GIT_DIR=x git push",
            "ls\ngit push",
            "ls; git push",
            "ls | git push",
            "git push &",
            "echo $(git push)",
            "sudo -u root nice git push -f",
            "eval git push",
            "timeout 5 git push",
            "watch git push",
        ] {
            check(&["git", "push"], c, Match::Yes);
        }
    }

    #[test]
    fn doubt_is_maybe() {
        for c in [
            "git $(echo push)",
            "$G push",
            "git pu'sh",
            "echo push | xargs git",
            "sudo -s",
            "find . -exec git push ;",
            "python3 -c \"import os; os.system('git push')\"",
        ] {
            check(&["git", "push"], c, Match::Maybe);
        }
        // Bytes shells read differently: never a certain "no".
        for c in ["gi\\\nt push", "git {push,pull}", "git\rpush", "ls 'x"] {
            assert!(restricts(&rule(&["git", "push"]), &parse(c)) >= Match::Maybe, "{c:?}");
        }
    }

    #[test]
    fn other_commands_do_not_match() {
        for c in [
            "git status",
            "git log --grep push",
            "git commit -m push",
            "git\\ push",
            "gitx push",
            "echo git",
            "git -- push",
            "xargs rm",
            "ls $(echo x)",
        ] {
            check(&["git", "push"], c, Match::No);
        }
        check(&["git", "push", "*"], "git push", Match::Yes);
        check(&["git", "push", "*"], "git push origin", Match::Yes);
        check(&["rm"], "echo rm", Match::No);
        check(&["*"], "anything at all", Match::Yes);
    }

    #[test]
    fn allow_is_exact_unless_it_ends_in_a_star() {
        let seg = |c: &str| parse(c).segments.remove(0);
        assert!(permits(&rule(&["git", "status"]), &seg("git status")));
        assert!(!permits(&rule(&["git", "status"]), &seg("git status --porcelain")));
        assert!(permits(&rule(&["git", "status", "*"]), &seg("git status --porcelain")));
        assert!(permits(&rule(&["git", "status", "*"]), &seg("git status")));
        assert!(!permits(&rule(&["git", "status"]), &seg("/usr/bin/git status")));
        assert!(!permits(&rule(&["git", "*", "x"]), &seg("git a b")));
        assert!(permits(&rule(&["git", "*", "x"]), &seg("git a x")));
        assert!(!permits(&rule(&["cat", "*"]), &seg("cat $HOME")));
    }
}
