//! `approve_for_project`: the host's approval written as an allow rule into the project's policy
//! file, for the call's approval key, so that later sessions in the workspace run such calls
//! without asking; and `toolslot trust`: which project files' allow rules apply at all.
//!
//! The file is protected from the model's tools (`tools.protected`, and read-only in the
//! sandbox); writing it is toolslot's own act, on the host's word. The file keeps its comments
//! and layout, and is replaced atomically. A project file's allow rules apply only while the
//! store of trusted files (`policy.trust_file`, see `policy::trust`) holds its content's
//! SHA-256: a rule the host approved is such content, so the new content is trusted when the
//! file was trusted before (or did not exist); a file the repository brought untrusted stays
//! untrusted, rule and all, since trusting it would trust what the repository wrote.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::config::PolicyConfig;
use crate::policy::trust::{self, Distrust, TrustState, TrustStore};
use crate::policy::{PROJECT_FILE, PolicyError, SHELL_TOOLS, TrustError, with_allow_rule};

/// What `approve_for_project` did: the rule is in `file`; whether later sessions apply it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectRule {
    /// The project's policy file.
    pub file: PathBuf,
    /// The workspace (canonical where it can be), for `toolslot trust`.
    pub dir: PathBuf,
    /// Why the file is not trusted (it was not before the rule was written, or its new
    /// content could not be recorded): the rule applies in later sessions only once the user
    /// trusts it. `None` when it is trusted.
    pub untrusted: Option<Distrust>,
}

impl ProjectRule {
    /// The host's notice that the rule for `approval_key` was written, and whether it applies.
    pub fn message(&self, approval_key: &str) -> String {
        let added = format!("an allow rule for `{approval_key}` was added to {}", self.file.display());
        match &self.untrusted {
            None => added,
            Some(why) => format!(
                "{added}, but the file is not trusted ({}), so later sessions do not apply it until the file is reviewed and trusted (`{}`); approved for this session",
                why.reason(),
                trust::trust_command(&self.dir)
            ),
        }
    }
}

/// Adds an allow rule for calls of `tool` with `approval_key` (the call that was approved had
/// `input`) to `workspace`'s `.toolslot/policy.toml`, creating it when missing, and records the
/// new content as trusted when the file was trusted before (or did not exist).
///
/// # Errors
/// [`PolicyError::Write`] when the rule would never apply (a shell command that is not plain is
/// never allowed by a rule, so the host's approval is kept for the session only) or the file
/// cannot be read, parsed or written. Trust that cannot be read or recorded is no error: the
/// rule is written and [`ProjectRule::untrusted`] says why it does not apply.
pub fn allow_in_project(
    config: &PolicyConfig,
    workspace: &Path,
    tool: &str,
    approval_key: &str,
    input: &Value,
) -> Result<ProjectRule, PolicyError> {
    let path = workspace.join(PROJECT_FILE);
    let fail = |reason: String| PolicyError::Write {
        path: path.clone(),
        reason,
    };
    if SHELL_TOOLS.contains(&tool) {
        let plain = input
            .get("command")
            .and_then(Value::as_str)
            .is_some_and(|c| crate::shell::parse(c).is_plain());
        if !plain {
            return Err(fail(
                "the command is not plain, and no rule allows a command that is not plain".into(),
            ));
        }
    }
    let before = crate::policy::read_project_file(workspace, config.project_file_max_bytes).map_err(fail)?;
    let existing = match &before {
        Some(bytes) => String::from_utf8(bytes.clone()).map_err(|e| fail(format!("not UTF-8: {e}")))?,
        None => String::new(),
    };
    // Trust before the write decides trust after it: a file that was not there brought
    // nothing, one that was must have been trusted with exactly these bytes.
    let distrust = before.as_deref().and_then(|bytes| distrust(config, workspace, bytes));
    let shown = crate::canonical::canonical_json(input);
    let shown: String = shown.chars().take(200).collect();
    let note = format!("Approved for the project by the host (approve_for_project), first for {tool} {shown}");
    let text = with_allow_rule(&existing, tool, approval_key, &note).map_err(fail)?;
    let changed = before.is_none() || text != existing;
    if changed {
        // Through a handle on the folder just checked: a program cleared to write that swaps
        // `.toolslot` for a link meanwhile does not get the rule written through it.
        crate::policy::write_project_file(workspace, text.as_bytes()).map_err(fail)?;
        // A program cleared to write that runs meanwhile must not undo it when it ends.
        crate::sandbox::written_by_toolslot(workspace, text.as_bytes());
    }
    let untrusted = match distrust {
        Some(why) => Some(why),
        None if !changed => None,
        None => record(config, workspace, text.as_bytes())
            .err()
            .map(|e| Distrust::Unusable(e.to_string())),
    };
    Ok(ProjectRule {
        dir: workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf()),
        file: path,
        untrusted,
    })
}

/// Why `workspace`'s project file, whose bytes are `bytes`, is not trusted; `None` when it is.
fn distrust(config: &PolicyConfig, workspace: &Path, bytes: &[u8]) -> Option<Distrust> {
    let state = trust::store_path(config, Some(workspace))
        .and_then(|p| TrustStore::read(&p))
        .and_then(|store| Ok(store.state(&trust::trust_key(workspace)?, &trust::sha256_hex(bytes))));
    match state {
        Ok(TrustState::Trusted) => None,
        Ok(TrustState::Changed) => Some(Distrust::Changed),
        Ok(TrustState::Unknown) => Some(Distrust::Never),
        Err(e) => Some(Distrust::Unusable(e.to_string())),
    }
}

/// Records `bytes` as the trusted content of `workspace`'s project file.
fn record(config: &PolicyConfig, workspace: &Path, bytes: &[u8]) -> Result<TrustedFile, TrustError> {
    let store_path = trust::store_path(config, Some(workspace))?;
    let key = trust::trust_key(workspace)?;
    let sha256 = trust::sha256_hex(bytes);
    changing(&store_path, |store| {
        store.trust(&key, sha256.clone());
        true
    })?;
    Ok(TrustedFile {
        file: key.as_path().to_path_buf(),
        sha256,
        state: FileState::Trusted,
    })
}

/// Reads the store at `path`, lets `change` change it, and writes it when `change` says it
/// did; whether it did. The store's lock file (`<store>.lock`) is held exclusively
/// meanwhile: two `toolslot trust` (or approvals for two projects) at once would otherwise
/// each write the store as they read it, and one entry would be lost.
fn changing(path: &Path, change: impl FnOnce(&mut TrustStore) -> bool) -> Result<bool, TrustError> {
    let failed = |reason: String| TrustError::Write {
        path: path.to_path_buf(),
        reason,
    };
    let mut lock_path = path.as_os_str().to_owned();
    lock_path.push(".lock");
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| failed(e.to_string()))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.create(true).truncate(false).write(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let lock = options
        .open(&lock_path)
        .map_err(|e| failed(format!("its lock file cannot be opened: {e}")))?;
    lock.lock().map_err(|e| failed(format!("its lock file cannot be locked: {e}")))?;
    let mut store = TrustStore::read(path)?;
    let changed = change(&mut store);
    if changed {
        write_store(path, &store)?;
    }
    Ok(changed)
}

fn write_store(path: &Path, store: &TrustStore) -> Result<(), TrustError> {
    crate::output::write_atomic(path, store.to_toml().as_bytes(), "the trust store")
        .map(|_| ())
        .map_err(|e| TrustError::Write {
            path: path.to_path_buf(),
            reason: e.message,
        })
}

/// A trusted project policy file, as `toolslot trust` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TrustedFile {
    /// Its canonical path.
    pub file: PathBuf,
    /// The SHA-256 (hex) of the content trusted.
    pub sha256: String,
    /// Whether it still has that content.
    pub state: FileState,
}

/// Whether a trusted file still has the content that was trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileState {
    /// It does: its allow rules apply.
    Trusted,
    /// It changed: its allow rules do not apply until it is trusted again.
    Changed,
    /// It is gone (or unreadable).
    Missing,
}

/// `toolslot trust DIR`: trusts the present content of `workspace`'s project policy file, so
/// that its allow rules apply (until it changes).
///
/// # Errors
/// A [`TrustError`]: no store configured or one a checkout could hold, no project file (or a
/// link out of the workspace), a store that cannot be read or written.
pub fn trust_project(config: &PolicyConfig, workspace: &Path) -> Result<TrustedFile, TrustError> {
    let key = trust::trust_key(workspace)?;
    let project = |reason: String| TrustError::Project {
        path: key.as_path().to_path_buf(),
        reason,
    };
    let bytes = crate::policy::read_project_file(workspace, config.project_file_max_bytes)
        .map_err(project)?
        .ok_or_else(|| project("there is no project policy file".into()))?;
    record(config, workspace, &bytes)
}

/// `toolslot trust --revoke DIR`: forgets `workspace`'s project policy file (its allow rules
/// stop applying). Returns the file and whether it was trusted.
///
/// # Errors
/// A [`TrustError`]: no store configured, or a store that cannot be read or written.
pub fn revoke_project(config: &PolicyConfig, workspace: &Path) -> Result<(PathBuf, bool), TrustError> {
    let store_path = trust::store_path(config, None)?;
    // The file may be gone: then its key is where it was.
    let key = trust::trust_key(workspace).ok().or_else(|| {
        let dir = workspace.canonicalize().or_else(|_| std::path::absolute(workspace)).ok()?;
        trust::TrustKey::from_canonical(&dir.join(PROJECT_FILE))
    });
    let Some(key) = key else {
        return Err(TrustError::Project {
            path: workspace.join(PROJECT_FILE),
            reason: "its path is not UTF-8".into(),
        });
    };
    let was = changing(&store_path, |store| store.revoke(&key))?;
    Ok((key.as_path().to_path_buf(), was))
}

/// `toolslot trust --list`: every trusted file, and whether it still has the content trusted.
///
/// # Errors
/// A [`TrustError`]: no store configured, or a store that cannot be read.
pub fn trusted_projects(config: &PolicyConfig) -> Result<Vec<TrustedFile>, TrustError> {
    let store = TrustStore::read(&trust::store_path(config, None)?)?;
    Ok(store
        .entries()
        .map(|(file, sha256)| {
            let state = match std::fs::read(file) {
                Ok(bytes) if trust::sha256_hex(&bytes) == sha256 => FileState::Trusted,
                Ok(_) => FileState::Changed,
                Err(_) => FileState::Missing,
            };
            TrustedFile {
                file: PathBuf::from(file),
                sha256: sha256.to_string(),
                state,
            }
        })
        .collect())
}

/// The files a session's policy is read from that lie in its workspace: no program the model
/// drives may change them (the sandbox binds them read-only).
pub fn protected_in(workspace: &Path) -> Vec<PathBuf> {
    vec![workspace.join(".toolslot")]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, RuleDecision};
    use crate::policy::trust::Distrust;
    use crate::policy::{Call, Policy};
    use serde_json::json;

    /// A workspace, and a config whose trust store and managed file lie in a folder of their
    /// own (never the real home).
    struct Bed {
        ws: tempfile::TempDir,
        home: tempfile::TempDir,
    }

    impl Bed {
        fn new() -> Self {
            Self {
                ws: tempfile::tempdir().unwrap(),
                home: tempfile::tempdir().unwrap(),
            }
        }
        fn config(&self) -> Config {
            let mut config = Config::builtin();
            config.policy.managed_file = "/nonexistent".into();
            config.policy.trust_file = self.home.path().join("trusted.toml").display().to_string();
            config
        }
        fn allow_shell(&self, command: &str) -> Result<ProjectRule, PolicyError> {
            let key = crate::shell::approval_key(command);
            allow_in_project(
                &self.config().policy,
                self.ws.path(),
                "exec_shell",
                &key,
                &json!({ "command": command }),
            )
        }
        fn decides(&self, command: &str) -> Option<RuleDecision> {
            let policy = Policy::load(&self.config(), self.ws.path()).unwrap();
            let input = json!({ "command": command });
            let key_of = || crate::shell::approval_key(command);
            policy.evaluate(&Call::new("exec_shell", &input, self.ws.path(), &key_of)).decision
        }
        fn project_file(&self, text: &str) {
            std::fs::create_dir_all(self.ws.path().join(".toolslot")).unwrap();
            std::fs::write(self.ws.path().join(PROJECT_FILE), text).unwrap();
        }
    }

    #[test]
    fn trusting_many_projects_at_once_loses_none() {
        let home = tempfile::tempdir().unwrap();
        let mut config = Config::builtin();
        config.policy.trust_file = home.path().join("trusted.toml").display().to_string();
        let workspaces: Vec<tempfile::TempDir> = (0..12)
            .map(|i| {
                let ws = tempfile::tempdir().unwrap();
                std::fs::create_dir_all(ws.path().join(".toolslot")).unwrap();
                std::fs::write(ws.path().join(PROJECT_FILE), format!("# project {i}\n")).unwrap();
                ws
            })
            .collect();
        std::thread::scope(|s| {
            for ws in &workspaces {
                let policy = &config.policy;
                s.spawn(move || {
                    for _ in 0..4 {
                        trust_project(policy, ws.path()).unwrap();
                    }
                });
            }
        });
        let trusted = trusted_projects(&config.policy).unwrap();
        assert_eq!(trusted.len(), workspaces.len(), "{trusted:?}");
        assert!(trusted.iter().all(|t| t.state == FileState::Trusted));
    }

    /// Runs a program cleared to write `bed`'s workspace under `mode` for half a second, calling
    /// `meanwhile` while it runs.
    fn while_a_program_cleared_to_write_runs(bed: &Bed, mode: crate::config::SandboxMode, meanwhile: impl FnOnce()) {
        use crate::sandbox::{Grant, Request, View, command};
        let config = bed.config();
        let mut shell = config.shell.clone();
        shell.sandbox = mode;
        let args = ["-c".to_string(), "sleep 0.5".to_string()];
        let req = Request {
            program: "sh",
            args: &args,
            workspace: bed.ws.path(),
            grant: Grant {
                write: true,
                network: false,
            },
            view: View::Full,
            keep_env: &[],
            shell: &shell,
            hidden: &[],
            session: None,
            policy: Some(&config.policy),
        };
        let mut running = command(&req).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let child = running.spawn().await.unwrap();
            running.guard.spawned();
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            meanwhile();
            assert!(child.wait_with_output().await.unwrap().status.success());
        });
    }

    #[test]
    fn a_rule_approved_while_a_program_cleared_to_write_runs_outlives_its_end() {
        // The program's end puts the policy back as it was: not as it was before the rule.
        use crate::config::SandboxMode;
        for mode in [SandboxMode::Bwrap, SandboxMode::Landlock, SandboxMode::None] {
            for had_policy in [false, true] {
                let bed = Bed::new();
                if had_policy {
                    bed.project_file("# the team's\n");
                }
                while_a_program_cleared_to_write_runs(&bed, mode, || {
                    bed.allow_shell("cargo build").unwrap();
                });
                let text = std::fs::read_to_string(bed.ws.path().join(PROJECT_FILE)).unwrap_or_default();
                assert!(
                    text.contains("exec_shell:cargo build") && (!had_policy || text.contains("the team's")),
                    "{mode:?}, a policy before: {had_policy}: the approved rule was undone: {text:?}"
                );
                if !had_policy {
                    assert_eq!(bed.decides("cargo build"), Some(RuleDecision::Allow), "{mode:?}");
                }
            }
            // Written and trusted by another process (another toolslot's approval, the user's
            // `toolslot trust`): this process has no record of it, the trust store has.
            let bed = Bed::new();
            bed.project_file("# the team's\n");
            let trusted = "# the team's\n[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"allow\"\n";
            while_a_program_cleared_to_write_runs(&bed, mode, || {
                std::fs::write(bed.ws.path().join(PROJECT_FILE), trusted).unwrap();
                trust_project(&bed.config().policy, bed.ws.path()).unwrap();
            });
            let text = std::fs::read_to_string(bed.ws.path().join(PROJECT_FILE)).unwrap();
            assert_eq!(text, trusted, "{mode:?}: a policy the user trusts was undone");
            // Bytes nobody trusts, written meanwhile, are put back as before.
            let bed = Bed::new();
            bed.project_file("# the team's\n");
            while_a_program_cleared_to_write_runs(&bed, mode, || {
                std::fs::write(bed.ws.path().join(PROJECT_FILE), "# forged\n").unwrap();
            });
            let text = std::fs::read_to_string(bed.ws.path().join(PROJECT_FILE)).unwrap();
            assert_eq!(text, "# the team's\n", "{mode:?}");
        }
    }

    #[test]
    fn the_rule_is_written_and_loads_and_allows() {
        let bed = Bed::new();
        let rule = bed.allow_shell("cargo build").unwrap();
        assert_eq!(rule.untrusted, None, "a file toolslot created holds only what the host approved");
        let text = std::fs::read_to_string(&rule.file).unwrap();
        assert!(
            text.contains("approve_for_project") && text.contains("exec_shell:cargo build"),
            "{text}"
        );
        assert_eq!(bed.decides("cargo build --release"), Some(RuleDecision::Allow));
        assert_eq!(bed.decides("cargo build --config x"), None, "an exact key is not the loose one");
        // A second rule into the trusted file keeps it trusted.
        let rule = bed.allow_shell("cargo test").unwrap();
        assert_eq!(rule.untrusted, None);
        assert_eq!(bed.decides("cargo test"), Some(RuleDecision::Allow));
        assert_eq!(bed.decides("cargo build"), Some(RuleDecision::Allow));
    }

    #[test]
    fn a_rule_written_into_a_file_the_repository_brought_does_not_trust_it() {
        let bed = Bed::new();
        let hostile = "[[policy.rules]]\ntool = \"*\"\ndecision = \"allow\"\n";
        bed.project_file(hostile);
        let rule = bed.allow_shell("cargo build").unwrap();
        assert_eq!(rule.untrusted, Some(Distrust::Never));
        let message = rule.message("exec_shell:cargo build");
        assert!(message.contains("not trusted") && message.contains("toolslot trust"), "{message}");
        let text = std::fs::read_to_string(&rule.file).unwrap();
        assert!(text.starts_with(hostile) && text.contains("exec_shell:cargo build"), "{text}");
        // Neither the repository's rule nor the host's applies until the user trusts the file.
        assert_eq!(bed.decides("cargo build"), None);
        assert_eq!(bed.decides("rm -rf x"), None);
        trust_project(&bed.config().policy, bed.ws.path()).unwrap();
        assert_eq!(bed.decides("rm -rf x"), Some(RuleDecision::Allow));
    }

    #[test]
    fn trust_that_cannot_be_recorded_leaves_the_rule_untrusted() {
        let bed = Bed::new();
        let mut config = bed.config();
        config.policy.trust_file = String::new();
        let key = crate::shell::approval_key("cargo build");
        let rule = allow_in_project(
            &config.policy,
            bed.ws.path(),
            "exec_shell",
            &key,
            &json!({"command": "cargo build"}),
        )
        .unwrap();
        assert!(
            matches!(&rule.untrusted, Some(Distrust::Unusable(why)) if why.contains("trust_file")),
            "{rule:?}"
        );
        assert!(rule.file.exists());
    }

    #[test]
    fn trust_list_and_revoke() {
        let bed = Bed::new();
        let config = bed.config();
        let err = trust_project(&config.policy, bed.ws.path()).unwrap_err();
        assert!(err.to_string().contains("no project policy file"), "{err}");
        bed.project_file("[[policy.rules]]\ntool = \"write_file\"\ndecision = \"allow\"\n");
        let trusted = trust_project(&config.policy, bed.ws.path()).unwrap();
        assert_eq!(trusted.file, bed.ws.path().canonicalize().unwrap().join(PROJECT_FILE));
        let listed = trusted_projects(&config.policy).unwrap();
        assert_eq!(listed, vec![trusted.clone()]);
        bed.project_file("[[policy.rules]]\ntool = \"write_file\"\ndecision = \"allow\"\n ");
        assert_eq!(trusted_projects(&config.policy).unwrap()[0].state, FileState::Changed);
        assert_eq!(revoke_project(&config.policy, bed.ws.path()).unwrap(), (trusted.file.clone(), true));
        assert_eq!(revoke_project(&config.policy, bed.ws.path()).unwrap(), (trusted.file, false));
        assert!(trusted_projects(&config.policy).unwrap().is_empty());
    }

    #[test]
    fn a_command_that_is_not_plain_is_not_written() {
        let bed = Bed::new();
        let err = allow_in_project(
            &bed.config().policy,
            bed.ws.path(),
            "exec_shell",
            "exec_shell:exact:ls > x",
            &json!({"command": "ls > x"}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("not plain"));
        assert!(!bed.ws.path().join(PROJECT_FILE).exists());
    }
}
