//! What the policy hides from every way of reading: the paths its deny rules name by a `path`
//! glob alone ([`HiddenPaths`] for [`Policy`]).
//!
//! A deny rule with a `path` glob and no other matcher says "no tool of mine touches these".
//! Judging words cannot hold that alone: `grep -r KEY .` names no secret, and a program can
//! reach a file by a spelling no rule foresaw. So the files and folders such a rule names are
//! also screened out of the walks of the built-in tools ([`HiddenPaths::screen`]) and found
//! before a program starts ([`HiddenPaths::existing`]) for the sandbox to mask. A deny rule
//! with command words, an input matcher or a key denies calls, not paths, and hides nothing;
//! an ask rule hides nothing either, since the user may approve the read.

use std::path::{Path, PathBuf};

use super::Policy;
use super::glob::Glob;
use super::paths::{Root, clean, physical, relative};
use crate::tool::{HiddenPaths, Screen};

impl Policy {
    /// The globs of the deny rules that hide paths from `tool`.
    fn hiding(&self, tool: &str) -> Vec<Glob> {
        self.rules
            .iter()
            .filter(|r| r.applies_to(tool))
            .filter_map(|r| r.hiding().cloned())
            .collect()
    }
}

impl HiddenPaths for Policy {
    fn screen(&self, tool: &str, workspace: &Path) -> Option<Screen> {
        let globs = self.hiding(tool);
        if globs.is_empty() {
            return None;
        }
        let root = Root::new(workspace);
        let max = self.limits.mask_max_entries;
        // Where the names a rule matches really are, found once per screen and only when a
        // path its own spellings leave visible is asked about: a name the rule matches may be
        // a link (`.env -> notes/app.txt`) or lie under one (`config -> .cfg`), and the file
        // it leads to, masked from every program, must not be read under its own name by the
        // tools either. A search past `policy.mask_max_entries` leaves only the spellings.
        let masked: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
        Some(Box::new(move |path: &Path| {
            let resolved = physical(path);
            hidden_as(&globs, &root, path, resolved.as_deref()) || {
                let masked = masked.get_or_init(|| existing_of(&globs, &root, max).unwrap_or_default());
                resolved.is_some_and(|real| masked.iter().any(|m| real.starts_with(m)))
            }
        }))
    }

    fn existing(&self, tool: &str, workspace: &Path) -> Result<Vec<PathBuf>, String> {
        let globs = self.hiding(tool);
        if globs.is_empty() {
            return Ok(Vec::new());
        }
        existing_of(&globs, &Root::new(workspace), self.limits.mask_max_entries)
    }

    fn globs(&self, tool: &str) -> Vec<String> {
        self.hiding(tool).iter().map(|g| g.text().to_string()).collect()
    }
}

impl Policy {
    /// A policy that only hides `globs` (as [`HiddenPaths::globs`] gives them) from `tool`,
    /// within `config`'s limits: what a remote worker applies for the dispatcher's session.
    ///
    /// # Errors
    /// [`PolicyError`] for a glob that does not compile.
    pub fn hiding_only(
        config: &crate::config::Config,
        tool: &str,
        globs: &[String],
        workspace: &Path,
    ) -> Result<Policy, super::PolicyError> {
        let rules = globs
            .iter()
            .map(|glob| {
                serde_json::from_value(serde_json::json!({"tool": tool, "path": glob, "decision": "deny"})).map_err(|e| {
                    super::PolicyError::Rule {
                        place: "the dispatcher's hidden paths".into(),
                        index: 0,
                        tool: tool.to_string(),
                        reason: format!("`{glob}`: {e}"),
                    }
                })
            })
            .collect::<Result<Vec<crate::config::RuleConfig>, _>>()?;
        let mut policy = Policy::empty();
        policy.limits = super::Limits::of(config);
        policy.add_rules(
            &rules,
            super::LayerKind::Config,
            None,
            "the dispatcher's hidden paths",
            workspace,
            false,
        )?;
        Ok(policy)
    }
}

/// What exists of `globs`' files and folders, absolute with their links resolved, none inside
/// another, looking at no more than `max` entries (0: no limit).
fn existing_of(globs: &[Glob], root: &Root, max: usize) -> Result<Vec<PathBuf>, String> {
    let mut found = Vec::new();
    let mut budget = Budget {
        left: max,
        unlimited: max == 0,
    };
    for glob in globs {
        find(glob, root, &mut budget, &mut found)?;
    }
    Ok(crate::paths::outermost(&found))
}

/// Whether `path` (absolute) or a folder holding it matches one of `globs`, in the spelling its
/// words give or the one the kernel reaches (`resolved`, from [`physical`]).
fn hidden_as(globs: &[Glob], root: &Root, path: &Path, resolved: Option<&Path>) -> bool {
    let lexical = relative(&clean(path), root.lexical());
    let resolved = resolved.map(|p| relative(p, root.resolved()));
    std::iter::once(lexical)
        .chain(resolved)
        .any(|spelling| prefixes(&spelling).any(|p| globs.iter().any(|g| g.is_match(p) || wholly(g, p))))
}

/// `a`, `a/b`, `a/b/c` for `a/b/c`; `/x`, `/x/y` for `/x/y`.
fn prefixes(spelling: &str) -> impl Iterator<Item = &str> {
    spelling
        .char_indices()
        .filter(|(i, c)| *c == '/' && *i > 0)
        .map(|(i, _)| &spelling[..i])
        .chain(std::iter::once(spelling).filter(|s| !s.is_empty()))
}

/// What is left of `policy.mask_max_entries`.
struct Budget {
    left: usize,
    unlimited: bool,
}

impl Budget {
    fn spend(&mut self) -> Result<(), String> {
        if self.unlimited {
            return Ok(());
        }
        self.left = self.left.checked_sub(1).ok_or_else(|| {
            "the files a path deny rule names could not all be found: the search passed policy.mask_max_entries; raise it, or narrow the rule's path glob (a fixed folder first, as in `secrets/**`)".to_string()
        })?;
        Ok(())
    }
}

/// Adds to `found` what exists of `glob`'s files and folders: the walk starts at the glob's
/// fixed start (`secrets` for `secrets/**`), does not follow symlinks, and stops at a match (a
/// folder that matches, or whose every descendant would, is masked whole). A symlink that
/// matches counts as where it leads.
fn find(glob: &Glob, root: &Root, budget: &mut Budget, found: &mut Vec<PathBuf>) -> Result<(), String> {
    let base = if glob.is_absolute() {
        PathBuf::from("/")
    } else {
        root.resolved().to_path_buf()
    };
    let start = glob.fixed().iter().fold(base, |p, c| p.join(c));
    let spell = |p: &Path| relative(p, root.resolved());
    let mut stack = vec![start];
    while let Some(path) = stack.pop() {
        budget.spend()?;
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let spelling = spell(&path);
        let at_root = path == root.resolved();
        if !at_root && (glob.is_match(&spelling) || (meta.is_dir() && wholly(glob, &spelling))) {
            if let Ok(real) = path.canonicalize() {
                found.push(real);
            }
            continue;
        }
        if meta.is_dir()
            && let Ok(entries) = std::fs::read_dir(&path)
        {
            stack.extend(entries.flatten().map(|e| e.path()));
        }
    }
    Ok(())
}

/// Whether every path below the folder `spelling` matches `glob` (`secrets` for `secrets/**`),
/// tried with names no file has, one and two levels down.
fn wholly(glob: &Glob, spelling: &str) -> bool {
    const PROBE: &str = "\u{1}toolslot-probe";
    let sep = if spelling.is_empty() { "" } else { "/" };
    glob.is_match(&format!("{spelling}{sep}{PROBE}")) && glob.is_match(&format!("{spelling}{sep}{PROBE}/{PROBE}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn policy(ws: &Path, rules: &str) -> Policy {
        let file = ws.with_file_name("config.toml");
        let managed = ws.with_file_name("no-managed.toml");
        std::fs::write(
            &file,
            format!("[policy]\nmanaged_file = \"{}\"\ntrust_file = \"\"\n{rules}", managed.display()),
        )
        .unwrap();
        let config = Config::load_with_env(Some(&file), std::iter::empty()).unwrap();
        Policy::load(&config, ws).unwrap()
    }

    const DENY_SECRETS: &str = "[[policy.rules]]\ntool = \"*\"\ndecision = \"deny\"\npath = \"secrets/**\"\n[[policy.rules]]\ntool = \"*\"\ndecision = \"deny\"\npath = \"**/.env\"\n[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"deny\"\ncommand = [\"cat\"]\npath = \"docs/**\"\n[[policy.rules]]\ntool = \"read_file\"\ndecision = \"deny\"\npath = \"notes/**\"\n";

    fn bed() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap().join("ws");
        for d in ["secrets/deep", "src/app", "docs", "notes"] {
            std::fs::create_dir_all(ws.join(d)).unwrap();
        }
        for f in [
            "secrets/prod.key",
            "secrets/deep/x",
            "src/app/.env",
            ".env",
            "src/main.rs",
            "docs/a.md",
            "notes/n.txt",
        ] {
            std::fs::write(ws.join(f), "x").unwrap();
        }
        std::os::unix::fs::symlink(ws.join("secrets"), ws.join("current")).unwrap();
        (dir, ws)
    }

    #[test]
    fn what_a_path_deny_names_is_found_whole_and_only_that() {
        let (_dir, ws) = bed();
        let p = policy(&ws, DENY_SECRETS);
        // The folder whose every file is denied is masked whole; each `.env` alone; a deny rule
        // with command words hides nothing, and a rule of another tool hides nothing here.
        assert_eq!(
            p.existing("exec_shell", &ws).unwrap(),
            vec![ws.join(".env"), ws.join("secrets"), ws.join("src/app/.env")]
        );
        assert_eq!(
            p.existing("read_file", &ws).unwrap(),
            vec![ws.join(".env"), ws.join("notes"), ws.join("secrets"), ws.join("src/app/.env")]
        );
        assert!(policy(&ws, "").existing("exec_shell", &ws).unwrap().is_empty());
    }

    #[test]
    fn the_screen_sees_every_spelling_of_a_hidden_path() {
        let (_dir, ws) = bed();
        let p = policy(&ws, DENY_SECRETS);
        let screen = p.screen("grep_files", &ws).unwrap();
        // `current` leads to the hidden folder: it is that folder.
        for hidden in [
            "secrets",
            "secrets/prod.key",
            "secrets/deep/x",
            "current",
            "current/prod.key",
            "src/app/.env",
            "src/../secrets/x",
        ] {
            assert!(screen(&ws.join(hidden)), "{hidden}");
        }
        for shown in ["src", "src/main.rs", "docs/a.md", "notes/n.txt", "secretsx"] {
            assert!(!screen(&ws.join(shown)), "{shown}");
        }
        assert!(policy(&ws, "").screen("grep_files", &ws).is_none());
    }

    #[test]
    fn a_search_past_its_limit_is_an_error_naming_the_key() {
        let (_dir, ws) = bed();
        let mut p = policy(&ws, DENY_SECRETS);
        p.limits.mask_max_entries = 3;
        let err = p.existing("exec_shell", &ws).unwrap_err();
        assert!(err.contains("policy.mask_max_entries"), "{err}");
    }
}
