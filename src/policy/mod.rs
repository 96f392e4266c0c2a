//! Policy as rules: what a team allows, asks about and denies, in layers no lower one can loosen.
//!
//! A rule (`[[policy.rules]]`) names tools by a glob and may narrow itself to some calls: the
//! words of a shell command ([`command`](crate::config::RuleConfig::command), matched against
//! every simple command the shell would run, see `command.rs`), a glob over path-like
//! arguments (`paths.rs`), a JSON pointer and a glob for any other argument, or an approval key
//! (what `approve_for_project` writes). Rules come in four layers ([`LayerKind`]): the managed
//! file, the project's, the user's, the configuration's. Across all of them deny beats ask
//! beats allow ([`Policy::evaluate`]), so no layer can loosen another's deny or ask; a managed
//! `allow_override = false` also keeps remembered approvals from covering what it asks.
//!
//! A deny or ask rule matches leniently and says so when it cannot be sure ([`Match::Maybe`]:
//! the call is then asked, whatever the mode); an allow rule matches strictly and never a
//! shell command that is not plain. Examples written with a rule are checked when the policy
//! loads ([`Policy::load`]): a policy whose rules do not do what they show is refused.

mod command;
mod error;
mod examples;
mod git_code;
mod glob;
mod hidden;
mod load;
mod paths;
mod pattern;
mod program;
mod project;
mod project_file;
mod project_write;
mod rule;
pub mod trust;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use error::{PolicyError, TrustError};
pub use load::{Hook, PROJECT_FILE, USER_FILE};
pub use project::with_allow_rule;
pub use project_file::read_project_file;
pub use project_write::{PolicyFolder, write_project_file};
pub use rule::{Call, LayerKind, Match, Rule, RuleRef, SHELL_TOOLS};

use crate::config::{ApprovalMode, HookEvent, RuleDecision};
use crate::notice::{Notice, NoticeKind};
use trust::Untrusted;

/// Every layer's rules and hooks, loaded for one workspace.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Managed, project, user, config, each in its own order.
    rules: Vec<Rule>,
    /// False when the managed file forbids lower layers (and remembered approvals) to loosen
    /// what it asks.
    allow_override: bool,
    /// The managed file forbids `full-auto`.
    forbid_full_auto: bool,
    /// Managed, user, config.
    hooks: Vec<Hook>,
    /// The policy files found.
    files: Vec<PathBuf>,
    /// Where `approve_for_project` writes.
    project_file: PathBuf,
    /// The allow rules of an untrusted project file: checked, reported, never applied.
    not_applied: Vec<Rule>,
    /// The project's file, when its allow rules were not applied.
    untrusted: Option<Untrusted>,
    /// Why the policy could not be loaded: every call is refused with it.
    refusal: Option<String>,
    /// The limits of `[policy]` rules and masks work within.
    limits: Limits,
}

/// The limits of `[policy]` that rules and masks work within (docs in `config::PolicyConfig`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Limits {
    /// Largest program file compared by content with a denied program (0: none).
    pub program_hash_max_bytes: u64,
    /// Most entries looked at to find what a path deny rule names (0: no limit).
    pub mask_max_entries: usize,
}

impl Limits {
    /// The limits `config` sets.
    pub(crate) fn of(config: &crate::config::Config) -> Self {
        Self {
            program_hash_max_bytes: config.policy.program_hash_max_bytes,
            mask_max_entries: config.policy.mask_max_entries,
        }
    }
}

/// What the rules decide for one call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// `None` when no rule applies: the approval mode decides.
    pub decision: Option<RuleDecision>,
    /// The rule that decided.
    pub rule: Option<RuleRef>,
    /// For the model on a deny; for the host on an ask the rule only may match.
    pub reason: Option<String>,
    /// A remembered approval does not cover it (a managed ask under `allow_override = false`).
    pub sticky: bool,
    /// The rule only may match (the words are not sure to be what runs): asked, not denied.
    pub unsure: bool,
}

impl Policy {
    /// A policy with no rules and no hooks: the approval mode decides everything.
    pub fn empty() -> Self {
        Self {
            allow_override: true,
            ..Self::default()
        }
    }

    /// A policy that refuses every call with `reason` (one that could not be loaded, where the
    /// caller has nowhere to report it: nothing runs under a policy nobody could read).
    pub fn refusing(reason: impl Into<String>) -> Self {
        Self {
            refusal: Some(reason.into()),
            ..Self::empty()
        }
    }

    /// Why every call is refused, for a policy that could not be loaded.
    pub fn refusal(&self) -> Option<&str> {
        self.refusal.as_deref()
    }

    /// The compiled rules, managed first.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The policy files that were read (they are protected from the model's tools).
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The project's policy file (which `approve_for_project` writes).
    pub fn project_file(&self) -> &Path {
        &self.project_file
    }

    /// The project's policy file, when it is not trusted and its allow rules were not applied.
    pub fn untrusted(&self) -> Option<&Untrusted> {
        self.untrusted.as_ref()
    }

    /// The allow rules of an untrusted project file, in its order: never applied.
    pub fn not_applied(&self) -> &[Rule] {
        &self.not_applied
    }

    /// What the host is told once when a session opens under this policy: an untrusted
    /// project file whose allow rules were not applied.
    pub fn notices(&self) -> Vec<Notice> {
        self.untrusted
            .iter()
            .map(|u| Notice::new(NoticeKind::ProjectPolicyUntrusted, u.message()))
            .collect()
    }

    /// Whether a managed `allow_override = false` is in force.
    pub fn overrides_forbidden(&self) -> bool {
        !self.allow_override
    }

    /// Why `mode` may not be used, when the managed policy forbids it.
    pub fn forbids(&self, mode: ApprovalMode) -> Option<String> {
        (self.forbid_full_auto && mode == ApprovalMode::FullAuto)
            .then(|| "the managed policy forbids the full-auto approval mode (forbid_full_auto = true)".to_string())
    }

    /// The hooks of `event` for `tool`, in order: managed, user, config.
    pub fn hooks(&self, event: HookEvent, tool: &str) -> impl Iterator<Item = &Hook> {
        let tool = tool.to_string();
        self.hooks.iter().filter(move |h| h.config.event == event && h.applies_to(&tool))
    }

    /// Whether any hook of `event` applies to `tool`.
    pub fn has_hooks(&self, event: HookEvent, tool: &str) -> bool {
        self.hooks(event, tool).next().is_some()
    }

    /// What the rules decide for `call`: the strictest deny or ask that matches (a rule that
    /// only may match asks), else an allow that covers the whole call, else nothing.
    pub fn evaluate(&self, call: &Call<'_>) -> Verdict {
        if let Some(reason) = &self.refusal {
            return Verdict {
                decision: Some(RuleDecision::Deny),
                reason: Some(reason.clone()),
                ..Verdict::default()
            };
        }
        let mut strictest: Option<(RuleDecision, &Rule, Match)> = None;
        for rule in self
            .rules
            .iter()
            .filter(|r| r.decision() != RuleDecision::Allow && r.applies_to(call.tool))
        {
            let m = rule.restricts(call);
            let decision = match m {
                Match::No => continue,
                Match::Maybe => RuleDecision::Ask,
                Match::Yes => rule.decision(),
            };
            if strictest.as_ref().is_none_or(|(d, _, _)| decision > *d) {
                strictest = Some((decision, rule, m));
            }
            if decision == RuleDecision::Deny {
                break;
            }
        }
        if let Some((decision, rule, m)) = strictest {
            let at = rule.reference();
            let named = format!("rule {} of the {} policy", at.index, at.layer.name());
            let reason = match (decision, m) {
                (RuleDecision::Deny, _) => Some(rule.written().reason.clone().unwrap_or_else(|| format!("{named} denies it"))),
                (_, Match::Maybe) => Some(format!(
                    "{named} ({}) may apply: {}",
                    rule.decision().as_str(),
                    command::doubt(call.script())
                )),
                _ => rule.written().reason.clone(),
            };
            return Verdict {
                decision: Some(decision),
                rule: Some(at.clone()),
                reason,
                sticky: at.layer == LayerKind::Managed && !self.allow_override,
                unsure: m == Match::Maybe,
            };
        }
        let allows: Vec<&Rule> = self
            .rules
            .iter()
            .filter(|r| r.decision() == RuleDecision::Allow && r.applies_to(call.tool))
            .collect();
        match covering_allow(&allows, call) {
            Some(rule) => Verdict {
                decision: Some(RuleDecision::Allow),
                rule: Some(rule.reference().clone()),
                ..Verdict::default()
            },
            None => Verdict::default(),
        }
    }
}

/// The allow rule that covers all of `call`, if one does: a rule without command words that
/// permits the whole call, or, for a command line, rules with command words covering each of
/// its simple commands (the first one's is named). Never a shell command that is not plain.
fn covering_allow<'r>(allows: &[&'r Rule], call: &Call<'_>) -> Option<&'r Rule> {
    if allows.is_empty() {
        return None;
    }
    let with_words = allows.iter().any(|r| r.has_command());
    if (call.is_shell() || with_words) && call.script().is_some_and(|s| !command::fully_plain(s)) {
        return None;
    }
    if let Some(rule) = allows.iter().find(|r| !r.has_command() && r.permits_call(call)) {
        return Some(rule);
    }
    let script = call.script()?;
    let mut first = None;
    for seg in script.all_segments() {
        let rule = allows.iter().find(|r| r.permits_segment(call, seg))?;
        first.get_or_insert(*rule);
    }
    first
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
