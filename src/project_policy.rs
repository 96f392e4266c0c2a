//! `approve_for_project`: the host's approval written as an allow rule into the project's policy
//! file, for the call's approval key, so that later sessions in the workspace run such calls
//! without asking.
//!
//! The file is protected from the model's tools (`tools.protected`, and read-only in the
//! sandbox); writing it is toolslot's own act, on the host's word. The file keeps its comments
//! and layout, and is replaced atomically.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::policy::{PROJECT_FILE, PolicyError, SHELL_TOOLS, with_allow_rule};

/// Adds an allow rule for calls of `tool` with `approval_key` (the call that was approved had
/// `input`) to `workspace`'s `.toolslot/policy.toml`, creating it when missing. Returns the
/// file.
///
/// # Errors
/// [`PolicyError::Write`] when the rule would never apply (a shell command that is not plain is
/// never allowed by a rule, so the host's approval is kept for the session only) or the file
/// cannot be read, parsed or written.
pub fn allow_in_project(workspace: &Path, tool: &str, approval_key: &str, input: &Value) -> Result<PathBuf, PolicyError> {
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
    let existing = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(fail(e.to_string())),
    };
    let shown = crate::canonical::canonical_json(input);
    let shown: String = shown.chars().take(200).collect();
    let note = format!("Approved for the project by the host (approve_for_project), first for {tool} {shown}");
    let text = with_allow_rule(&existing, tool, approval_key, &note).map_err(fail)?;
    if text != existing {
        crate::output::write_atomic(&path, text.as_bytes(), PROJECT_FILE).map_err(|e| fail(e.message))?;
    }
    Ok(path)
}

/// The files a session's policy is read from that lie in its workspace: no program the model
/// drives may change them (the sandbox binds them read-only).
pub fn protected_in(workspace: &Path) -> Vec<PathBuf> {
    vec![workspace.join(".toolslot")]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_rule_is_written_and_loads_and_allows() {
        let ws = tempfile::tempdir().unwrap();
        let input = json!({"command": "cargo build"});
        let key = crate::shell::approval_key("cargo build");
        let path = allow_in_project(ws.path(), "exec_shell", &key, &input).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("approve_for_project") && text.contains("exec_shell:cargo build"),
            "{text}"
        );
        let mut config = crate::config::Config::builtin();
        config.policy.managed_file = "/nonexistent".into();
        let policy = crate::policy::Policy::load(&config, ws.path()).unwrap();
        let release = json!({"command": "cargo build --release"});
        let key_of = || crate::shell::approval_key("cargo build --release");
        let v = policy.evaluate(&crate::policy::Call::new("exec_shell", &release, ws.path(), &key_of));
        assert_eq!(v.decision, Some(crate::config::RuleDecision::Allow));
        let evil = json!({"command": "cargo build --config x"});
        let key_of = || crate::shell::approval_key("cargo build --config x");
        let v = policy.evaluate(&crate::policy::Call::new("exec_shell", &evil, ws.path(), &key_of));
        assert_eq!(v.decision, None, "an exact key is not the loose one");
    }

    #[test]
    fn a_command_that_is_not_plain_is_not_written() {
        let ws = tempfile::tempdir().unwrap();
        let err = allow_in_project(ws.path(), "exec_shell", "exec_shell:exact:ls > x", &json!({"command": "ls > x"})).unwrap_err();
        assert!(err.to_string().contains("not plain"));
        assert!(!ws.path().join(PROJECT_FILE).exists());
    }
}
