//! The four layers, read from their files and the configuration.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::glob::{Glob, Kind};
use super::rule::{LayerKind, Rule, RuleRef};
use super::trust::{self, Distrust, TrustState, TrustStore, Untrusted};
use super::{Policy, PolicyError, examples};
use crate::config::{Config, HookConfig, RuleConfig, RuleDecision, expand_home};

/// The project's policy file, relative to the workspace.
pub const PROJECT_FILE: &str = ".toolslot/policy.toml";
/// The user's policy file (`~` is the home folder).
pub const USER_FILE: &str = "~/.toolslot/policy.toml";

/// A policy file: `[policy]` with its rules (and, in the managed file only, `allow_override`
/// and `forbid_full_auto`), and `[[hooks]]` (not in a project's file).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    policy: FilePolicy,
    #[serde(default)]
    hooks: Vec<HookConfig>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePolicy {
    #[serde(default)]
    rules: Vec<RuleConfig>,
    allow_override: Option<bool>,
    forbid_full_auto: Option<bool>,
}

/// A hook, with the layer it came from.
#[derive(Debug, Clone)]
pub struct Hook {
    /// As written.
    pub config: HookConfig,
    /// Its layer (managed, user or config).
    pub layer: LayerKind,
    tool: Glob,
}

impl Hook {
    /// Whether it runs for calls of `tool`.
    pub fn applies_to(&self, tool: &str) -> bool {
        self.tool.is_match(tool)
    }
}

impl Policy {
    /// Reads every layer for `workspace`: the managed file (`policy.managed_file`), the
    /// project's (`.toolslot/policy.toml`), the user's (`~/.toolslot/policy.toml`), then the
    /// configuration's rules and hooks. A missing file is a layer without rules.
    ///
    /// The project's file may always restrict, but its allow rules apply only when the store
    /// of trusted files (`policy.trust_file`) holds the SHA-256 of the very bytes read here;
    /// otherwise they are kept aside ([`Policy::not_applied`], [`Policy::untrusted`]) and the
    /// session is told. Trust that cannot be read (no store configured, a store that does not
    /// parse) is no trust: the allow rules are not applied, and the reason is told with them.
    ///
    /// # Errors
    /// A [`PolicyError`] in one line naming the file and rule: an unreadable or malformed file,
    /// a rule that does not compile, an example that misbehaves, `allow_override` or
    /// `forbid_full_auto` outside the managed file, hooks in a project's file (a checkout must
    /// not bring programs that run on their own).
    pub fn load(config: &Config, workspace: &Path) -> Result<Policy, PolicyError> {
        let mut policy = Policy::empty();
        policy.limits = super::Limits::of(config);
        policy.project_file = workspace.join(PROJECT_FILE);
        let user = expand_home(USER_FILE);
        let managed = expand_home(&config.policy.managed_file);
        // The home folder as workspace: its project file is the user's, read once, as the user's.
        let same = |a: &Path, b: &Path| a.canonicalize().ok().is_some_and(|a| b.canonicalize().ok() == Some(a));
        let project = (!same(&policy.project_file, &user)).then(|| policy.project_file.clone());
        let layers = [
            (LayerKind::Managed, Some(managed)),
            (LayerKind::Project, project),
            (LayerKind::User, Some(user)),
        ];
        for (kind, path) in layers {
            let Some(path) = path else { continue };
            let project = (kind == LayerKind::Project).then_some((workspace, config.policy.project_file_max_bytes));
            let Some((file, digest)) = read(&path, project)? else { continue };
            let not_here = |key: &str| PolicyError::NotHere {
                path: path.clone(),
                reason: format!("`{key}` belongs in the managed policy file only"),
            };
            if kind != LayerKind::Managed {
                if file.policy.allow_override.is_some() {
                    return Err(not_here("allow_override"));
                }
                if file.policy.forbid_full_auto.is_some() {
                    return Err(not_here("forbid_full_auto"));
                }
            } else {
                policy.allow_override = file.policy.allow_override.unwrap_or(true);
                policy.forbid_full_auto = file.policy.forbid_full_auto.unwrap_or(false);
            }
            if kind == LayerKind::Project && !file.hooks.is_empty() {
                return Err(PolicyError::NotHere {
                    path,
                    reason: "hooks may not be declared in a project's policy file: a checkout must not bring programs that run by themselves (declare them in the user's or managed file, or the config)".into(),
                });
            }
            let shown = path.display().to_string();
            let place = format!("{} policy {shown}", kind.name());
            let allows = file.policy.rules.iter().filter(|r| r.decision == RuleDecision::Allow).count();
            // Trust is looked up only where it matters: a file without allow rules cannot
            // loosen anything, and an unreadable store must not stop its deny rules.
            let untrusted = (kind == LayerKind::Project && allows > 0)
                .then(|| distrust(config, workspace, &digest))
                .flatten();
            policy.add_rules(&file.policy.rules, kind, Some(shown), &place, workspace, untrusted.is_none())?;
            if let Some(why) = untrusted {
                let dir = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
                policy.untrusted = Some(Untrusted {
                    file: dir.join(PROJECT_FILE),
                    dir,
                    why,
                    ignored: allows,
                });
            }
            policy.add_hooks(&file.hooks, kind, &place, path.parent())?;
            policy.files.push(path);
        }
        let shown = config.source_file.as_ref().map(|p| p.display().to_string());
        let place = match &shown {
            Some(f) => format!("config {f}"),
            None => "config".to_string(),
        };
        policy.add_rules(&config.policy.rules, LayerKind::Config, shown, &place, workspace, true)?;
        let base = config.source_file.as_deref().and_then(Path::parent);
        policy.add_hooks(&config.hooks, LayerKind::Config, &place, base)?;
        Ok(policy)
    }

    /// Compiles and checks `rules`; with `apply_allows` false (an untrusted project file) its
    /// allow rules are kept aside, checked like the rest but never applied.
    pub(super) fn add_rules(
        &mut self,
        rules: &[RuleConfig],
        layer: LayerKind,
        file: Option<String>,
        place: &str,
        workspace: &Path,
        apply_allows: bool,
    ) -> Result<(), PolicyError> {
        for (index, written) in rules.iter().enumerate() {
            let at = RuleRef {
                layer,
                file: file.clone(),
                index,
            };
            let rule = Rule::compile(written, at, place)?.limited(self.limits);
            examples::check(&rule, place, workspace)?;
            if apply_allows || rule.decision() != RuleDecision::Allow {
                self.rules.push(rule);
            } else {
                self.not_applied.push(rule);
            }
        }
        Ok(())
    }

    /// Adds `hooks`; a word of a hook's command that starts with `./` or `../` is a path relative
    /// to `base`, the folder of the file that declares it (hooks run in the workspace).
    fn add_hooks(&mut self, hooks: &[HookConfig], layer: LayerKind, place: &str, base: Option<&Path>) -> Result<(), PolicyError> {
        for (index, config) in hooks.iter().enumerate() {
            let mut config = config.clone();
            if let Some(base) = base.filter(|b| !b.as_os_str().is_empty()) {
                for word in &mut config.command {
                    if word.starts_with("./") || word.starts_with("../") {
                        *word = base.join(&*word).display().to_string();
                    }
                }
            }
            let config = &config;
            let bad = |reason: String| PolicyError::Rule {
                place: format!("{place} hooks"),
                index,
                tool: config.tool.clone(),
                reason,
            };
            if config.command.is_empty() {
                return Err(bad("a hook needs a command".into()));
            }
            let tool = Glob::new(&config.tool, Kind::Text).map_err(|e| bad(format!("tool: {e}")))?;
            self.hooks.push(Hook {
                config: config.clone(),
                layer,
                tool,
            });
        }
        Ok(())
    }
}

/// Why `workspace`'s project policy file, whose bytes hash to `digest`, is not trusted; `None`
/// when it is.
fn distrust(config: &Config, workspace: &Path, digest: &str) -> Option<Distrust> {
    let store = match trust::store_path(&config.policy, Some(workspace)).and_then(|p| TrustStore::read(&p)) {
        Ok(store) => store,
        Err(e) => return Some(Distrust::Unusable(e.to_string())),
    };
    let key = match trust::trust_key(workspace) {
        Ok(key) => key,
        Err(e) => return Some(Distrust::Unusable(e.to_string())),
    };
    // The key is the canonical path of the file whose bytes were hashed (the workspace's
    // own, which `trust_key` checks it resolves to).
    match store.state(&key, digest) {
        TrustState::Trusted => None,
        TrustState::Changed => Some(Distrust::Changed),
        TrustState::Unknown => Some(Distrust::Never),
    }
}

/// A policy file and the SHA-256 of the bytes it was parsed from, or `None` when there is none.
/// The digest is of these very bytes, so that trust is given to what was read. The project's
/// file (`project`: the workspace and the size read at most) is read only as the workspace's
/// own ([`super::read_project_file`]); the user's and the managed file are the user's and the
/// organisation's, read as they are.
fn read(path: &PathBuf, project: Option<(&Path, u64)>) -> Result<Option<(PolicyFile, String)>, PolicyError> {
    let unreadable = |reason: String| PolicyError::File {
        path: path.clone(),
        reason,
    };
    let bytes = match project {
        Some((workspace, max_bytes)) => match super::read_project_file(workspace, max_bytes).map_err(unreadable)? {
            Some(b) => b,
            None => return Ok(None),
        },
        None => match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(unreadable(e.to_string())),
        },
    };
    let digest = trust::sha256_hex(&bytes);
    let text = String::from_utf8(bytes).map_err(|e| unreadable(format!("not UTF-8: {e}")))?;
    toml::from_str(&text).map(|f| Some((f, digest))).map_err(|e| {
        // The parser's report spans lines (a snippet of the file); one line is what is shown:
        // where, then what.
        let shown = e.to_string();
        let at = shown.lines().next().unwrap_or("malformed TOML");
        PolicyError::File {
            path: path.clone(),
            reason: format!("{at}: {}", e.message().lines().next().unwrap_or("")),
        }
    })
}
