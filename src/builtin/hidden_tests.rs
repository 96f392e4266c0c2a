//! What a path deny rule names, against the tools that read: the walks skip it, read_file
//! refuses it by any spelling, and the programs exec_shell starts see only the sandbox's mask.
//! The tools run here as the pipeline runs them after the rules judged the call, so whatever
//! the words did not name is held by the tool or the sandbox alone.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Value, json};

use super::*;
use crate::config::{Config, SandboxMode};
use crate::policy::Policy;
use crate::tool::{Grant, HiddenPaths, NoServices, SessionServices, ToolContext, ToolFinder, ToolOutput};

const SECRET: &str = "TOPSECRET-4b7a";

/// Services that know nothing but the session's policy.
struct Hiding(Arc<Policy>);

impl SessionServices for Hiding {
    fn file_read_state(&self, _path: &Path) -> Option<SystemTime> {
        None
    }
    fn record_file_state(&self, _path: &Path, _modified: SystemTime) {}
    fn activate_tools(&self, _names: &[String]) {}
    fn search_index(&self) -> Option<Arc<dyn ToolFinder>> {
        None
    }
    fn load_overflow(&self, id: &str) -> Result<String, ToolError> {
        NoServices.load_overflow(id)
    }
    fn hidden(&self) -> Option<Arc<dyn HiddenPaths>> {
        Some(Arc::clone(&self.0) as Arc<dyn HiddenPaths>)
    }
}

struct Bed {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    config: Arc<Config>,
    policy: Arc<Policy>,
}

impl Bed {
    /// A workspace holding `secrets/prod.key`, a link to it and a link to its folder, under a
    /// policy that denies `secrets/**` to every tool.
    fn new(sandbox: SandboxMode) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap().join("ws");
        std::fs::create_dir_all(ws.join("secrets")).unwrap();
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::write(ws.join("secrets/prod.key"), format!("{SECRET}\n")).unwrap();
        std::fs::write(ws.join("src/main.rs"), "fn main() {} // not TOPSECRET-free, says the grep\n").unwrap();
        std::os::unix::fs::symlink("secrets/prod.key", ws.join("key-link")).unwrap();
        std::os::unix::fs::symlink("secrets", ws.join("dir-link")).unwrap();
        let managed = dir.path().join("managed.toml");
        std::fs::write(
            &managed,
            "[[policy.rules]]\ntool = \"*\"\ndecision = \"deny\"\npath = \"secrets/**\"\n",
        )
        .unwrap();
        let mut config = Config::builtin();
        config.policy.managed_file = managed.display().to_string();
        config.policy.trust_file = String::new();
        config.shell.sandbox = sandbox;
        let policy = Arc::new(Policy::load(&config, &ws).unwrap());
        Self {
            _dir: dir,
            ws,
            config: Arc::new(config),
            policy,
        }
    }

    fn run(&self, tool: &dyn ToolSpec, grant: Grant, input: Value) -> Result<ToolOutput, ToolError> {
        let ctx = ToolContext {
            session_id: "s1".into(),
            workspace: self.ws.clone(),
            call_id: "c".into(),
            index: 0,
            config: Arc::clone(&self.config),
            services: Arc::new(Hiding(Arc::clone(&self.policy))),
            grant,
        };
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(tool.run(input, &ctx))
    }

    fn text(&self, tool: &dyn ToolSpec, grant: Grant, input: Value) -> String {
        match self.run(tool, grant, input) {
            Ok(out) => format!("{}{}", out.content, out.trailer.unwrap_or_default()),
            Err(e) => e.message,
        }
    }
}

const READ: Grant = Grant {
    write: false,
    network: false,
};
const WRITE: Grant = Grant {
    write: true,
    network: false,
};

#[test]
fn the_walking_tools_skip_what_the_policy_denies() {
    let bed = Bed::new(SandboxMode::Auto);
    let found = bed.text(&GrepFiles, READ, json!({"pattern": "TOPSECRET"}));
    assert!(!found.contains(SECRET), "{found}");
    assert!(found.contains("src/main.rs"), "the rest is searched: {found}");
    assert!(found.contains("paths the policy denies were not searched"), "{found}");
    let listed = bed.text(&ListDir, READ, json!({"depth": 3}));
    assert!(!listed.contains("secrets") && !listed.contains("prod.key"), "{listed}");
    assert!(listed.contains("src/main.rs") && listed.contains("not listed"), "{listed}");
    // A link to the secret is the secret: read_file opens what the link leads to.
    let err = bed.run(&ReadFile, READ, json!({"path": "key-link"})).unwrap_err();
    assert_eq!(err.category, crate::tool::ErrorCategory::NotApproved, "{}", err.message);
    assert!(!err.message.contains(SECRET));
    let found = bed.text(&GrepFiles, READ, json!({"pattern": "TOPSECRET", "path": "dir-link"}));
    assert!(!found.contains(SECRET), "{found}");
}

#[test]
fn the_sandbox_masks_what_the_policy_denies_from_every_spelling() {
    let commands = [
        "grep -r TOPSECRET .",
        "cat secrets/prod.key",
        "cat key-link",
        "cat dir-link/prod.key",
        "cd src && cat ../secrets/prod.key",
        "tar cf - . | tr -c 'A-Z0-9-' ' '",
        "find . -type f -exec cat {} +",
        "ln -s secrets s2 && cat s2/prod.key",
        "python3 -c \"print(open('sec'+'rets/prod.key').read())\"",
    ];
    let command_for = |c: &str| json!({"command": c});
    for mode in [SandboxMode::Bwrap, SandboxMode::Landlock] {
        let bed = Bed::new(mode);
        let shell = ExecShell::new(&bed.config);
        // Under Landlock only a call that may not write the workspace can have the secret
        // carved out of it (see `sandbox/mask.rs`).
        let grants: &[Grant] = if mode == SandboxMode::Bwrap { &[READ, WRITE] } else { &[READ] };
        for grant in grants {
            for c in commands {
                let out = bed.text(&shell, *grant, command_for(c));
                assert!(!out.contains(SECRET), "{mode:?} {grant:?} `{c}` read the secret: {out}");
            }
        }
        // What is not hidden is still read.
        let out = bed.text(&shell, READ, command_for("cat src/main.rs"));
        assert!(out.contains("fn main"), "{mode:?}: {out}");
        assert_eq!(
            std::fs::read_to_string(bed.ws.join("secrets/prod.key")).unwrap(),
            format!("{SECRET}\n")
        );
    }
    // Under bubblewrap a program cleared to write cannot remove or replace it either.
    let bed = Bed::new(SandboxMode::Bwrap);
    let shell = ExecShell::new(&bed.config);
    let _ = bed.text(&shell, WRITE, command_for("rm -rf secrets; echo x > secrets/prod.key"));
    assert_eq!(
        std::fs::read_to_string(bed.ws.join("secrets/prod.key")).unwrap(),
        format!("{SECRET}\n")
    );
}

#[test]
fn landlock_refuses_what_it_cannot_mask_inside_a_workspace_the_call_may_write() {
    // Landlock allows hierarchies and cannot take a folder out of a writable one: rather than
    // let a program cleared to write the workspace read what the policy denies there, the
    // Landlock backend does not run it, and says why.
    let bed = Bed::new(SandboxMode::Landlock);
    let shell = ExecShell::new(&bed.config);
    let out = bed.text(&shell, WRITE, json!({"command": "cat key-link; touch ran-anyway"}));
    assert!(!out.contains(SECRET), "{out}");
    assert!(out.contains("cannot hide") && out.contains("bubblewrap"), "{out}");
    assert!(!bed.ws.join("ran-anyway").exists(), "nothing runs: {out}");
    // A call that may not write has the path carved out, and runs.
    let out = bed.text(&shell, READ, json!({"command": "cat key-link; cat src/main.rs"}));
    assert!(!out.contains(SECRET) && out.contains("fn main"), "{out}");
}
