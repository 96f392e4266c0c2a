//! A command line read as a shell reads it: tree-sitter-bash's syntax tree, reduced to the simple
//! commands it holds and the reasons it is not plain.
//!
//! A hand-written tokenizer disagrees with `sh` exactly where an attacker needs it to (a newline
//! read as a word gap, a quote it closes differently), so the tree comes from a maintained
//! grammar. Where bash and the `sh` that runs the command could still read the same bytes
//! differently (a carriage return, a line continuation, brace expansion), the command is simply
//! not plain: it is judged as code and keyed exactly.

mod opacity;
mod walk;

use std::cell::RefCell;

use tree_sitter::Parser;

use super::wrappers::Runs;
use walk::Walk;

/// How deep `sh -c '…'` inside `sh -c '…'` is followed before the rest is treated as unknown.
const MAX_NESTING: usize = 8;

/// A parsed command line: every simple command it holds, and why it is not plain (if it is not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// Every simple command, in source order: the top level ones (depth 0) and those nested in
    /// subshells, groups, substitutions, functions or compound commands (depth > 0).
    pub segments: Vec<Segment>,
    /// Why the script is not plain, in source order; empty when it is.
    pub not_plain: Vec<String>,
    /// The files its redirections name (`> out`, `< in`, `2>> log`), as the shell opens them,
    /// or as written when they are not literal; nested ones included, a wrapped shell's not.
    pub redirects: Vec<String>,
    /// Why the script may run what no simple command's words show, beyond its segments' own
    /// reasons ([`Segment::opaque`]): an alias or a function a later word may name, a variable
    /// a program reads as code, arithmetic that evaluates a variable's value. Empty when none.
    pub opaque: Vec<String>,
}

/// Reasons after which the words may not be what the shell runs: bash's grammar and the `sh`
/// that runs the command could read the bytes differently, or the parse gave up. A rule cannot
/// be sure of a match in such a script ([`Script::is_ambiguous`]).
const AMBIGUOUS: &[&str] = &[PARSE_ERROR, NO_GRAMMAR, TOO_DEEP, CONTROL, CONTINUATION, BRACES];
const PARSE_ERROR: &str = "it does not parse as a shell command";
const NO_GRAMMAR: &str = "the shell grammar is unavailable";
const TOO_DEEP: &str = "shells nested too deep to follow";
const CONTROL: &str =
    "a control character or unusual space (a carriage return, an escape, a no-break space, …) that shells read differently";
const CONTINUATION: &str = "a line continuation";
const BRACES: &str = "brace expansion";

/// One simple command: a program and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// The words as the program receives them (quotes and escapes removed); a word that is
    /// not literal (an expansion, a substitution) is kept as written.
    pub words: Vec<String>,
    /// Every word is literal: the words are exactly what the program receives (globs and a
    /// leading `~` aside, which the judge treats as paths to check).
    pub literal: bool,
    /// 0 for a command of the top-level list; more when it is nested in another construct.
    pub depth: usize,
    /// Programs that run another program, peeled off the front (`env`, `nice`, `sudo`,
    /// `timeout`, `xargs`, `sh -c`, …), outermost first, each as its program word.
    pub wrappers: Vec<String>,
    /// What runs once the wrappers are peeled.
    pub runs: Runs,
    /// The indexes of the words holding an unquoted glob (`*`, `?`, `[…]`): patterns the shell
    /// replaces with the paths they match, not the text written.
    pub patterns: Vec<usize>,
    /// Why what this command runs is not (all) in its words: it runs text as code (a shell
    /// reading its input, an interpreter, `find -exec`, a git alias, `make`, …), a wrapper has
    /// an option the judgement does not model exactly, or its program word is a glob or an
    /// expansion. Empty when the words say what runs. See `opaque.rs`.
    pub opaque: Vec<String>,
}

impl Segment {
    /// The command that runs inside the wrappers (program first), when the words say it.
    pub fn command(&self) -> Option<&[String]> {
        match &self.runs {
            Runs::Program(at) => self.words.get(*at..).filter(|c| !c.is_empty()),
            Runs::Script(_) | Runs::Unknown => None,
        }
    }

    /// The program word as written (after quote removal), before any wrapper is peeled.
    pub fn program(&self) -> Option<&str> {
        self.words.first().map(String::as_str)
    }
}

impl Script {
    /// A plain script: parsed without error into literal simple commands joined only by
    /// `&&`, `||`, `;`, `|` or newlines.
    pub fn is_plain(&self) -> bool {
        self.not_plain.is_empty()
    }

    /// Whether the words of this script, or of a script a wrapper in it runs, may differ from
    /// what the shell runs: it did not parse, or holds bytes (a carriage return, a line
    /// continuation, brace expansion) that shells read differently. A rule that finds no match
    /// in such a script cannot be sure there is none.
    pub fn is_ambiguous(&self) -> bool {
        self.not_plain.iter().any(|r| AMBIGUOUS.contains(&r.as_str()))
            || self
                .segments
                .iter()
                .any(|s| matches!(&s.runs, Runs::Script(inner) if inner.is_ambiguous()))
    }

    /// Whether the words of this script may not say what runs: it is ambiguous
    /// ([`Script::is_ambiguous`]) or opaque somewhere ([`Script::opacity`]). A rule that finds
    /// no match in such a script cannot be sure there is none.
    pub fn is_opaque(&self) -> bool {
        !self.opacity().is_empty()
    }

    /// Why the words of this script, or of a script a wrapper in it runs, may not say what
    /// runs: the reasons it is ambiguous, its own opaque reasons and those of every simple
    /// command, in source order, each once.
    pub fn opacity(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        self.collect_opacity(&mut out);
        out
    }

    fn collect_opacity(&self, out: &mut Vec<String>) {
        fn add<'a>(out: &mut Vec<String>, reasons: impl Iterator<Item = &'a String>) {
            for r in reasons {
                if !out.contains(r) {
                    out.push(r.clone());
                }
            }
        }
        add(out, self.not_plain.iter().filter(|r| AMBIGUOUS.contains(&r.as_str())));
        add(out, self.opaque.iter());
        for s in &self.segments {
            add(out, s.opaque.iter());
            if let Runs::Script(inner) = &s.runs {
                inner.collect_opacity(out);
            }
        }
    }

    /// Every redirection target, this script's and those of the scripts its wrappers run.
    pub fn all_redirects(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self.redirects.iter().map(String::as_str).collect();
        for s in &self.segments {
            if let Runs::Script(inner) = &s.runs {
                out.extend(inner.all_redirects());
            }
        }
        out
    }

    /// The top-level simple commands (depth 0).
    pub fn top_level(&self) -> impl Iterator<Item = &Segment> {
        self.segments.iter().filter(|s| s.depth == 0)
    }

    /// Every simple command anywhere: nested ones, and those of scripts a wrapper runs
    /// (`sh -c 'git push'` yields `sh -c …` and then `git push`), depth first. This is what a
    /// rule that must not be evaded by wrapping should be matched against.
    pub fn all_segments(&self) -> Vec<&Segment> {
        let mut out = Vec::new();
        for s in &self.segments {
            out.push(s);
            if let Runs::Script(inner) = &s.runs {
                out.extend(inner.all_segments());
            }
        }
        out
    }
}

thread_local! {
    // A parser per thread: creating one costs more than parsing a short command.
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// Parses `command` as the shell would.
pub fn parse(command: &str) -> Script {
    parse_nested(command, 0)
}

pub(super) fn parse_nested(command: &str, depth: usize) -> Script {
    let mut script = Script {
        segments: Vec::new(),
        not_plain: Vec::new(),
        redirects: Vec::new(),
        opaque: Vec::new(),
    };
    if depth > MAX_NESTING {
        script.not_plain.push(TOO_DEEP.into());
        return script;
    }
    // Bytes bash's grammar reads as a word gap, or skips, where `sh` keeps them in a word.
    if command
        .chars()
        .any(|c| (c.is_control() && c != '\n' && c != '\t') || c == '\u{7f}' || (c.is_whitespace() && !matches!(c, ' ' | '\t' | '\n')))
    {
        script.not_plain.push(CONTROL.into());
    }
    if command.contains("\\\n") {
        script.not_plain.push(CONTINUATION.into());
    }
    let tree = PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let mut p = Parser::new();
            // The grammar is compiled in; only a tree-sitter ABI mismatch at build time fails.
            if p.set_language(&tree_sitter_bash::LANGUAGE.into()).is_err() {
                return None;
            }
            *slot = Some(p);
        }
        slot.as_mut().and_then(|p| p.parse(command, None))
    });
    let Some(tree) = tree else {
        script.not_plain.push(NO_GRAMMAR.into());
        return script;
    };
    let root = tree.root_node();
    if root.has_error() {
        script.not_plain.push(PARSE_ERROR.into());
    }
    let mut walk = Walk {
        src: command,
        script: &mut script,
        nesting: depth,
    };
    walk.node(root, 0);
    script.not_plain.dedup();
    script
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &Segment) -> Vec<&str> {
        s.words.iter().map(String::as_str).collect()
    }

    #[test]
    fn plain_commands_split_into_their_segments() {
        let s = parse("git status && cargo test -p x || echo 'a b' ; ls | wc -l\ntouch PWNED");
        assert!(s.is_plain(), "{:?}", s.not_plain);
        let all: Vec<Vec<&str>> = s.segments.iter().map(words).collect();
        assert_eq!(
            all,
            vec![
                vec!["git", "status"],
                vec!["cargo", "test", "-p", "x"],
                vec!["echo", "a b"],
                vec!["ls"],
                vec!["wc", "-l"],
                vec!["touch", "PWNED"],
            ]
        );
    }

    #[test]
    fn quotes_and_escapes_are_removed_as_the_shell_removes_them() {
        let s = parse(r#"git commit -m "fix: a \"b\" \n c" 'x y' z\ w 'it'\''s' "" a"b"'c'"#);
        assert!(s.is_plain(), "{:?}", s.not_plain);
        assert_eq!(
            words(&s.segments[0]),
            vec!["git", "commit", "-m", r#"fix: a "b" \n c"#, "x y", "z w", "it's", "", "abc"]
        );
    }

    #[test]
    fn anything_beyond_simple_commands_is_not_plain() {
        for c in [
            "ls &",
            "ls & touch x",
            "ls > out",
            "ls 2>&1",
            "ls >/dev/null",
            "cat < in",
            "cat <<EOF\nhi\nEOF",
            "cat <<<hi",
            "A=1 ls",
            "x=1",
            "export X=1",
            "(ls)",
            "{ ls; }",
            "f() { ls; }",
            "echo $(id)",
            "echo `id`",
            "diff <(ls) <(ls -a)",
            "echo $HOME",
            "echo ${HOME}",
            "echo \"$HOME\"",
            "echo $((1+2))",
            "echo $'a'",
            "! ls",
            "if true; then ls; fi",
            "for x in a; do ls; done",
            "[[ -f x ]]",
            "ls |& cat",
            "ls ;; x",
            "ls 'unterminated",
            "ls &&",
            "ls\rtouch PWNED",
            "ls\u{1b}[2J",
            "ls\u{a0}-la",
            "cat\u{2028}x",
            "ec\\\nho hi",
            "cat {/etc/passwd,x}",
            "echo {1..3}",
        ] {
            let s = parse(c);
            assert!(!s.is_plain(), "{c:?} read as plain: {:?}", s.segments);
        }
    }

    #[test]
    fn nested_commands_are_still_found() {
        let s = parse("echo $(git push) && (rm -rf x)");
        let nested: Vec<Vec<&str>> = s.segments.iter().filter(|s| s.depth > 0).map(words).collect();
        assert!(nested.contains(&vec!["git", "push"]), "{nested:?}");
        assert!(nested.contains(&vec!["rm", "-rf", "x"]), "{nested:?}");
    }

    #[test]
    fn redirections_name_their_files() {
        let s = parse("cat < 'in put' > out 2>&1 && ls 2>> logs/err >&2 && echo $(cat < .env)");
        assert_eq!(s.redirects, vec!["in put", "out", "logs/err", ".env"]);
        assert!(!s.is_plain());
        assert_eq!(parse("cat <<< x").redirects, Vec::<String>::new());
        assert_eq!(parse("sh -c 'ls > a'").all_redirects(), vec!["a"]);
    }

    #[test]
    fn words_after_a_redirection_inside_a_command_are_the_commands() {
        // The grammar reads every word after `2>&1` as the redirection's; bash, the first.
        for (command, want, files) in [
            ("git 2>&1 push origin main", vec!["git", "push", "origin", "main"], vec![]),
            (
                "git >/dev/null push origin main",
                vec!["git", "push", "origin", "main"],
                vec!["/dev/null"],
            ),
            ("env 2>/dev/null rm victim.txt", vec!["env", "rm", "victim.txt"], vec!["/dev/null"]),
            ("timeout 5 2>&1 rm -f x", vec!["timeout", "5", "rm", "-f", "x"], vec![]),
            ("echo a >out b <in c", vec!["echo", "a", "b", "c"], vec!["out", "in"]),
        ] {
            let s = parse(command);
            assert_eq!(s.segments.len(), 1, "{command}");
            assert_eq!(words(&s.segments[0]), want, "{command}");
            assert_eq!(s.redirects, files, "{command}");
        }
    }

    #[test]
    fn ambiguity_is_a_parse_error_or_bytes_shells_read_differently() {
        for c in ["ls 'unterminated", "ls\rx", "ec\\\nho", "echo {a,b}", "sh -c 'ls \"'", "ls &&"] {
            assert!(parse(c).is_ambiguous(), "{c:?}");
        }
        for c in ["ls", "ls > x", "echo $(id)", "(ls)", "ls & x", "sh -c 'ls; x'"] {
            assert!(!parse(c).is_ambiguous(), "{c:?}");
        }
    }

    #[test]
    fn a_find_placeholder_is_not_brace_expansion() {
        assert!(parse("find . -name '*.rs' -exec grep -l x {} +").is_plain());
        assert!(parse("git log @{u}..HEAD").is_plain());
    }
}
