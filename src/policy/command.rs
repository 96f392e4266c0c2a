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
//!
//! A command that is opaque ([`Script::opacity`]: it runs text as code, as a shell reading its
//! input, an interpreter, `find -exec`, an alias or `make` do; a wrapper has an option the
//! judgement does not model exactly; its program word is a glob or an expansion) may run
//! anything, so against every deny or ask rule with command words it is at least a doubt:
//! the call is asked, in every mode, and [`doubt`] says why.

use std::path::Path;

use super::pattern;
use super::rule::Match;
use crate::shell::{Runs, Script, Segment, base_name};

/// How far a deny or ask rule's words match `script`.
pub(super) fn restricts(rule: &[String], script: &Script) -> Match {
    let mut best = if script.is_opaque() { Match::Maybe } else { Match::No };
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
        // A glob as the program word runs what it expands to: `/bin/r?` is `/bin/rm` where
        // that exists (an absolute glob: a relative one expands from a folder unknown here,
        // and stays a doubt, as the segment is opaque).
        if seg.patterns.contains(&start) && words[start].starts_with('/') {
            for found in pattern::expand(Path::new("/"), &words[start]) {
                let mut spelled = words[start..].to_vec();
                spelled[0] = found.to_string_lossy().into_owned();
                best = best.max(words_match(rule, &spelled, seg.literal));
            }
        }
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
    if best == Match::No && (!seg.opaque.is_empty() || mentions(rule, &words[1..])) {
        best = Match::Maybe;
    }
    best
}

/// Why a rule only may match `script` (for the person asked): the reasons it is opaque, else
/// the globs among its words, else the general doubt.
pub(super) fn doubt(script: Option<&Script>) -> String {
    let Some(script) = script else {
        return GENERAL_DOUBT.into();
    };
    let opacity = script.opacity();
    if !opacity.is_empty() {
        return opacity.iter().map(|r| format!("opaque: {r}")).collect::<Vec<_>>().join("; ");
    }
    let globs: Vec<String> = script
        .all_segments()
        .iter()
        .flat_map(|s| s.patterns.iter().filter_map(|&i| s.words.get(i)))
        .map(|w| format!("`{w}` is a glob: it may expand to a path the rule names"))
        .collect();
    if globs.is_empty() { GENERAL_DOUBT.into() } else { globs.join("; ") }
}

/// The doubt when nothing more precise can be said.
const GENERAL_DOUBT: &str = "the command's words are not sure to be what runs";

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
    fn programs_that_run_text_as_code_are_a_doubt_for_every_rule() {
        for c in [
            "echo rm victim | sh",
            "sh <<EOF\nrm victim\nEOF",
            "bash < script.sh",
            "alias r=rm\nr victim",
            "python3 -c \"import os; os.remove('victim')\"",
            "perl -e 'unlink q(victim)'",
            "awk 'BEGIN{system(\"r\" \"m victim\")}'",
            "sed -n '1e r''m victim' x",
            "find . -exec r\"m\" {} +",
            "echo victim | xargs -I{} sh -c 'r''m {}'",
            "echo 'rm victim' | xargs env",
            "make clean",
            "source ./cleanup.sh",
            "f() { \"$@\"; }; f rm victim",
            "BASH_ENV=x.sh bash -c ls",
            "x='a[$(rm victim)]'; echo $(( x ))",
        ] {
            for r in [&["rm"][..], &["git", "push"]] {
                check(r, c, Match::Maybe);
            }
        }
        // What the words show is still matched with certainty.
        for c in [
            "trap 'rm victim' EXIT",
            "sh -c 'rm victim'",
            "script -qc 'rm victim' /dev/null",
            "su -c 'rm victim' me",
            "xargs rm",
            "sudo -u root rm victim",
            "watch rm victim",
            "env -S'rm victim'",
        ] {
            check(&["rm"], c, Match::Yes);
        }
        check(&["git", "push"], "git -c alias.p=push p", Match::Maybe);
        check(&["git", "push"], "git -c alias.p='!git push' p", Match::Maybe);
        check(&["git", "push"], "git --config-env=alias.p=P p", Match::Maybe);
        check(&["git", "push"], "git p", Match::Maybe);
        check(&["git", "push"], "git config alias.p push && git p", Match::Maybe);
        // Programs whose words say what runs stay a certain "no".
        for c in [
            "ls -la",
            "sed 's/a/b/' x",
            "awk '{print $1}' x",
            "find . -name x",
            "xargs ls",
            "env LANG=C ls",
        ] {
            check(&["rm"], c, Match::No);
        }
    }

    #[test]
    fn wrapper_options_not_modelled_exactly_are_a_doubt() {
        for c in [
            "env -iS'rm victim'",
            "env --split-string='rm victim'",
            "nice --adj 5 rm victim",
            "timeout --sig KILL 5 rm victim",
            "timeout --kill-a=1 5 rm victim",
            "stdbuf --out L rm victim",
            "flock --conf 1 lock rm victim",
            "ionice --classd 3 rm victim",
            "env --chd=/ rm victim",
            "env -iu HOME rm victim",
            "env --sp='rm victim'",
            "env --spl 'rm victim'",
        ] {
            for r in [&["rm"][..], &["git", "push"]] {
                let m = restricts(&rule(r), &parse(c));
                assert!(m >= Match::Maybe, "{r:?} against {c:?}: {m:?}");
            }
        }
    }

    #[test]
    fn a_glob_as_the_program_word_is_a_doubt_or_what_it_expands_to() {
        for c in ["/nowhere/r? victim", "r[m] victim", "./r* victim", "env /nowhere/[r]m x"] {
            check(&["rm"], c, Match::Maybe);
            check(&["git", "push"], c, Match::Maybe);
        }
        check(&["rm"], "'/bin/r?' victim", Match::No);
        // Where the glob expands to the denied program now, it is that program.
        let rm = ["/bin", "/usr/bin"].iter().find(|d| Path::new(d).join("rm").exists());
        if let Some(dir) = rm {
            for c in ["{dir}/r? victim", "{dir}/[r]m victim", "{dir}/?m victim", "nice {dir}/r[m] victim"] {
                check(&["rm"], &c.replace("{dir}", dir), Match::Yes);
            }
            check(&["git", "push"], &format!("{dir}/r? victim"), Match::Maybe);
        }
        if Path::new("/usr/bin/git").exists() {
            check(&["git", "push"], "/usr/*/gi? push", Match::Yes);
        }
    }

    #[test]
    fn the_doubt_says_why() {
        let why = |c: &str| doubt(Some(&parse(c)));
        assert_eq!(why("echo rm victim | sh"), "opaque: `sh` reads commands from its input");
        assert_eq!(why("env -S'rm victim'"), "opaque: `env -S` splits its argument into a command");
        assert_eq!(
            why("/bin/r? victim"),
            "opaque: the program word `/bin/r?` is a glob: it may name any program"
        );
        assert_eq!(
            why("cat secret?/k"),
            "`secret?/k` is a glob: it may expand to a path the rule names"
        );
        assert_eq!(
            why("git $(echo push)"),
            "opaque: an expansion among `git`'s arguments may be an option that runs a command"
        );
        assert_eq!(why("ls 'x"), "opaque: it does not parse as a shell command");
        assert_eq!(why("rm $(echo victim)"), GENERAL_DOUBT);
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
