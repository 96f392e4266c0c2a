//! What makes a script opaque beyond its programs: globs in its words, and constructs that
//! evaluate a variable's value or define a command.

use tree_sitter::Node;

use super::walk::Walk;
use crate::shell::opaque;

impl Walk<'_> {
    /// Whether the unquoted parts of a literal word hold a glob the shell expands: `*`, `?`,
    /// or `[` with a `]` after it (quoted or not: a bracket expression may hold a quoted `]`).
    pub(super) fn unquoted_glob(&self, n: Node) -> bool {
        let mut shape = String::new();
        match n.kind() {
            "word" => shape.push_str(self.text(n)),
            "concatenation" => {
                let mut c = n.walk();
                for k in n.children(&mut c) {
                    if k.kind() == "word" {
                        shape.push_str(self.text(k));
                    } else {
                        // Quoted: no glob of its own, but it may close a bracket expression.
                        shape.push('\u{0}');
                        if self.text(k).contains(']') {
                            shape.push(']');
                        }
                    }
                }
            }
            _ => return false,
        }
        opaque::has_glob(&shape)
    }

    /// Why a construct makes the script opaque: a function definition, a variable a program
    /// reads as code, arithmetic or an indirection that evaluates a variable's value.
    pub(super) fn construct_opacity(&self, n: Node) -> Option<String> {
        let text = self.text(n);
        match n.kind() {
            "function_definition" => {
                let name = n.child_by_field_name("name").map_or("", |k| self.text(k));
                Some(format!(
                    "`{name}` is defined as a function: a later command `{name}` runs its body, not a program"
                ))
            }
            "variable_assignment" => {
                let name = n.child_by_field_name("name").map_or("", |k| self.text(k));
                let name = name.split('[').next().unwrap_or(name);
                (!opaque::harmless_variable(name))
                    .then(|| format!("`{name}=…` sets a variable a program may read as code or as where to find programs"))
            }
            "arithmetic_expansion" => opaque::names_a_variable(text.strip_prefix('$').unwrap_or(text)).then(|| arithmetic(text)),
            "c_style_for_statement" => opaque::names_a_variable(text).then(|| arithmetic(text)),
            "declaration_command" | "unset_command" => (text.contains('[') && text.contains(['$', '`']))
                .then(|| format!("`{text}` evaluates the subscript of a variable name, which can run a command")),
            "compound_statement" if text.starts_with("((") => opaque::names_a_variable(text).then(|| arithmetic(text)),
            "subscript" => {
                let index = n.child_by_field_name("index").map_or("", |k| self.text(k));
                opaque::names_a_variable(index).then(|| arithmetic(text))
            }
            "expansion" if text.starts_with("${!") => Some(format!(
                "`{text}` expands the name a variable holds, which can evaluate a subscript that runs a command"
            )),
            "test_command" => opaque::test_evaluates(text)
                .then(|| format!("`{text}` evaluates a variable as arithmetic or a subscript, which can run a command")),
            _ => None,
        }
    }
}

/// The reason for arithmetic that reads a variable.
fn arithmetic(text: &str) -> String {
    format!("arithmetic `{text}` evaluates a variable's value as an expression, which can run a command")
}
