//! Policy rules, hooks and the ledger through the binary (`toolslot replay`, `toolslot policy`,
//! `toolslot ledger`), as an attacker would: a denied command written every way a shell reads
//! the same program, asserting that the program did not run (a marker its stand-in writes is
//! not there) and that the call was refused or asked, never run unasked.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use support::{bin, json_lines, openai_stream, replay_with, round_results as results};

/// A workspace, a home, a managed file's place, and a stand-in `git` on the PATH that leaves a
/// marker in the workspace when it runs.
struct Bed {
    dir: tempfile::TempDir,
}

impl Bed {
    fn new() -> Self {
        // Not under /tmp: a call cleared to write gets a private /tmp, which would hide the
        // stand-in and let the real git run instead.
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let bed = Bed { dir };
        for d in ["ws/.toolslot", "home", "bin"] {
            std::fs::create_dir_all(bed.dir.path().join(d)).unwrap();
        }
        // It says it ran on stdout, and leaves a marker where it may write.
        support::stand_in(&bed.dir.path().join("bin"), "git", &bed.marker());
        bed
    }
    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }
    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }
    fn marker(&self) -> PathBuf {
        self.ws().join("PWNED-git")
    }
    fn ledger_dir(&self) -> PathBuf {
        self.dir.path().join("ledger")
    }
    fn managed(&self) -> PathBuf {
        self.dir.path().join("managed.toml")
    }
    fn project_policy(&self, text: &str) {
        std::fs::write(self.ws().join(".toolslot/policy.toml"), text).unwrap();
    }
    /// `toolslot trust ARGS…` (the store is under the bed's HOME): its one JSON line.
    fn trust(&self, args: &[&str]) -> Value {
        let out = self.command().arg("trust").args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }
    fn config(&self, extra: &str) -> PathBuf {
        let file = self.dir.path().join("toolslot.toml");
        std::fs::write(
            &file,
            format!(
                "[overflow]\ndir = \"{}\"\n[audit]\nledger_dir = \"{}\"\n[policy]\nmanaged_file = \"{}\"\n{extra}\n",
                self.dir.path().join("overflow").display(),
                self.ledger_dir().display(),
                self.managed().display()
            ),
        )
        .unwrap();
        file
    }
    fn command(&self) -> Command {
        let mut c = bin();
        let path = format!(
            "{}:{}",
            self.dir.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        c.env("HOME", self.home()).env("PATH", path);
        c
    }
    /// `toolslot policy {what}` with `config`, in the workspace.
    fn policy(&self, what: &str, config: &Path) -> Command {
        let mut c = self.command();
        c.args(["policy", what, "--config"]).arg(config).arg("--workspace").arg(self.ws());
        c
    }
    /// Runs rounds through `toolslot replay`: exit status, events, stderr.
    fn replay(&self, config: &Path, approve: &str, rounds: &[String]) -> (Option<i32>, Vec<Value>, String) {
        let out = replay_with(self.command(), self.dir.path(), &self.ws(), config, approve, rounds);
        (
            out.status.code(),
            json_lines(&out.stdout),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

fn asked(events: &[Value], index: usize) -> bool {
    events.iter().any(|e| e["type"] == "approval_required" && e["index"] == index)
}

const FULL_AUTO: &str = "[approval]\nmode = \"full-auto\"\n";

const DENY_GIT_PUSH: &str =
    "[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"deny\"\ncommand = [\"git\", \"push\"]\nreason = \"pushes go through CI\"\n";

/// What a rule must make of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    /// Refused with the rule's reason.
    Denied,
    /// The rule cannot be sure: asked, even in full-auto.
    Asked,
}

/// A denied `git push`, written every way a shell would still run git push (or might).
const EVASIONS: &[(&str, Want)] = &[
    ("git push", Want::Denied),
    ("git push origin main --force", Want::Denied),
    ("(git push)", Want::Denied),
    ("{ git push; }", Want::Denied),
    ("x && git push", Want::Denied),
    ("false || git push", Want::Denied),
    ("git  push", Want::Denied),
    ("git\tpush", Want::Denied),
    ("env git push", Want::Denied),
    ("env -i PATH=/usr/bin git push", Want::Denied),
    ("sh -c 'git push'", Want::Denied),
    ("bash -lc \"cd . && git push\"", Want::Denied),
    ("sh -c \"sh -c 'git push'\"", Want::Denied),
    ("g''it push", Want::Denied),
    ("\"git\" push", Want::Denied),
    ("g\\it push", Want::Denied),
    ("command git push", Want::Denied),
    ("exec git push", Want::Denied),
    ("xargs git push", Want::Denied),
    ("nice -n 5 timeout 10 git push", Want::Denied),
    ("nohup git push", Want::Denied),
    ("eval git push", Want::Denied),
    ("git -C . push", Want::Denied),
    ("git -c user.name=x --no-pager push", Want::Denied),
    ("/usr/bin/git push", Want::Denied),
    ("./../bin/git push", Want::Denied),
    ("GIT_DIR=.git git push", Want::Denied),
    ("ls\ngit push", Want::Denied),
    ("ls; git push", Want::Denied),
    ("ls | git push", Want::Denied),
    ("git push &", Want::Denied),
    ("ls & git push", Want::Denied),
    ("echo $(git push)", Want::Denied),
    ("echo `git push`", Want::Denied),
    ("cat <(git push)", Want::Denied),
    ("if true; then git push; fi", Want::Denied),
    ("for i in 1; do git push; done", Want::Denied),
    ("f() { git push; }; f", Want::Denied),
    ("git push > /dev/null 2>&1", Want::Denied),
    // Where the words are not sure to be what runs: asked, never run unasked.
    ("git $(echo push)", Want::Asked),
    ("G=git; $G push", Want::Asked),
    ("echo push | xargs git", Want::Asked),
    ("find . -maxdepth 0 -exec git push ;", Want::Asked),
    ("git 'push", Want::Asked),
    ("git pu\\\nsh", Want::Asked),
    ("git {push,status}", Want::Asked),
];

#[test]
fn a_denied_git_push_is_denied_however_it_is_written() {
    let bed = Bed::new();
    bed.project_policy(DENY_GIT_PUSH);
    let config = bed.config("[approval]\nmode = \"full-auto\"\n");
    let calls: Vec<(&str, Value)> = EVASIONS.iter().map(|(c, _)| ("exec_shell", json!({"command": c}))).collect();
    let (code, events, err) = bed.replay(&config, "none", &[openai_stream(&calls)]);
    assert_eq!(code, Some(0), "{err}");
    let got_results = results(&events);
    assert_eq!(got_results.len(), EVASIONS.len());
    let mut wrong = Vec::new();
    for (n, (command, want)) in EVASIONS.iter().enumerate() {
        let content = got_results[n]["content"].as_str().unwrap();
        let got = if content.contains("Denied by policy: pushes go through CI") && !asked(&events, n) {
            Some(Want::Denied)
        } else if asked(&events, n) && content.contains("not_approved") {
            Some(Want::Asked)
        } else {
            None
        };
        if got != Some(*want) {
            wrong.push(format!("{command:?}: wanted {want:?}, got {got:?}: {content}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(
        !bed.marker().exists(),
        "git ran: {}",
        std::fs::read_to_string(bed.marker()).unwrap_or_default()
    );
    assert!(
        !got_results
            .iter()
            .any(|r| r["content"].as_str().unwrap().contains("STAND-IN GIT RAN"))
    );

    // The stand-in does run, and what the rule does not name runs unasked in full-auto.
    let calls = [
        ("exec_shell", json!({"command": "git status"})),
        ("exec_shell", json!({"command": "git log --grep push"})),
        ("exec_shell", json!({"command": "git commit -m push"})),
    ];
    let (_, events, _) = bed.replay(&config, "none", &[openai_stream(&calls)]);
    let ran: Vec<bool> = results(&events)
        .iter()
        .map(|r| r["content"].as_str().unwrap().contains("STAND-IN GIT RAN"))
        .collect();
    assert_eq!(ran, vec![true, true, true], "{events:?}");
}

#[test]
fn an_ask_rule_asks_even_in_full_auto_and_an_allow_never_covers_what_is_not_plain() {
    let bed = Bed::new();
    bed.project_policy(
        "[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"ask\"\ncommand = [\"git\", \"commit\"]\n\n[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"allow\"\ncommand = [\"git\", \"status\", \"*\"]\n",
    );
    // The team's allow rule applies once the user has trusted the file.
    bed.trust(&[bed.ws().to_str().unwrap()]);
    // Full-auto: the ask rule asks; ask mode: the allow rule runs unasked, only when plain.
    let config = bed.config("[approval]\nmode = \"full-auto\"\n");
    let calls = [("exec_shell", json!({"command": "git commit -m x"}))];
    let (_, events, _) = bed.replay(&config, "none", &[openai_stream(&calls)]);
    assert!(asked(&events, 0));
    assert!(!bed.marker().exists());
    let config = bed.config("[approval]\nmode = \"ask\"\n");
    let calls = [
        ("exec_shell", json!({"command": "git status --short"})),
        ("exec_shell", json!({"command": "git status > out.txt"})),
        ("exec_shell", json!({"command": "git status; git gc"})),
    ];
    let (_, events, _) = bed.replay(&config, "none", &[openai_stream(&calls)]);
    assert!(!asked(&events, 0), "allowed by the rule");
    assert!(asked(&events, 1), "a redirection is not plain: the mode decides");
    assert!(asked(&events, 2), "git gc is not allowed");
    let ran: Vec<bool> = results(&events)
        .iter()
        .map(|r| r["content"].as_str().unwrap().contains("STAND-IN GIT RAN"))
        .collect();
    assert_eq!(ran, vec![true, false, false]);
}

#[test]
fn paths_and_input_pointers_are_matched_however_they_are_spelled() {
    let bed = Bed::new();
    std::fs::create_dir_all(bed.ws().join("secrets")).unwrap();
    std::fs::write(bed.ws().join("secrets/key"), "SECRET-KEY-123").unwrap();
    std::os::unix::fs::symlink(bed.ws().join("secrets"), bed.ws().join("innocent")).unwrap();
    bed.project_policy(
        "[[policy.rules]]\ntool = \"*\"\ndecision = \"deny\"\npath = \"secrets/**\"\nreason = \"secrets stay put\"\n\n[[policy.rules]]\ntool = \"fetch_url\"\ndecision = \"deny\"\ninput = { pointer = \"/url\", glob = \"*://evil.example/*\" }\n",
    );
    let config = bed.config("[approval]\nmode = \"full-auto\"\n");
    let calls = [
        ("read_file", json!({"path": "secrets/key"})),
        ("read_file", json!({"path": "./src/../secrets/key"})),
        ("read_file", json!({"path": "innocent/key"})),
        ("exec_shell", json!({"command": "cat secrets/key"})),
        ("exec_shell", json!({"command": "cat < innocent/key"})),
        ("exec_shell", json!({"command": "tar cf x.tar secrets"})),
        ("grep_files", json!({"pattern": "SECRET", "path": "secrets"})),
        ("fetch_url", json!({"url": "https://evil.example/steal"})),
    ];
    let (_, events, _) = bed.replay(&config, "none", &[openai_stream(&calls)]);
    for r in results(&events) {
        let content = r["content"].as_str().unwrap();
        assert!(!content.contains("SECRET-KEY-123"), "{content}");
        assert!(content.contains("Denied by policy"), "{content}");
    }
}

#[test]
fn policy_explain_prints_one_line_and_check_refuses_examples_that_misbehave() {
    let bed = Bed::new();
    bed.project_policy(&format!(
        "{DENY_GIT_PUSH}examples = {{ match = [\"git push\", \"sh -c 'git push'\"], not_match = [\"git status\"] }}\n"
    ));
    let config = bed.config("");
    let explain = |tool: &str, input: Value| {
        let out = bed.policy("explain", &config).args([tool, &input.to_string()]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        serde_json::from_str::<Value>(&text).unwrap()
    };
    let v = explain("exec_shell", json!({"command": "x && env git push origin"}));
    assert_eq!(v["decision"], "deny");
    assert_eq!(v["mode_decision"], "ask");
    assert_eq!(v["rule"]["layer"], "project");
    assert_eq!(v["rule"]["index"], 0);
    assert!(v["rule"]["file"].as_str().unwrap().ends_with(".toolslot/policy.toml"));
    let commands: Vec<Value> = v["segments"].as_array().unwrap().iter().map(|s| s["command"].clone()).collect();
    assert_eq!(commands, vec![json!(["x"]), json!(["git", "push", "origin"])]);
    let v = explain("exec_shell", json!({"command": "ls"}));
    assert_eq!(
        (v["decision"].as_str(), v["rule"].is_null(), v["mode_decision"].as_str()),
        (Some("allow"), true, Some("allow"))
    );
    let v = explain("write_file", json!({"path": "a", "content": "b"}));
    assert_eq!(
        (v["decision"].as_str(), v["segments"].as_array().map(Vec::len)),
        (Some("ask"), Some(0))
    );

    let check = || bed.policy("check", &config).output().unwrap();
    let out = check();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    for (layer, write) in [("project", true), ("managed", false)] {
        let bad = format!("{DENY_GIT_PUSH}examples = {{ not_match = [\"command git push\"] }}\n");
        if write {
            bed.project_policy(&bad);
        } else {
            bed.project_policy("");
            std::fs::write(bed.managed(), &bad).unwrap();
        }
        let out = check();
        assert_eq!(out.status.code(), Some(2), "{layer}: {}", String::from_utf8_lossy(&out.stdout));
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains(layer) && err.contains("rule 0") && err.contains("command git push"),
            "{err}"
        );
        // A session under a policy that does not load does not start.
        let (code, _, err) = bed.replay(&config, "none", &[shell("ls")]);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("rule 0"), "{err}");
    }
}

impl Bed {
    /// A hook script in the bed (outside the workspace), `body` after a shebang.
    fn hook(&self, name: &str, body: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }
    /// A config of `extra` and one `event` hook that runs `hook`, with `keys` of its own.
    fn with_hook(&self, extra: &str, event: &str, hook: &Path, keys: &str) -> PathBuf {
        self.config(&format!(
            "{extra}\n[[hooks]]\nevent = \"{event}\"\ncommand = [\"{}\"]\n{keys}",
            hook.display()
        ))
    }
    /// A config in full-auto with one pre_tool_use hook for exec_shell, which a hook that works
    /// answers in time however loaded the machine.
    fn hooked(&self, hook: &Path, extra: &str) -> PathBuf {
        self.hooked_within(hook, extra, 20_000)
    }
    /// As [`Bed::hooked`], the hook given `timeout_ms`.
    fn hooked_within(&self, hook: &Path, extra: &str, timeout_ms: u64) -> PathBuf {
        let keys = format!("tool = \"exec_shell\"\ntimeout_ms = {timeout_ms}\n");
        self.with_hook(&format!("{FULL_AUTO}{extra}"), "pre_tool_use", hook, &keys)
    }
    /// The session ledgers written so far.
    fn ledgers(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.ledger_dir())
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        files.sort();
        files
    }
}

/// A round of one shell call.
fn shell(command: &str) -> String {
    openai_stream(&[("exec_shell", json!({ "command": command }))])
}

/// A call cleared to write (`git commit` in full-auto) that leaves the marker when it runs.
fn a_commit() -> String {
    shell("git commit -m x")
}

#[test]
fn a_hook_that_fails_in_any_way_blocks_the_call() {
    let bed = Bed::new();
    // The control: a hook that answers nothing lets the call run, and the marker appears.
    let quiet = bed.hook("quiet.sh", "cat > /dev/null\nexit 0");
    let (code, events, err) = bed.replay(&bed.hooked(&quiet, ""), "none", &[a_commit()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(bed.marker().exists(), "the control did not run: {events:?}");
    std::fs::remove_file(bed.marker()).unwrap();

    for (name, body, why) in [
        ("exit1.sh", "echo boom >&2\nexit 1", "status 1"),
        ("hang.sh", "sleep 30", "did not answer within 1500 ms"),
        ("garbage.sh", "cat > /dev/null\necho 'sure, go ahead'", "not a JSON object"),
        ("badjson.sh", "echo '{\"decision\": \"yes\"}'", "not allow, ask or deny"),
    ] {
        let hook = bed.hook(name, body);
        // Only the hook that hangs is given a short time.
        let timeout = if name == "hang.sh" { 1500 } else { 20_000 };
        let (code, events, err) = bed.replay(&bed.hooked_within(&hook, "", timeout), "none", &[a_commit()]);
        assert_eq!(code, Some(0), "{name}: {err}");
        let content = results(&events)[0]["content"].as_str().unwrap().to_string();
        assert!(content.contains("Blocked by a hook") && content.contains(why), "{name}: {content}");
        assert!(!content.contains("STAND-IN GIT RAN"), "{name}: {content}");
        assert!(!bed.marker().exists(), "{name}: git ran");
    }

    // Exit 2 blocks with stderr as the model's reason.
    let hook = bed.hook("two.sh", "echo 'commits wait for review' >&2\nexit 2");
    let (_, events, _) = bed.replay(&bed.hooked(&hook, ""), "none", &[a_commit()]);
    let content = results(&events)[0]["content"].as_str().unwrap().to_string();
    assert!(content.contains("commits wait for review"), "{content}");
    assert!(!bed.marker().exists());

    // on_error = "allow" ignores a failure, and says so.
    let hook = bed.hook("exit1b.sh", "exit 1");
    let config = bed.with_hook(FULL_AUTO, "pre_tool_use", &hook, "on_error = \"allow\"\n");
    let (_, events, _) = bed.replay(&config, "none", &[a_commit()]);
    assert!(
        events.iter().any(|e| e["type"] == "notice" && e["kind"] == "hook_failed"),
        "{events:?}"
    );
    assert!(bed.marker().exists());
}

#[test]
fn a_rewritten_input_is_judged_as_what_it_now_is() {
    let bed = Bed::new();
    // The hook turns a harmless command into a denied one; the rules see the new input.
    let hook = bed.hook(
        "rewrite.sh",
        "cat > /dev/null\necho '{\"updated_input\": {\"command\": \"git push origin main\"}}'",
    );
    let config = bed.hooked(&hook, DENY_GIT_PUSH);
    let (code, events, err) = bed.replay(&config, "all", &[shell("git status")]);
    assert_eq!(code, Some(0), "{err}");
    let rewritten = events
        .iter()
        .find(|e| e["type"] == "input_rewritten")
        .unwrap_or_else(|| panic!("no input_rewritten: {events:?}"));
    assert_eq!(rewritten["original_input"]["command"], "git status");
    assert_eq!(rewritten["input"]["command"], "git push origin main");
    let content = results(&events)[0]["content"].as_str().unwrap().to_string();
    assert!(content.contains("Denied by policy: pushes go through CI"), "{content}");
    assert!(!bed.marker().exists(), "git ran");

    // A rewrite into a command that needs approval is asked about as that command, in ask mode
    // (the approval is for the input that runs), and rejected here.
    let hook = bed.hook(
        "rewrite2.sh",
        "cat > /dev/null\necho '{\"updated_input\": {\"command\": \"git commit -m x\"}}'",
    );
    let config = bed.with_hook("", "pre_tool_use", &hook, "");
    let (_, events, _) = bed.replay(&config, "none", &[shell("ls")]);
    let asked_for: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "approval_required")
        .map(|e| &e["input"])
        .collect();
    assert_eq!(asked_for, vec![&json!({"command": "git commit -m x"})], "{events:?}");
    assert!(!bed.marker().exists(), "git ran");
}

#[test]
fn a_post_hook_adds_to_the_result() {
    let bed = Bed::new();
    let hook = bed.hook("post.sh", "cat > /dev/null\necho '{\"additional_context\": \"REVIEWED-BY-HOOK\"}'");
    let config = bed.with_hook(FULL_AUTO, "post_tool_use", &hook, "");
    let (_, events, _) = bed.replay(&config, "none", &[a_commit()]);
    let content = results(&events)[0]["content"].as_str().unwrap().to_string();
    assert!(
        content.contains("STAND-IN GIT RAN") && content.contains("REVIEWED-BY-HOOK"),
        "{content}"
    );
}

#[test]
fn every_decision_is_in_the_ledger_before_its_call_runs() {
    let bed = Bed::new();
    bed.project_policy(DENY_GIT_PUSH);
    let config = bed.config("[approval]\nmode = \"ask\"\n");
    let calls = [
        ("exec_shell", json!({"command": "git push"})),
        ("exec_shell", json!({"command": "git commit -m x"})),
        ("exec_shell", json!({"command": "ls"})),
    ];
    let (code, events, err) = bed.replay(&config, "session", &[openai_stream(&calls)]);
    assert_eq!(code, Some(0), "{err}");
    assert!(bed.marker().exists(), "{events:?}");
    let files = bed.ledgers();
    assert_eq!(files.len(), 1, "{files:?}");
    let records = json_lines(&std::fs::read(&files[0]).unwrap());
    let of = |index: usize, kind: &str| -> Vec<&Value> { records.iter().filter(|r| r["index"] == index && r["kind"] == kind).collect() };
    // The denied push: a deny by the rule, and no outcome.
    let d = of(0, "decision");
    assert_eq!(d.len(), 1, "{records:?}");
    assert_eq!((d[0]["decision"].as_str(), d[0]["source"].as_str()), (Some("deny"), Some("rule")));
    assert_eq!(d[0]["rule"]["layer"], "project");
    assert!(of(0, "outcome").is_empty());
    // The commit: allowed by the host for the session, then its outcome, in that order.
    let d = of(1, "decision");
    assert_eq!((d[0]["decision"].as_str(), d[0]["source"].as_str()), (Some("allow"), Some("host")));
    assert_eq!(d[0]["detail"], "approve_for_session");
    let o = of(1, "outcome");
    assert_eq!(o.len(), 1);
    assert!(o[0]["seq"].as_u64() > d[0]["seq"].as_u64());
    // ls: the mode's.
    assert_eq!(of(2, "decision")[0]["source"], "mode");

    let verify = |file: &Path| bed.command().args(["ledger", "verify"]).arg(file).output().unwrap();
    let out = verify(&files[0]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    // One changed word breaks the chain at its record.
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let tampered = lines[0].replace("\"deny\"", "\"allow\"");
    assert_ne!(tampered, lines[0]);
    let forged = bed.dir.path().join("forged.jsonl");
    std::fs::write(&forged, format!("{tampered}\n{}\n", lines[1..].join("\n"))).unwrap();
    let out = verify(&forged);
    assert_eq!(out.status.code(), Some(1));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["seq"], 1, "{answer}");
}

#[test]
fn a_decision_that_cannot_be_recorded_runs_nothing() {
    let bed = Bed::new();
    // The ledger folder's place is taken by a file: nothing can be written there.
    let blocker = bed.dir.path().join("not-a-folder");
    std::fs::write(&blocker, "").unwrap();
    let file = bed.dir.path().join("unwritable.toml");
    std::fs::write(
        &file,
        format!(
            "[overflow]\ndir = \"{}\"\n[audit]\nledger_dir = \"{}\"\n[policy]\nmanaged_file = \"{}\"\n[approval]\nmode = \"full-auto\"\n",
            bed.dir.path().join("overflow").display(),
            blocker.join("ledger").display(),
            bed.managed().display()
        ),
    )
    .unwrap();
    let (code, events, err) = bed.replay(&file, "none", &[a_commit()]);
    assert_eq!(code, Some(0), "{err}");
    let content = results(&events)[0]["content"].as_str().unwrap().to_string();
    assert!(content.contains("could not be recorded in the ledger"), "{content}");
    assert!(!bed.marker().exists(), "git ran unrecorded");
}

#[test]
fn approve_for_project_writes_the_rule_and_the_next_session_is_not_asked() {
    let bed = Bed::new();
    let config = bed.config("[approval]\nmode = \"ask\"\n");
    let (code, events, err) = bed.replay(&config, "project", &[a_commit()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "approval_decided" && e["decision"] == "approved_for_project"),
        "{events:?}"
    );
    assert!(
        events.iter().any(|e| e["type"] == "notice" && e["kind"] == "project_rule_added"),
        "{events:?}"
    );
    let policy = std::fs::read_to_string(bed.ws().join(".toolslot/policy.toml")).unwrap();
    assert!(policy.contains("decision = \"allow\"") && policy.contains("git commit"), "{policy}");
    assert!(bed.marker().exists());
    std::fs::remove_file(bed.marker()).unwrap();

    // A new session in the workspace: not asked, and it runs (rejecting every question).
    let (_, events, _) = bed.replay(&config, "none", &[a_commit()]);
    assert!(!asked(&events, 0), "{events:?}");
    assert!(bed.marker().exists(), "{events:?}");

    // A command that is not plain is approved for the session only, and the host is told.
    let (_, events, _) = bed.replay(&config, "project", &[shell("git commit -m x > out.txt")]);
    assert!(
        events.iter().any(|e| e["type"] == "notice" && e["kind"] == "project_rule_failed"),
        "{events:?}"
    );
    assert!(
        !std::fs::read_to_string(bed.ws().join(".toolslot/policy.toml"))
            .unwrap()
            .contains("out.txt")
    );
}

#[test]
fn a_hook_reads_no_credential_of_the_home_folder() {
    // A hook (like a language server) sees every folder read-only, and what it prints reaches
    // the model: the home folder's credentials are masked from it, the rest is not.
    let bed = Bed::new();
    std::fs::create_dir_all(bed.home().join(".ssh")).unwrap();
    std::fs::write(bed.home().join(".ssh/id_rsa"), "HOOK-SSH-SECRET-5c1d\n").unwrap();
    std::fs::write(bed.home().join(".netrc"), "machine x password HOOK-NETRC-SECRET-77aa\n").unwrap();
    std::fs::write(bed.home().join("notes.txt"), "HOOK-PLAIN-NOTES\n").unwrap();
    let hook = bed.hook(
        "reader.sh",
        "cat > /dev/null\ncat \"$HOME/.ssh/id_rsa\" \"$HOME/.netrc\" \"$HOME/notes.txt\" >&2\nexit 2",
    );
    for sandbox in ["auto", "landlock"] {
        let config = bed.hooked(&hook, &format!("[shell]\nsandbox = \"{sandbox}\"\n"));
        let (code, events, err) = bed.replay(&config, "none", &[a_commit()]);
        assert_eq!(code, Some(0), "{err}");
        let content = results(&events)[0]["content"].as_str().unwrap().to_string();
        assert!(content.contains("HOOK-PLAIN-NOTES"), "{sandbox}: the hook did not run: {content}");
        assert!(
            !content.contains("HOOK-SSH-SECRET") && !content.contains("HOOK-NETRC-SECRET"),
            "{sandbox}: a credential reached the model: {content}"
        );
    }
}

#[test]
fn a_policy_folder_that_is_a_link_takes_no_rule_approved_for_the_project() {
    // A hostile checkout's `.toolslot` links to the user's own policy folder, which applies in
    // every workspace without any trust: a rule approved for the project must not land there.
    let bed = Bed::new();
    let own = bed.home().join(".toolslot");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::remove_dir(bed.ws().join(".toolslot")).unwrap();
    std::os::unix::fs::symlink(&own, bed.ws().join(".toolslot")).unwrap();
    let config = bed.config("[approval]\nmode = \"ask\"\n");
    // The session does not start on a policy it cannot read, and says why in one line.
    let (code, events, err) = bed.replay(&config, "project", &[a_commit()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("its folder `.toolslot` is a link"), "{err}");
    assert!(!events.iter().any(|e| e["type"] == "call_started"), "{events:?}");
    assert!(!own.join("policy.toml").exists(), "the rule was written through the link");
    assert!(!bed.marker().exists());
    // Another workspace of the same user is still asked.
    std::fs::remove_file(bed.marker()).ok();
    std::fs::remove_file(bed.ws().join(".toolslot")).unwrap();
    std::fs::create_dir(bed.ws().join(".toolslot")).unwrap();
    let (_, events, _) = bed.replay(&config, "none", &[a_commit()]);
    assert!(asked(&events, 0), "{events:?}");
    assert!(!bed.marker().exists(), "{events:?}");
}

#[test]
fn reject_for_session_refuses_the_same_key_without_asking() {
    let bed = Bed::new();
    let config = bed.config("[approval]\nmode = \"ask\"\n");
    let (_, events, _) = bed.replay(&config, "reject-session,all", &[a_commit(), shell("git commit -m y")]);
    assert!(asked(&events, 0));
    let decided: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "approval_decided")
        .map(|e| e["decision"].as_str().unwrap())
        .collect();
    assert_eq!(decided, vec!["rejected_for_session", "cached_rejection"], "{events:?}");
    assert!(!bed.marker().exists());
}

#[test]
fn a_hooks_decision_joins_the_rules_and_the_mode() {
    let bed = Bed::new();
    // ask: asked even in full-auto (and rejected here).
    let ask = bed.hook(
        "ask.sh",
        "cat > /dev/null\necho '{\"decision\": \"ask\", \"reason\": \"a human looks at commits\"}'",
    );
    let (_, events, _) = bed.replay(&bed.hooked(&ask, ""), "none", &[a_commit()]);
    assert!(asked(&events, 0), "{events:?}");
    assert!(!bed.marker().exists());
    // deny in JSON: refused with the hook's reason.
    let deny = bed.hook(
        "deny.sh",
        "cat > /dev/null\necho '{\"decision\": \"deny\", \"reason\": \"no commits today\"}'",
    );
    let (_, events, _) = bed.replay(&bed.hooked(&deny, ""), "all", &[a_commit()]);
    let content = results(&events)[0]["content"].as_str().unwrap().to_string();
    assert!(content.contains("no commits today") && !asked(&events, 0), "{content}");
    assert!(!bed.marker().exists());
    // allow: lifts the mode's ask for a plain command...
    let allow = bed.hook("allow.sh", "cat > /dev/null\necho '{\"decision\": \"allow\"}'");
    let config = bed.with_hook("[approval]\nmode = \"ask\"\n", "pre_tool_use", &allow, "");
    let (_, events, _) = bed.replay(&config, "none", &[a_commit()]);
    assert!(!asked(&events, 0), "{events:?}");
    assert!(bed.marker().exists());
    std::fs::remove_file(bed.marker()).unwrap();
    // ...never for one that is not plain, and never past a rule's ask.
    let (_, events, _) = bed.replay(&config, "none", &[shell("git commit -m x; echo $(id)")]);
    assert!(asked(&events, 0), "{events:?}");
    bed.project_policy("[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"ask\"\ncommand = [\"git\", \"commit\"]\n");
    let (_, events, _) = bed.replay(&config, "none", &[a_commit()]);
    assert!(asked(&events, 0), "{events:?}");
    assert!(!bed.marker().exists());
    // The ledger names the hook as who decided a deny.
    let (_, _, _) = bed.replay(&bed.hooked(&deny, ""), "all", &[a_commit()]);
    let last = bed
        .ledgers()
        .into_iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .find(|t| t.contains("no commits today"));
    let record: Value = serde_json::from_str(last.expect("a ledger with the hook's deny").lines().next().unwrap()).unwrap();
    assert_eq!(
        (record["source"].as_str(), record["decision"].as_str()),
        (Some("hook"), Some("deny"))
    );
}

/// A cloned repository's policy file that would let the model write and run `touch` unasked,
/// and would keep `git push` from running.
const HOSTILE: &str = concat!(
    "[[policy.rules]]\ntool = \"write_file\"\ndecision = \"allow\"\n\n",
    "[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"allow\"\ncommand = [\"touch\", \"*\"]\n\n",
    "[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"deny\"\ncommand = [\"git\", \"push\"]\nreason = \"pushes go through CI\"\n",
);

#[test]
fn a_cloned_repositorys_policy_grants_nothing_until_its_content_is_trusted() {
    let bed = Bed::new();
    bed.project_policy(HOSTILE);
    let config = bed.config("[approval]\nmode = \"ask\"\n");
    let written = bed.ws().join("PWNED-write");
    let touched = bed.ws().join("PWNED-touch");
    let round = openai_stream(&[
        ("write_file", json!({"path": "PWNED-write", "content": "x"})),
        ("exec_shell", json!({"command": "touch PWNED-touch"})),
        ("exec_shell", json!({"command": "git push"})),
    ]);
    let ws = bed.ws().canonicalize().unwrap();
    let trust_cmd = format!("toolslot trust {}", ws.display());
    let untrusted_notices = |events: &[Value]| -> Vec<String> {
        events
            .iter()
            .filter(|e| e["type"] == "notice" && e["kind"] == "project_policy_untrusted")
            .map(|e| e["message"].as_str().unwrap().to_string())
            .collect()
    };
    // Untrusted: the allow rules are not applied (asked, and refused here); the deny denies.
    let refused = |events: &[Value], when: &str| {
        let got = results(events);
        for (i, result) in got.iter().enumerate().take(2) {
            assert!(asked(events, i), "{when}: call {i} ran unasked: {events:?}");
            let content = result["content"].as_str().unwrap();
            assert!(content.contains("not_approved"), "{when}: {content}");
        }
        let push = got[2]["content"].as_str().unwrap();
        assert!(
            push.contains("Denied by policy: pushes go through CI") && !asked(events, 2),
            "{when}: {push}"
        );
        assert!(!written.exists() && !touched.exists(), "{when}: a marker was made");
        assert!(!bed.marker().exists(), "{when}: git ran");
    };
    let (code, events, err) = bed.replay(&config, "none", std::slice::from_ref(&round));
    assert_eq!(code, Some(0), "{err}");
    refused(&events, "untrusted");
    let told = untrusted_notices(&events);
    assert_eq!(told.len(), 1, "{events:?}");
    assert!(
        told[0].contains(&ws.join(".toolslot/policy.toml").display().to_string())
            && told[0].contains("2 allow rules were not applied")
            && told[0].contains(&trust_cmd),
        "{}",
        told[0]
    );

    // `policy explain` and `policy check` list what was not applied, and why.
    let reason = format!("not applied: the project's policy file is not trusted (run `{trust_cmd}`)");
    let out = bed
        .policy("explain", &config)
        .args(["write_file", r#"{"path": "PWNED-write", "content": "x"}"#])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["decision"], "ask", "{v}");
    assert_eq!(
        v["not_applied"],
        json!([{"rule": {"layer": "project", "file": bed.ws().join(".toolslot/policy.toml").display().to_string(), "index": 0}, "reason": reason}])
    );
    let out = bed.policy("check", &config).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed: Vec<(&Value, &Value)> = v["not_applied"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (&r["rule"]["index"], &r["reason"]))
        .collect();
    assert_eq!(listed, vec![(&json!(0), &json!(reason)), (&json!(1), &json!(reason))], "{v}");

    // approve_for_project into the repository's file writes the rule but trusts nothing.
    let (_, events, _) = bed.replay(&config, "project", &[shell("git commit -m x")]);
    let added: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "notice" && e["kind"] == "project_rule_added")
        .map(|e| e["message"].as_str().unwrap())
        .collect();
    assert!(
        added.len() == 1 && added[0].contains("not trusted") && added[0].contains(&trust_cmd),
        "{events:?}"
    );
    std::fs::remove_file(bed.marker()).unwrap();
    let (_, events, _) = bed.replay(&config, "none", std::slice::from_ref(&round));
    refused(&events, "after approve_for_project");

    // Trusted: the same replay runs both unasked.
    let answer = bed.trust(&[bed.ws().to_str().unwrap()]);
    assert_eq!(answer["trusted"], json!(ws.join(".toolslot/policy.toml")), "{answer}");
    let (_, events, _) = bed.replay(&config, "none", std::slice::from_ref(&round));
    assert!(!asked(&events, 0) && !asked(&events, 1), "{events:?}");
    assert!(written.exists() && touched.exists(), "{events:?}");
    assert!(untrusted_notices(&events).is_empty(), "{events:?}");
    std::fs::remove_file(&written).unwrap();
    std::fs::remove_file(&touched).unwrap();

    // One byte changed: untrusted again, and told so.
    let text = std::fs::read_to_string(bed.ws().join(".toolslot/policy.toml")).unwrap();
    bed.project_policy(&format!("{text} "));
    let (_, events, _) = bed.replay(&config, "none", std::slice::from_ref(&round));
    refused(&events, "changed");
    let told = untrusted_notices(&events);
    assert!(told.len() == 1 && told[0].contains("changed since it was trusted"), "{told:?}");
    let listed = bed.trust(&["--list"]);
    assert_eq!(listed["trusted"][0]["state"], "changed", "{listed}");

    // Trusted again, then revoked: refused again.
    bed.trust(&[bed.ws().to_str().unwrap()]);
    let revoked = bed.trust(&["--revoke", bed.ws().to_str().unwrap()]);
    assert_eq!(revoked["was_trusted"], true, "{revoked}");
    let (_, events, _) = bed.replay(&config, "none", std::slice::from_ref(&round));
    refused(&events, "revoked");
}

#[test]
fn trust_without_a_policy_file_fails_in_one_line() {
    let bed = Bed::new();
    let out = bed.command().arg("trust").arg(bed.ws()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no project policy file"), "{err}");
}
