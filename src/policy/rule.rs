//! One rule, compiled, and how far a call matches it.

use std::cell::OnceCell;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::glob::{Glob, Kind};
use super::paths::{PathArg, Place, Root};
use super::{Limits, PolicyError, command, paths, pattern, program};
use crate::config::{RuleConfig, RuleDecision};
use crate::shell::{Script, Segment, parse};

/// Tools whose `command` is a shell command line: an allow never applies to one that is not
/// plain.
pub const SHELL_TOOLS: &[&str] = &["exec_shell"];

/// How far a call matches a rule that restricts (deny, ask).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Match {
    /// It does not.
    No,
    /// It may: the words are not sure to be what runs (an expansion, a parse error, `xargs`).
    Maybe,
    /// It does.
    Yes,
}

/// The layers a policy is made of, strictest owner first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerKind {
    /// The organisation's file (`policy.managed_file`).
    Managed,
    /// The workspace's `.toolslot/policy.toml`.
    Project,
    /// The user's `~/.toolslot/policy.toml`.
    User,
    /// The configuration's `[[policy.rules]]`.
    Config,
}

impl LayerKind {
    /// The layer's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::Managed => "managed",
            Self::Project => "project",
            Self::User => "user",
            Self::Config => "config",
        }
    }
}

/// Where a rule was written: `{"layer", "file", "index"}` in explanations, events and the
/// ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleRef {
    /// Its layer.
    pub layer: LayerKind,
    /// Its file (`null` for the configuration's rules when no config file was given).
    pub file: Option<String>,
    /// Its position among its layer's rules, from 0.
    pub index: usize,
}

/// A compiled rule.
#[derive(Debug, Clone)]
pub struct Rule {
    at: RuleRef,
    written: RuleConfig,
    tool: Glob,
    command: Option<Vec<String>>,
    path: Option<Glob>,
    input: Option<(String, Glob)>,
    limits: Limits,
}

impl Rule {
    /// Compiles `written`, found at `at`; `place` names the layer and file in errors.
    ///
    /// # Errors
    /// [`PolicyError::Rule`] for a bad glob, an empty command, a `*` that is not last, or a
    /// JSON pointer that does not start with `/`.
    pub fn compile(written: &RuleConfig, at: RuleRef, place: &str) -> Result<Self, PolicyError> {
        let bad = |reason: String| PolicyError::Rule {
            place: place.to_string(),
            index: at.index,
            tool: written.tool.clone(),
            reason,
        };
        let tool = Glob::new(&written.tool, Kind::Text).map_err(|e| bad(format!("tool: {e}")))?;
        if let Some(words) = &written.command {
            if words.is_empty() {
                return Err(bad("command is empty (write [\"*\"] for any command)".into()));
            }
            if words.iter().any(|w| w.is_empty()) {
                return Err(bad("command holds an empty word".into()));
            }
        }
        let path = written
            .path
            .as_deref()
            .map(|p| Glob::new(p.trim_start_matches("./"), Kind::Path))
            .transpose()
            .map_err(|e| bad(format!("path: {e}")))?;
        let input = match &written.input {
            Some(m) => {
                if !m.pointer.starts_with('/') {
                    return Err(bad(format!("input pointer `{}` must start with `/` (a JSON pointer)", m.pointer)));
                }
                Some((
                    m.pointer.clone(),
                    Glob::new(&m.glob, Kind::Text).map_err(|e| bad(format!("input: {e}")))?,
                ))
            }
            None => None,
        };
        Ok(Self {
            at,
            written: written.clone(),
            tool,
            command: written.command.clone(),
            path,
            input,
            limits: Limits::default(),
        })
    }

    /// The rule working within `limits` (`[policy]`: how large a program file it compares).
    pub(super) fn limited(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The glob of a deny rule that names paths alone (no command, input or key): what it
    /// names is hidden from every way of reading by its tools (`hidden.rs`).
    pub(super) fn hiding(&self) -> Option<&Glob> {
        let w = &self.written;
        (w.decision == RuleDecision::Deny && self.command.is_none() && self.input.is_none() && w.key.is_none())
            .then_some(self.path.as_ref())
            .flatten()
    }

    /// Where it was written.
    pub fn reference(&self) -> &RuleRef {
        &self.at
    }

    /// The rule as written.
    pub fn written(&self) -> &RuleConfig {
        &self.written
    }

    /// What it decides.
    pub fn decision(&self) -> RuleDecision {
        self.written.decision
    }

    /// Whether it is about `tool`.
    pub fn applies_to(&self, tool: &str) -> bool {
        self.tool.is_match(tool)
    }

    /// Whether it names command words.
    pub fn has_command(&self) -> bool {
        self.command.is_some()
    }

    /// How far `call` matches, read as a deny or ask rule reads it: leniently, every matcher
    /// together (a rule with none matches every call of its tools).
    pub fn restricts(&self, call: &Call<'_>) -> Match {
        let mut m = Match::Yes;
        if let Some(ptr) = &self.input {
            m = m.min(restrict_input(&ptr.0, &ptr.1, call.input));
        }
        if let Some(key) = &self.written.key {
            m = m.min(if call.key() == key { Match::Yes } else { Match::No });
        }
        if m == Match::No {
            return m;
        }
        match (&self.command, &self.path) {
            (None, None) => m,
            (None, Some(glob)) => m.min(restrict_paths(glob, call.paths(), call.ambiguous())),
            (Some(words), path) => {
                let Some(script) = call.script() else {
                    return Match::No;
                };
                let places = call.places();
                // The program that runs, not only the word it is called by (`program.rs`).
                let cx = program::Context {
                    root: call.root(),
                    script,
                    places,
                    hash_max_bytes: self.limits.program_hash_max_bytes,
                };
                let Some(glob) = path else {
                    return m.min(program::restricts(words, &cx));
                };
                // Both on the same simple command: `cat README && ls secrets` is not `cat`
                // reading a secret. Redirections count for every command of the script.
                let redirects = paths::of_redirects(script, call.root(), places);
                let mut best = if script.is_opaque() { Match::Maybe } else { Match::No };
                for (index, seg) in script.all_segments().into_iter().enumerate() {
                    let mut args = paths::of_segment(seg, call.root(), &call.place_of(index));
                    args.extend(redirects.iter().cloned());
                    best = best.max(program::segment(words, seg, index, &cx).min(restrict_paths(glob, &args, false)));
                }
                m.min(best)
            }
        }
    }

    /// Whether this allow rule alone covers the whole of `call` (a rule without command words):
    /// every path-like argument (at least one) inside its glob in every spelling, the value at
    /// its pointer matching, its key the call's.
    pub fn permits_call(&self, call: &Call<'_>) -> bool {
        if self.command.is_some() || !self.permits_input_and_key(call) {
            return false;
        }
        match &self.path {
            None => true,
            Some(glob) => {
                let args = call.paths();
                !args.is_empty() && args.iter().all(|a| permits_path(glob, a))
            }
        }
    }

    /// Whether this allow rule (with command words) covers the simple command `seg` of `call`.
    pub fn permits_segment(&self, call: &Call<'_>, seg: &Segment) -> bool {
        let Some(words) = &self.command else {
            return false;
        };
        if !command::permits(words, seg) || !self.permits_input_and_key(call) {
            return false;
        }
        match &self.path {
            None => true,
            Some(glob) => {
                let index = call
                    .script()
                    .and_then(|s| s.all_segments().iter().position(|x| std::ptr::eq(*x, seg)));
                let place = index.map_or_else(|| call.root().place(), |i| call.place_of(i));
                paths::of_segment(seg, call.root(), &place).iter().all(|a| permits_path(glob, a))
            }
        }
    }

    fn permits_input_and_key(&self, call: &Call<'_>) -> bool {
        if let Some(key) = &self.written.key
            && call.key() != key
        {
            return false;
        }
        match &self.input {
            None => true,
            Some((ptr, glob)) => {
                let values = values_at(call.input, ptr);
                !values.is_empty() && values.iter().all(|v| glob.is_match(v))
            }
        }
    }
}

/// What a rule reads of a call, computed once per call and only when a rule asks for it.
pub struct Call<'a> {
    /// The resolved tool name.
    pub tool: &'a str,
    /// The arguments.
    pub input: &'a Value,
    workspace: &'a Path,
    /// Made on first use: resolving the workspace costs system calls a call whose rules look
    /// at no path should not pay.
    root: OnceCell<Root>,
    key_of: &'a dyn Fn() -> String,
    key: OnceCell<String>,
    script: OnceCell<Option<Script>>,
    places: OnceCell<Vec<Place>>,
    paths: OnceCell<Vec<PathArg>>,
}

impl<'a> Call<'a> {
    /// A call of `tool` with `input` in `workspace`; `key_of` gives its approval key, asked
    /// only by a rule with `key`.
    pub fn new(tool: &'a str, input: &'a Value, workspace: &'a Path, key_of: &'a dyn Fn() -> String) -> Self {
        Self {
            tool,
            input,
            workspace,
            root: OnceCell::new(),
            key_of,
            key: OnceCell::new(),
            script: OnceCell::new(),
            places: OnceCell::new(),
            paths: OnceCell::new(),
        }
    }

    fn root(&self) -> &Root {
        self.root.get_or_init(|| Root::new(self.workspace))
    }

    /// Where each simple command of its command line runs (`all_segments` order).
    fn places(&self) -> &[Place] {
        self.places
            .get_or_init(|| self.script().map(|s| paths::places(s, self.root())).unwrap_or_default())
    }

    /// Where the `index`th simple command runs (the workspace when the line has no such one).
    fn place_of(&self, index: usize) -> Place {
        self.places().get(index).cloned().unwrap_or_else(|| self.root().place())
    }

    /// The approval key.
    pub fn key(&self) -> &str {
        self.key.get_or_init(|| (self.key_of)())
    }

    /// The input's `command`, parsed as a shell command line, when it has one.
    pub fn script(&self) -> Option<&Script> {
        self.script
            .get_or_init(|| self.input.get("command").and_then(Value::as_str).map(parse))
            .as_ref()
    }

    /// Whether the call is a shell command line (a shell tool's, with a `command`).
    pub fn is_shell(&self) -> bool {
        SHELL_TOOLS.contains(&self.tool) && self.script().is_some()
    }

    /// Whether the call is a shell command whose words may not say what runs (ambiguous or
    /// opaque): a path rule that finds no match cannot be sure there is none.
    fn ambiguous(&self) -> bool {
        self.is_shell() && self.script().is_some_and(Script::is_opaque)
    }

    /// Its path-like arguments: a shell command's words and redirections, and the input's
    /// path fields.
    fn paths(&self) -> &[PathArg] {
        self.paths.get_or_init(|| {
            let mut v = paths::of_input(self.input, || self.root());
            if self.is_shell()
                && let Some(s) = self.script()
            {
                v.extend(paths::of_script(s, self.root(), self.places()));
            }
            v
        })
    }
}

/// A restricting path glob against arguments: one in the glob (in either spelling), or a folder
/// holding what the glob names (`rm -rf secrets` for `secrets/**`); a doubt when an argument
/// is expanded by the shell or the script is ambiguous.
fn restrict_paths(glob: &Glob, args: &[PathArg], ambiguous: bool) -> Match {
    if args.iter().any(|a| a.spellings().any(|s| glob.is_match(s) || glob.is_held_by(s))) {
        return Match::Yes;
    }
    // A glob may expand to paths that are not there yet (`pattern.rs`).
    let may_name = |a: &PathArg| a.spellings().any(|s| pattern::is_pattern(s) && pattern::may_name(glob, s));
    if ambiguous || args.iter().any(|a| a.expanded || may_name(a)) {
        Match::Maybe
    } else {
        Match::No
    }
}

/// An allowing path glob: the argument is literal and inside it in both spellings.
fn permits_path(glob: &Glob, arg: &PathArg) -> bool {
    !arg.expanded && arg.spellings().all(|s| !pattern::is_pattern(s) && glob.is_match(s))
}

/// A restricting input matcher: any value at the pointer matches.
fn restrict_input(pointer: &str, glob: &Glob, input: &Value) -> Match {
    if values_at(input, pointer).iter().any(|v| glob.is_match(v)) {
        Match::Yes
    } else {
        Match::No
    }
}

/// The texts at `pointer`: a string as it is, each element of an array, anything else as JSON.
pub(super) fn values_at(input: &Value, pointer: &str) -> Vec<String> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => crate::canonical::canonical_json(other),
    };
    match input.pointer(pointer) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.iter().map(text).collect(),
        Some(v) => vec![text(v)],
    }
}
