//! The walk over tree-sitter-bash's syntax tree: each simple command's words, and the reasons
//! the script is not plain.

use tree_sitter::Node;

use super::{PARSE_ERROR, Script, Segment};
use crate::shell::opaque;
use crate::shell::wrappers::unwrap;

/// One walk over a script's syntax tree, filling in its `Script`.
pub(super) struct Walk<'a> {
    pub(super) src: &'a str,
    pub(super) script: &'a mut Script,
    /// How many `sh -c` levels this script is inside.
    pub(super) nesting: usize,
}

impl Walk<'_> {
    /// The source text of node `n`.
    pub(super) fn text(&self, n: Node) -> &str {
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

    /// A reason the script is opaque (once).
    fn opaque(&mut self, why: String) {
        if !self.script.opaque.contains(&why) {
            self.script.opaque.push(why);
        }
    }

    /// Reads node `n`, `depth` levels of nesting inside the script, and what it holds.
    pub(super) fn node(&mut self, n: Node, depth: usize) {
        if n.is_error() || n.is_missing() {
            self.reason(PARSE_ERROR);
        }
        if let Some(why) = self.construct_opacity(n) {
            self.opaque(why);
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
            "command" => self.command(n, depth, &[]),
            "redirected_statement" => self.redirected(n, depth),
            "file_redirect" | "herestring_redirect" | "heredoc_redirect" => {
                self.redirect(n, depth);
                // Words after the target outside a command: what runs them is not judged.
                if !after_target(&n).is_empty() {
                    self.opaque("words after a redirection's target, outside a command".into());
                }
            }
            kind => {
                self.reason(describe(kind));
                self.children(n, depth + 1);
            }
        }
    }

    /// A statement with its redirections (`git 2>&1 push origin main`): the grammar reads
    /// every word after a redirection's target as the redirection's, where bash gives them to
    /// the command, so a command's are walked as its words, after its own.
    fn redirected(&mut self, n: Node, depth: usize) {
        self.reason("a redirection");
        let mut cursor = n.walk();
        let kids: Vec<Node> = n.named_children(&mut cursor).collect();
        let redirect = |k: &Node| matches!(k.kind(), "file_redirect" | "herestring_redirect" | "heredoc_redirect");
        let extra: Vec<Node> = kids.iter().filter(|k| redirect(k)).flat_map(after_target).collect();
        let mut body_done = false;
        for k in kids {
            if redirect(&k) {
                self.redirect(k, depth);
            } else if !body_done && k.kind() == "command" {
                body_done = true;
                self.command(k, depth, &extra);
            } else {
                body_done = true;
                self.node(k, depth);
            }
        }
        if !extra.is_empty() && !n.named_children(&mut n.walk()).any(|k| k.kind() == "command") {
            self.opaque("words after a redirection's target, outside a command".into());
        }
    }

    fn command(&mut self, n: Node, depth: usize, extra: &[Node]) {
        let mut words = Vec::new();
        let mut flags = Vec::new();
        let mut cursor = n.walk();
        let kids: Vec<Node> = n.named_children(&mut cursor).chain(extra.iter().copied()).collect();
        for k in kids {
            match k.kind() {
                "command_name" => {
                    let mut c = k.walk();
                    let inner: Vec<Node> = k.named_children(&mut c).collect();
                    for w in inner {
                        let lit = self.word(w, depth, &mut words);
                        flags.push(opaque::Word {
                            literal: lit,
                            pattern: lit && self.unquoted_glob(w),
                        });
                    }
                }
                "variable_assignment" => {
                    self.reason("a variable assignment");
                    if let Some(why) = self.construct_opacity(k) {
                        self.opaque(why);
                    }
                    self.children(k, depth + 1);
                }
                "file_redirect" | "herestring_redirect" | "heredoc_redirect" => {
                    self.redirect(k, depth);
                    // `>f git push`: the grammar takes every word after `f` as the
                    // redirection's; bash takes the first, and the rest are the command's.
                    for w in after_target(&k) {
                        let lit = self.word(w, depth, &mut words);
                        flags.push(opaque::Word {
                            literal: lit,
                            pattern: lit && self.unquoted_glob(w),
                        });
                    }
                }
                "comment" => {}
                _ => {
                    let lit = self.word(k, depth, &mut words);
                    flags.push(opaque::Word {
                        literal: lit,
                        pattern: lit && self.unquoted_glob(k),
                    });
                }
            }
        }
        let literal = flags.iter().all(|f| f.literal);
        if !literal {
            self.reason("a word that is not literal (an expansion or a substitution)");
        }
        let unwrapped = unwrap(&words, &flags, self.nesting);
        let patterns = flags.iter().enumerate().filter(|(_, f)| f.pattern).map(|(i, _)| i).collect();
        self.script.segments.push(Segment {
            words,
            literal,
            depth,
            wrappers: unwrapped.wrappers,
            runs: unwrapped.runs,
            patterns,
            opaque: unwrapped.opaque,
        });
    }

    /// A redirection: not plain; the file it names is kept (as written when it is not literal),
    /// and commands nested in it are walked. The words the grammar puts after its target are
    /// not its own ([`after_target`]).
    fn redirect(&mut self, n: Node, depth: usize) {
        self.reason("a redirection");
        if n.kind() != "file_redirect" {
            self.children(n, depth + 1);
            return;
        }
        let mut cursor = n.walk();
        let mut targets: Vec<Node> = n.children_by_field_name("destination", &mut cursor).collect();
        targets.truncate(1);
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
                if let Some(why) = self.construct_opacity(n) {
                    self.opaque(why);
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

/// The words tree-sitter-bash reads as a file redirection's destinations after its first
/// (`>/dev/null push origin main`): bash redirects to the first and gives the rest to the
/// command, so they are walked as its words.
fn after_target<'t>(n: &Node<'t>) -> Vec<Node<'t>> {
    if n.kind() != "file_redirect" {
        return Vec::new();
    }
    let mut cursor = n.walk();
    n.children_by_field_name("destination", &mut cursor).skip(1).collect()
}
