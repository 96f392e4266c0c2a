//! A command line read as a shell reads it: tree-sitter-bash's syntax tree, reduced to the simple
//! commands it holds and the reasons it is not plain.
//!
//! A hand-written tokenizer disagrees with `sh` exactly where an attacker needs it to (a newline
//! read as a word gap, a quote it closes differently), so the tree comes from a maintained
//! grammar. Where bash and the `sh` that runs the command could still read the same bytes
//! differently (a carriage return, a line continuation, brace expansion), the command is simply
//! not plain: it is judged as code and keyed exactly.

use std::cell::RefCell;

use tree_sitter::{Node, Parser};

use super::wrappers::{Runs, unwrap};

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

struct Walk<'a> {
    src: &'a str,
    script: &'a mut Script,
    /// How many `sh -c` levels this script is inside.
    nesting: usize,
}

impl Walk<'_> {
    fn text(&self, n: Node) -> &str {
        self.src.get(n.byte_range()).unwrap_or("")
    }

    fn reason(&mut self, why: impl Into<String>) {
        let why = why.into();
        if !self.script.not_plain.contains(&why) {
            self.script.not_plain.push(why);
        }
    }

    fn children(&mut self, n: Node, depth: usize) {
        let mut cursor = n.walk();
        let kids: Vec<Node> = n.children(&mut cursor).collect();
        for k in kids {
            self.node(k, depth);
        }
    }

    fn node(&mut self, n: Node, depth: usize) {
        if n.is_error() || n.is_missing() {
            self.reason(PARSE_ERROR);
        }
        if !n.is_named() {
            match n.kind() {
                "&&" | "||" | ";" | "|" => {}
                "&" => self.reason("`&` (a command left running in the background)"),
                other => self.reason(format!("`{other}`")),
            }
            return;
        }
        match n.kind() {
            "program" | "list" | "pipeline" => self.children(n, depth),
            "comment" => {}
            "command" => self.command(n, depth),
            "file_redirect" | "herestring_redirect" | "heredoc_redirect" => self.redirect(n, depth),
            kind => {
                self.reason(describe(kind));
                self.children(n, depth + 1);
            }
        }
    }

    fn command(&mut self, n: Node, depth: usize) {
        let mut words = Vec::new();
        let mut literal = true;
        let mut cursor = n.walk();
        let kids: Vec<Node> = n.named_children(&mut cursor).collect();
        for k in kids {
            match k.kind() {
                "command_name" => {
                    let mut c = k.walk();
                    let inner: Vec<Node> = k.named_children(&mut c).collect();
                    for w in inner {
                        literal &= self.word(w, depth, &mut words);
                    }
                }
                "variable_assignment" => {
                    self.reason("a variable assignment");
                    self.children(k, depth + 1);
                }
                "file_redirect" | "herestring_redirect" | "heredoc_redirect" => self.redirect(k, depth),
                "comment" => {}
                _ => literal &= self.word(k, depth, &mut words),
            }
        }
        if !literal {
            self.reason("a word that is not literal (an expansion or a substitution)");
        }
        let (wrappers, runs) = unwrap(&words, self.nesting);
        self.script.segments.push(Segment {
            words,
            literal,
            depth,
            wrappers,
            runs,
        });
    }

    /// A redirection: not plain; the file it names is kept (as written when it is not literal),
    /// and commands nested in it are walked.
    fn redirect(&mut self, n: Node, depth: usize) {
        self.reason("a redirection");
        if n.kind() != "file_redirect" {
            self.children(n, depth + 1);
            return;
        }
        let mut cursor = n.walk();
        let targets: Vec<Node> = n.children_by_field_name("destination", &mut cursor).collect();
        let mut words = Vec::new();
        for t in targets {
            self.word(t, depth + 1, &mut words);
        }
        // `2>&1` names a descriptor, not a file.
        let file = words.concat();
        if !file.is_empty() && !file.chars().all(|c| c.is_ascii_digit() || c == '-') {
            self.script.redirects.push(file);
        }
    }

    /// Appends the word `n` stands for; false when it is not literal (its nested commands
    /// are walked).
    fn word(&mut self, n: Node, depth: usize, words: &mut Vec<String>) -> bool {
        match self.literal(n) {
            Some(text) => {
                words.push(text);
                true
            }
            None => {
                words.push(self.text(n).to_string());
                if matches!(n.kind(), "brace_expression") || self.brace_expansion(n) {
                    self.reason("brace expansion");
                }
                self.children(n, depth + 1);
                false
            }
        }
    }

    /// The value of a literal word, or `None` when the shell would expand something in it.
    fn literal(&self, n: Node) -> Option<String> {
        let text = self.text(n);
        match n.kind() {
            "word" => {
                if self.brace_expansion(n) {
                    return None;
                }
                Some(unescape_unquoted(text))
            }
            "number" => Some(text.to_string()),
            "raw_string" => Some(text.strip_prefix('\'')?.strip_suffix('\'')?.to_string()),
            "string" => {
                let mut c = n.walk();
                if n.named_children(&mut c).any(|k| k.kind() != "string_content") {
                    return None;
                }
                Some(unescape_double_quoted(text.strip_prefix('"')?.strip_suffix('"')?))
            }
            "concatenation" => {
                if self.brace_expansion(n) {
                    return None;
                }
                let mut c = n.walk();
                let kids: Vec<Node> = n.children(&mut c).collect();
                let mut out = String::new();
                for k in kids {
                    out.push_str(&self.literal(k)?);
                }
                Some(out)
            }
            _ => None,
        }
    }

    /// Whether the unquoted parts of a word hold `{a,b}` or `{a..b}`: literal in `dash`, but
    /// expanded into several words by bash, which is `sh` on some systems.
    fn brace_expansion(&self, n: Node) -> bool {
        let mut shape = String::new();
        let mut c = n.walk();
        if n.kind() == "word" {
            shape.push_str(self.text(n));
        } else {
            for k in n.children(&mut c) {
                if k.kind() == "word" {
                    shape.push_str(self.text(k));
                } else {
                    shape.push('\u{0}');
                }
            }
        }
        let mut rest = shape.as_str();
        while let Some(open) = rest.find('{') {
            let after = &rest[open + 1..];
            let Some(close) = after.find('}') else { break };
            let inside = &after[..close];
            if !inside.contains('{') && (inside.contains(',') || inside.contains("..")) {
                return true;
            }
            rest = after;
        }
        false
    }
}

/// A reason naming a construct by its grammar kind, in words.
fn describe(kind: &str) -> String {
    match kind {
        "redirected_statement" | "file_redirect" | "heredoc_redirect" | "herestring_redirect" => "a redirection".into(),
        "subshell" => "a subshell `( … )`".into(),
        "compound_statement" => "a command group `{ … }`".into(),
        "function_definition" => "a function definition".into(),
        "variable_assignment" | "variable_assignments" => "a variable assignment".into(),
        "declaration_command" | "unset_command" => "a declaration (`export`, `declare`, `unset`, …)".into(),
        "negated_command" => "a negation `!`".into(),
        "command_substitution" => "a command substitution".into(),
        "process_substitution" => "a process substitution".into(),
        "if_statement" | "while_statement" | "for_statement" | "c_style_for_statement" | "case_statement" | "test_command" => {
            "a compound command (`if`, `for`, `while`, `case`, `[[ ]]`)".into()
        }
        "ERROR" => PARSE_ERROR.into(),
        other => format!("shell syntax `{other}`"),
    }
}

/// An unquoted word's value: a backslash keeps the next character.
fn unescape_unquoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A double-quoted string's value: a backslash escapes only `"`, `\`, `$` and `` ` ``.
fn unescape_double_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(&n) = chars.peek()
            && matches!(n, '"' | '\\' | '$' | '`')
        {
            out.push(n);
            chars.next();
        } else {
            out.push(c);
        }
    }
    out
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
