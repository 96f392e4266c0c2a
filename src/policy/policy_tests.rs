use std::path::Path;

use serde_json::{Value, json};

use super::*;
use crate::config::Config;

/// A workspace, a home and a managed file, each with its policy text (or none).
struct Bed {
    dir: tempfile::TempDir,
}

impl Bed {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws/.toolslot")).unwrap();
        Self { dir }
    }
    fn ws(&self) -> std::path::PathBuf {
        self.dir.path().join("ws")
    }
    fn managed(&self) -> std::path::PathBuf {
        self.dir.path().join("managed.toml")
    }
    fn write(&self, path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
    }
    fn trust_file(&self) -> std::path::PathBuf {
        self.dir.path().join("home/trusted.toml")
    }
    fn config(&self, extra: &str) -> Config {
        let f = self.dir.path().join("config.toml");
        std::fs::write(
            &f,
            format!(
                "[policy]\nmanaged_file = \"{}\"\ntrust_file = \"{}\"\n{extra}",
                self.managed().display(),
                self.trust_file().display()
            ),
        )
        .unwrap();
        Config::load_with_env(Some(&f), std::iter::empty()).unwrap()
    }
    /// Trusts the project file's present content, as `toolslot trust` does.
    fn trust(&self) {
        let key = trust::trust_key(&self.ws()).unwrap();
        let mut store = trust::TrustStore::read(&self.trust_file()).unwrap();
        store.trust(&key, trust::sha256_hex(&std::fs::read(key.as_path()).unwrap()));
        std::fs::create_dir_all(self.dir.path().join("home")).unwrap();
        std::fs::write(self.trust_file(), store.to_toml()).unwrap();
    }
    fn load(&self, extra: &str) -> Result<Policy, PolicyError> {
        Policy::load(&self.config(extra), &self.ws())
    }
}

fn verdict(policy: &Policy, ws: &Path, tool: &str, input: Value) -> Verdict {
    let key = || format!("{tool}:key");
    policy.evaluate(&Call::new(tool, &input, ws, &key))
}

fn shell(policy: &Policy, ws: &Path, command: &str) -> Option<RuleDecision> {
    verdict(policy, ws, "exec_shell", json!({"command": command})).decision
}

#[test]
fn deny_beats_ask_beats_allow_across_layers() {
    let bed = Bed::new();
    bed.write(
        &bed.managed(),
        "[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"ask\"\ncommand = [\"git\", \"push\"]\n",
    );
    bed.write(
        &bed.ws().join(".toolslot/policy.toml"),
        "[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"allow\"\ncommand = [\"git\", \"*\"]\n",
    );
    bed.trust();
    let p = bed
        .load("rules = [{ tool = \"exec_shell\", decision = \"deny\", command = [\"git\", \"push\", \"--force\"], reason = \"no force pushes\" }]\n")
        .unwrap();
    let ws = bed.ws();
    assert_eq!(shell(&p, &ws, "git status"), Some(RuleDecision::Allow));
    assert_eq!(shell(&p, &ws, "git push origin"), Some(RuleDecision::Ask));
    let v = verdict(&p, &ws, "exec_shell", json!({"command": "git push --force origin"}));
    assert_eq!(v.decision, Some(RuleDecision::Deny));
    assert_eq!(v.reason.as_deref(), Some("no force pushes"));
    let at = v.rule.unwrap();
    assert_eq!((at.layer, at.index), (LayerKind::Config, 0));
    assert!(at.file.unwrap().ends_with("config.toml"));
    let v = verdict(&p, &ws, "exec_shell", json!({"command": "git push"}));
    assert_eq!(v.rule.unwrap().layer, LayerKind::Managed);
    assert!(!v.sticky, "allow_override defaults to true");
    assert_eq!(p.files().len(), 2);
}

#[test]
fn allow_never_covers_a_command_that_is_not_plain_or_a_segment_it_does_not_name() {
    let bed = Bed::new();
    let p = bed
        .load("rules = [{ tool = \"exec_shell\", decision = \"allow\", command = [\"cargo\", \"test\", \"*\"] }, { tool = \"exec_shell\", decision = \"allow\", command = [\"ls\"] }]\n")
        .unwrap();
    let ws = bed.ws();
    for c in ["cargo test", "cargo test -p x", "ls && cargo test", "ls\nls"] {
        assert_eq!(shell(&p, &ws, c), Some(RuleDecision::Allow), "{c}");
    }
    for c in [
        "cargo test > out",
        "cargo test; rm -rf ~",
        "cargo test $(id)",
        "ls -la",
        "(ls)",
        "ls &",
        "env cargo test",
        "sh -c 'cargo test'",
        "/usr/bin/ls",
        "cargo test\r",
        "cargo build",
    ] {
        assert_eq!(shell(&p, &ws, c), None, "{c:?} is left to the mode");
    }
}

#[test]
fn a_rule_that_only_may_match_asks() {
    let bed = Bed::new();
    let p = bed
        .load("rules = [{ tool = \"exec_shell\", decision = \"deny\", command = [\"git\", \"push\"] }, { tool = \"exec_shell\", decision = \"allow\" }]\n")
        .unwrap();
    let ws = bed.ws();
    let v = verdict(&p, &ws, "exec_shell", json!({"command": "git $(echo push)"}));
    assert_eq!(v.decision, Some(RuleDecision::Ask));
    assert!(v.unsure && v.reason.unwrap().contains("may apply"));
    assert_eq!(shell(&p, &ws, "git 'push"), Some(RuleDecision::Ask), "a parse error is a doubt");
    assert_eq!(shell(&p, &ws, "git status"), Some(RuleDecision::Allow));
    assert_eq!(shell(&p, &ws, "echo $(git push)"), Some(RuleDecision::Deny));
}

#[test]
fn paths_and_input_pointers() {
    let bed = Bed::new();
    std::fs::create_dir_all(bed.ws().join("secrets")).unwrap();
    std::os::unix::fs::symlink(bed.ws().join("secrets"), bed.ws().join("docs")).unwrap();
    let p = bed
        .load(concat!(
            "rules = [{ tool = \"*\", decision = \"deny\", path = \"secrets/**\", reason = \"secrets stay put\" },",
            " { tool = \"fetch_url\", decision = \"deny\", input = { pointer = \"/url\", glob = \"https://evil.example/*\" } },",
            " { tool = \"read_file\", decision = \"allow\", path = \"src/**\" }]\n"
        ))
        .unwrap();
    let ws = bed.ws();
    let d = |tool: &str, input: Value| verdict(&p, &ws, tool, input).decision;
    assert_eq!(d("read_file", json!({"path": "secrets/key"})), Some(RuleDecision::Deny));
    assert_eq!(d("read_file", json!({"path": "./src/../secrets/key"})), Some(RuleDecision::Deny));
    assert_eq!(
        d("read_file", json!({"path": "docs/key"})),
        Some(RuleDecision::Deny),
        "through a symlink"
    );
    assert_eq!(d("exec_shell", json!({"command": "cat secrets/key"})), Some(RuleDecision::Deny));
    assert_eq!(d("exec_shell", json!({"command": "rm -rf secrets"})), Some(RuleDecision::Deny));
    assert_eq!(
        d("exec_shell", json!({"command": "echo x > secrets/key"})),
        Some(RuleDecision::Deny)
    );
    assert_eq!(d("exec_shell", json!({"command": "cat $F"})), Some(RuleDecision::Ask));
    assert_eq!(d("read_file", json!({"path": "src/main.rs"})), Some(RuleDecision::Allow));
    assert_eq!(d("read_file", json!({"path": "README.md"})), None);
    assert_eq!(d("fetch_url", json!({"url": "https://evil.example/a/b"})), Some(RuleDecision::Deny));
    assert_eq!(d("fetch_url", json!({"url": "https://good.example/"})), None);
}

#[test]
fn a_managed_policy_that_forbids_overrides_is_sticky_and_can_forbid_full_auto() {
    let bed = Bed::new();
    bed.write(
        &bed.managed(),
        "[policy]\nallow_override = false\nforbid_full_auto = true\n[[policy.rules]]\ntool = \"fetch_url\"\ndecision = \"ask\"\n",
    );
    let p = bed.load("").unwrap();
    let v = verdict(&p, &bed.ws(), "fetch_url", json!({"url": "https://x"}));
    assert!(v.sticky && v.decision == Some(RuleDecision::Ask));
    assert!(p.forbids(ApprovalMode::FullAuto).is_some());
    assert!(p.forbids(ApprovalMode::AutoEdit).is_none());
    assert!(p.overrides_forbidden());
}

#[test]
fn bad_policies_are_refused_in_one_line_naming_the_rule() {
    let bed = Bed::new();
    let project = bed.ws().join(".toolslot/policy.toml");
    let cases: &[(&str, &str, &str)] = &[
        (
            "[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"deny\"\ncommand = [\"git\", \"push\"]\nexamples = { match = [\"git push\", \"git status\"] }\n",
            "example \"git status\" should match but does not",
            "rule 0",
        ),
        (
            "[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"deny\"\ncommand = [\"git\", \"push\"]\nexamples = { not_match = [\"env git push\"] }\n",
            "should not match but does",
            "rule 0",
        ),
        (
            "[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"allow\"\ncommand = [\"ls\"]\nexamples = { match = [\"ls > x\"] }\n",
            "should match but does not",
            "rule 0",
        ),
        ("[[policy.rules]]\ntool = \"a[\"\ndecision = \"deny\"\n", "bad glob", "rule 0"),
        (
            "[[policy.rules]]\ntool = \"x\"\ndecision = \"maybe\"\n",
            "unknown variant",
            "line 3",
        ),
        (
            "[[policy.rules]]\ntool = \"x\"\ndecision = \"deny\"\ncomand = []\n",
            "unknown field",
            "comand",
        ),
        ("[policy]\nallow_override = false\n", "managed policy file only", "allow_override"),
        (
            "[[hooks]]\nevent = \"pre_tool_use\"\ncommand = [\"true\"]\n",
            "hooks may not be declared in a project's policy file",
            "checkout",
        ),
    ];
    for (text, want, also) in cases {
        bed.write(&project, text);
        let err = bed.load("").unwrap_err().to_string();
        assert!(err.contains(want) && err.contains(also), "{text}\n→ {err}");
        assert!(!err.contains('\n'), "one line: {err}");
        assert!(err.contains("policy.toml"), "names the file: {err}");
    }
    bed.write(&project, "");
    let err = bed
        .load("rules = [{ tool = \"x\", decision = \"deny\", input = { pointer = \"url\", glob = \"*\" } }]\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("config") && err.contains("must start with `/`"), "{err}");
}

#[test]
fn examples_that_behave_are_accepted() {
    let bed = Bed::new();
    let p = bed
        .load(concat!(
            "rules = [{ tool = \"exec_shell\", decision = \"deny\", command = [\"git\", \"push\"], examples = { match = [\"git push\", \"(git push)\", \"x && git push\", \"env git push\", \"sh -c 'git push'\"], not_match = [\"git status\", \"git log --grep push\"] } },",
            " { tool = \"fetch_url\", decision = \"ask\", input = { pointer = \"/url\", glob = \"http://*\" }, examples = { match = [\"http://x\", { url = \"http://y\" }], not_match = [\"https://x\"] } }]\n"
        ))
        .unwrap();
    assert_eq!(p.rules().len(), 2);
}

#[test]
fn a_policy_that_could_not_load_refuses_everything() {
    let p = Policy::refusing("policy file x: broken");
    let v = verdict(&p, Path::new("."), "read_file", json!({"path": "a"}));
    assert_eq!(v.decision, Some(RuleDecision::Deny));
    assert_eq!(v.reason.as_deref(), Some("policy file x: broken"));
    assert_eq!(verdict(&Policy::empty(), Path::new("."), "read_file", json!({})).decision, None);
}

#[test]
fn hooks_are_collected_in_layer_order() {
    let bed = Bed::new();
    bed.write(
        &bed.managed(),
        "[[hooks]]\nevent = \"pre_tool_use\"\ntool = \"exec_*\"\ncommand = [\"managed\"]\n",
    );
    let p = bed
        .load("")
        .map(|_| ())
        .and_then(|_| Policy::load(&bed.config(""), &bed.ws()))
        .unwrap();
    let cfg = bed.config("");
    let mut cfg2 = cfg.clone();
    cfg2.hooks = vec![crate::config::HookConfig {
        event: HookEvent::PreToolUse,
        tool: "*".into(),
        command: vec!["config".into()],
        timeout_ms: None,
        on_error: Default::default(),
    }];
    let p2 = Policy::load(&cfg2, &bed.ws()).unwrap();
    let names: Vec<&str> = p2
        .hooks(HookEvent::PreToolUse, "exec_shell")
        .map(|h| h.config.command[0].as_str())
        .collect();
    assert_eq!(names, vec!["managed", "config"]);
    assert_eq!(p2.hooks(HookEvent::PreToolUse, "read_file").count(), 1);
    assert!(!p.has_hooks(HookEvent::PostToolUse, "exec_shell"));
}

#[test]
fn key_rules_match_the_approval_key() {
    let bed = Bed::new();
    let p = bed
        .load("rules = [{ tool = \"write_file\", decision = \"allow\", key = \"write_file:key\" }]\n")
        .unwrap();
    assert_eq!(
        verdict(&p, &bed.ws(), "write_file", json!({"path": "a"})).decision,
        Some(RuleDecision::Allow)
    );
    assert_eq!(verdict(&p, &bed.ws(), "edit_file", json!({"path": "a"})).decision, None);
}

#[test]
fn an_untrusted_project_file_restricts_but_does_not_loosen() {
    let bed = Bed::new();
    let project = bed.ws().join(".toolslot/policy.toml");
    let hostile = concat!(
        "[[policy.rules]]\ntool = \"write_file\"\ndecision = \"allow\"\n\n",
        "[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"allow\"\ncommand = [\"touch\", \"*\"]\n\n",
        "[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"deny\"\ncommand = [\"git\", \"push\"]\n",
    );
    bed.write(&project, hostile);
    let ws = bed.ws();
    let write = || json!({"path": "a", "content": "b"});
    let check = |p: &Policy, want: [Option<RuleDecision>; 3]| {
        let got = [
            verdict(p, &ws, "write_file", write()).decision,
            shell(p, &ws, "touch PWNED"),
            shell(p, &ws, "git push"),
        ];
        assert_eq!(got, want);
    };
    let p = bed.load("").unwrap();
    check(&p, [None, None, Some(RuleDecision::Deny)]);
    let indexes: Vec<usize> = p.not_applied().iter().map(|r| r.reference().index).collect();
    assert_eq!(indexes, vec![0, 1]);
    let untrusted = p.untrusted().unwrap();
    assert_eq!((untrusted.ignored, &untrusted.why), (2, &trust::Distrust::Never));
    let notices = p.notices();
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].kind, crate::notice::NoticeKind::ProjectPolicyUntrusted);
    let canonical = ws.canonicalize().unwrap();
    assert!(
        notices[0]
            .message
            .contains(&canonical.join(".toolslot/policy.toml").display().to_string())
            && notices[0].message.contains("2 allow rules")
            && notices[0].message.contains(&format!("toolslot trust {}", canonical.display())),
        "{}",
        notices[0].message
    );
    assert!(p.files().contains(&project), "still protected from the tools");

    // Trusted: the allow rules apply.
    bed.trust();
    let p = bed.load("").unwrap();
    check(&p, [Some(RuleDecision::Allow), Some(RuleDecision::Allow), Some(RuleDecision::Deny)]);
    assert!(p.untrusted().is_none() && p.not_applied().is_empty() && p.notices().is_empty());

    // One byte changed: untrusted again, and told why.
    bed.write(&project, &format!("{hostile}#"));
    let p = bed.load("").unwrap();
    check(&p, [None, None, Some(RuleDecision::Deny)]);
    assert_eq!(p.untrusted().unwrap().why, trust::Distrust::Changed);

    // Trust that cannot be read is none, and says why; it stops no deny rule.
    for (store, said) in [("", "trust_file is \"\""), ("relative.toml", "is relative")] {
        let mut config = bed.config("");
        config.policy.trust_file = store.to_string();
        let p = Policy::load(&config, &ws).unwrap();
        check(&p, [None, None, Some(RuleDecision::Deny)]);
        let why = &p.untrusted().unwrap().why;
        assert!(matches!(why, trust::Distrust::Unusable(r) if r.contains(said)), "{why:?}");
    }
    std::fs::write(bed.trust_file(), "not a store [").unwrap();
    let p = bed.load("").unwrap();
    check(&p, [None, None, Some(RuleDecision::Deny)]);
    let why = &p.untrusted().unwrap().why;
    assert!(matches!(why, trust::Distrust::Unusable(r) if r.contains("trusted.toml")), "{why:?}");

    // A file without allow rules needs no trust, and nothing is told.
    bed.write(
        &project,
        "[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"deny\"\ncommand = [\"git\", \"push\"]\n",
    );
    let p = bed.load("").unwrap();
    assert!(p.untrusted().is_none() && p.notices().is_empty());
    assert_eq!(shell(&p, &ws, "git push"), Some(RuleDecision::Deny));
}

#[test]
fn the_user_and_config_layers_need_no_trust() {
    let bed = Bed::new();
    let p = bed.load("rules = [{ tool = \"write_file\", decision = \"allow\" }]\n").unwrap();
    assert_eq!(
        verdict(&p, &bed.ws(), "write_file", json!({"path": "a"})).decision,
        Some(RuleDecision::Allow)
    );
}

#[test]
fn an_opaque_command_is_asked_under_a_rule_it_could_match_and_says_why() {
    let bed = Bed::new();
    std::fs::create_dir_all(bed.ws().join("secrets")).unwrap();
    std::fs::write(bed.ws().join("secrets/prod.key"), "k").unwrap();
    let p = bed
        .load(concat!(
            "rules = [{ tool = \"exec_shell\", decision = \"deny\", command = [\"rm\"] },",
            " { tool = \"exec_shell\", decision = \"deny\", command = [\"git\", \"push\"] },",
            " { tool = \"*\", decision = \"deny\", path = \"secrets/**\" },",
            " { tool = \"exec_shell\", decision = \"allow\" }]\n"
        ))
        .unwrap();
    let ws = bed.ws();
    let asked = |c: &str| {
        let v = verdict(&p, &ws, "exec_shell", json!({ "command": c }));
        assert_eq!(v.decision, Some(RuleDecision::Ask), "{c:?}: {v:?}");
        assert!(v.unsure, "{c:?}");
        v.reason.unwrap_or_default()
    };
    // Class 1: programs that run text as code.
    assert!(asked("echo rm victim | sh").ends_with("may apply: opaque: `sh` reads commands from its input"));
    for c in [
        "sh <<EOF\nrm victim\nEOF",
        "alias r=rm\nr victim",
        "python3 -c \"import os; os.remove('victim')\"",
        "awk 'BEGIN{system(\"rm victim\")}'",
        "script -qc \"$(printf rm) victim\" /dev/null",
        "git -c alias.p=push p",
        "make",
        "sed -n '1e id' x",
    ] {
        assert!(asked(c).contains("opaque: "), "{c:?}");
    }
    // Class 2: wrapper options not modelled exactly.
    assert!(asked("env --sp='rm victim'").contains("`env --sp=rm victim` is an option the judgement does not know"));
    asked("ionice --classd 3 ls");
    // Class 3: globs as the program word, and as paths.
    assert!(asked("/bin/l? x").contains("opaque: the program word `/bin/l?` is a glob"));
    assert!(asked("cat secret?/missing.key").contains("`secret?/missing.key` is a glob: it may expand to a path the rule names"));
    asked("cat */missing.key");
    // A glob that expands to a denied path now is that path: denied.
    for c in ["cat secret?/prod.key", "cat */prod.key", "cat [s]ecrets/*", "head -n1 secrets/p*"] {
        assert_eq!(shell(&p, &ws, c), Some(RuleDecision::Deny), "{c:?}");
    }
    // What the words show stays denied; what cannot match stays allowed.
    assert_eq!(shell(&p, &ws, "trap 'rm victim' EXIT"), Some(RuleDecision::Deny));
    assert_eq!(shell(&p, &ws, "env -S'rm victim'"), Some(RuleDecision::Deny));
    for c in ["ls -la", "cat *.md", "sed 's/a/b/' x", "echo victim | xargs ls", "git status"] {
        assert_eq!(shell(&p, &ws, c), Some(RuleDecision::Allow), "{c:?}");
    }
}
