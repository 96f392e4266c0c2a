//! Policy rules, hooks and the ledger through the binary (`toolslot replay`, `toolslot policy`,
//! `toolslot ledger`), as an attacker would: a denied command written every way a shell reads
//! the same program, asserting that the program did not run (a marker its stand-in writes is
//! not there) and that the call was refused or asked, never run unasked.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

fn toolslot() -> Command {
    Command::new(env!("CARGO_BIN_EXE_toolslot"))
}

/// An OpenAI Chat response calling `calls` (name, arguments), as SSE.
fn openai_stream(calls: &[(&str, Value)]) -> String {
    let mut out = String::new();
    for (n, (name, args)) in calls.iter().enumerate() {
        let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": n, "id": format!("call_{n}"), "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}, "finish_reason": null}]});
        out.push_str(&format!("data: {chunk}\n\n"));
    }
    out.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n");
    out
}

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
        let git = bed.dir.path().join("bin/git");
        // It says it ran on stdout, and leaves a marker where it may write.
        std::fs::write(
            &git,
            format!(
                "#!/bin/sh\necho \"STAND-IN GIT RAN: $@\"\necho \"$@\" >> '{}'\n",
                bed.marker().display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&git, std::fs::Permissions::from_mode(0o755)).unwrap();
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
        let mut c = toolslot();
        let path = format!(
            "{}:{}",
            self.dir.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        c.env("HOME", self.home()).env("PATH", path);
        c
    }
    /// Runs rounds through `toolslot replay`: exit status, events, stderr.
    fn replay(&self, config: &Path, approve: &str, rounds: &[String]) -> (Option<i32>, Vec<Value>, String) {
        let mut files = Vec::new();
        for (n, body) in rounds.iter().enumerate() {
            let f = self.dir.path().join(format!("round-{n}.sse"));
            std::fs::write(&f, body).unwrap();
            files.push(f);
        }
        let out = self
            .command()
            .args(["replay", "--approve", approve, "--workspace"])
            .arg(self.ws())
            .arg("--config")
            .arg(config)
            .args(&files)
            .output()
            .unwrap();
        let events = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (out.status.code(), events, String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn results(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == "round_complete")
        .flat_map(|e| e["results"].as_array().unwrap().clone())
        .collect()
}

fn asked(events: &[Value], index: usize) -> bool {
    events.iter().any(|e| e["type"] == "approval_required" && e["index"] == index)
}

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
        let out = bed
            .command()
            .args(["policy", "explain", "--config"])
            .arg(&config)
            .arg("--workspace")
            .arg(bed.ws())
            .args([tool, &input.to_string()])
            .output()
            .unwrap();
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

    let check = || {
        bed.command()
            .args(["policy", "check", "--config"])
            .arg(&config)
            .arg("--workspace")
            .arg(bed.ws())
            .output()
            .unwrap()
    };
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
        let (code, _, err) = bed.replay(&config, "none", &[openai_stream(&[("exec_shell", json!({"command": "ls"}))])]);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("rule 0"), "{err}");
    }
}
