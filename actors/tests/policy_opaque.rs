//! Commands whose words do not say what runs, through the binary (`toolslot replay`, `toolslot
//! policy explain`) as an attacker would: with `rm` and `git push` denied by a rule, a program
//! that runs text as code (`sh` reading its input, `python3 -c`, `awk`, `find -exec`, an alias,
//! a git alias), a wrapper option the judgement does not model exactly (`env -S`,
//! `timeout --sig`), or a glob (`/bin/r?`, `cat secret?/prod.key`) is asked (and refused here)
//! or denied, in full-auto and in ask mode under an allow-all rule, and the victim file is
//! still there afterwards.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use support::{bin, json_lines, openai_stream, replay_with, round_results as results};

/// A workspace holding a victim file and a secret, a home, and a stand-in `git` on the PATH
/// that leaves a marker in the workspace when it runs.
struct Bed {
    dir: tempfile::TempDir,
}

impl Bed {
    fn new() -> Self {
        // Not under /tmp: a call cleared to write gets a private /tmp, which would hide the
        // stand-in and let the real git run instead.
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let bed = Bed { dir };
        for d in ["ws/secrets", "home", "bin"] {
            std::fs::create_dir_all(bed.dir.path().join(d)).unwrap();
        }
        std::fs::write(bed.victim(), "precious\n").unwrap();
        std::fs::write(bed.ws().join("secrets/prod.key"), "SECRET-PROD-KEY-5e1d\n").unwrap();
        std::fs::write(bed.ws().join("README.md"), "readme\n").unwrap();
        // It says it ran on stdout, and leaves a marker where it may write.
        support::stand_in(&bed.dir.path().join("bin"), "git", &bed.marker());
        bed
    }
    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }
    fn victim(&self) -> PathBuf {
        self.ws().join("victim")
    }
    fn marker(&self) -> PathBuf {
        self.ws().join("PWNED-git")
    }
    /// A config with `rm` and `git push` denied by rules, and `extra`.
    fn config(&self, extra: &str) -> PathBuf {
        let file = self.dir.path().join("toolslot.toml");
        std::fs::write(
            &file,
            format!(
                "[overflow]\ndir = \"{}\"\n[audit]\nledger_dir = \"{}\"\n[policy]\nmanaged_file = \"{}\"\n{extra}\n{DENY}",
                self.dir.path().join("overflow").display(),
                self.dir.path().join("ledger").display(),
                self.dir.path().join("managed.toml").display(),
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
        c.env("HOME", self.dir.path().join("home")).env("PATH", path);
        c
    }
    /// One round of shell calls through `toolslot replay`: its events.
    fn replay(&self, config: &Path, approve: &str, commands: &[&str]) -> Vec<Value> {
        let calls: Vec<(&str, Value)> = commands.iter().map(|c| ("exec_shell", json!({ "command": c }))).collect();
        let out = replay_with(
            self.command(),
            self.dir.path(),
            &self.ws(),
            config,
            approve,
            &[openai_stream(&calls)],
        );
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        json_lines(&out.stdout)
    }
    /// `toolslot policy explain exec_shell {"command": COMMAND}`: its one line.
    fn explain(&self, config: &Path, command: &str) -> Value {
        let out = self
            .command()
            .args(["policy", "explain", "--config"])
            .arg(config)
            .arg("--workspace")
            .arg(self.ws())
            .args(["exec_shell", &json!({ "command": command }).to_string()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

const DENY: &str = concat!(
    "[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"deny\"\ncommand = [\"rm\"]\nreason = \"nothing is removed\"\n\n",
    "[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"deny\"\ncommand = [\"git\", \"push\"]\nreason = \"pushes go through CI\"\n\n",
    "[[policy.rules]]\ntool = \"*\"\ndecision = \"deny\"\npath = \"secrets/**\"\nreason = \"secrets stay put\"\n",
);

const FULL_AUTO: &str = "[approval]\nmode = \"full-auto\"\n";

/// Ask mode, with a rule that would run every shell command unasked: only the deny rules (and
/// their doubts) stand between the model and `rm`.
const ASK_ALLOWING: &str = "[approval]\nmode = \"ask\"\n\n[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"allow\"\n";

/// Every way of reaching a denied `rm victim` (or `git push`) the judgement must not read as
/// something else, one class after the other.
const SPELLINGS: &[&str] = &[
    // 1. Programs that run text as code.
    "echo rm victim | sh",
    "printf 'rm victim\\n' | bash",
    "sh <<'EOF'\nrm victim\nEOF",
    "bash <<< 'rm victim'",
    "echo 'rm victim' > x.sh; sh x.sh",
    "echo 'rm victim' > y.sh; . ./y.sh",
    "alias r=rm\nr victim",
    "shopt -s expand_aliases; alias r=rm\nr victim",
    "trap 'rm victim' EXIT",
    "trap -- \"r\"'m victim' EXIT; true",
    "f() { \"$@\"; }; f rm victim",
    "eval \"$(printf rm) victim\"",
    "find . -name victim -exec rm {} +",
    "find . -name victim -execdir rm {} ;",
    "python3 -c \"import os; os.remove('victim')\"",
    "python3 - <<'EOF'\nimport os; os.remove('victim')\nEOF",
    "perl -e 'unlink q(victim)'",
    "awk 'BEGIN{system(\"rm victim\")}'",
    "awk 'BEGIN{print \"rm victim\" | \"sh\"}'",
    "sed -n '1e rm victim' README.md",
    "sed 's/.*/rm victim/e' README.md",
    "script -qc 'rm victim' /dev/null",
    "echo victim | xargs -I{} sh -c 'rm {}'",
    "echo rm victim | xargs env",
    "echo rm victim | xargs -L1 timeout 5",
    "printf 'x:\\n\\trm victim\\n' > mk; make -f mk x",
    "BASH_ENV=./x.sh bash -c true",
    "x='a[$(rm victim)]'; echo $(( x ))",
    "git -c alias.p=push p",
    "git -c alias.p='!rm victim' p",
    "git --config-env=alias.p=HOME p",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.p GIT_CONFIG_VALUE_0=push git p",
    "git p origin main",
    // 2. Wrapper options the judgement does not model exactly.
    "env -S'rm victim'",
    "env -S 'rm victim'",
    "env -iS'/bin/rm victim'",
    "env --sp='rm victim'",
    "env --split='rm victim'",
    "env --chd=. rm victim",
    "env -iu HOME /bin/rm victim",
    "timeout --sig KILL 5 rm victim",
    "timeout --kill=1 5 rm victim",
    "nice --adj 5 rm victim",
    "stdbuf --out L rm victim",
    "flock --conf 1 victim.lock rm victim",
    "flock victim.lock -c 'rm victim'",
    "ionice --classd 3 rm victim",
    "T='5 rm'; timeout $T victim",
    // 3. Globs as the program word.
    "/bin/r? victim",
    "/bin/[r]m victim",
    "/u?r/bin/rm victim",
    "/usr/bin/[r]m -f victim",
    "env /bin/r? victim",
];

/// Each call of `commands` was refused: denied by a rule, or asked and (answered `none`) not
/// approved; none ran.
#[track_caller]
fn all_refused(events: &[Value], commands: &[&str], when: &str) {
    let got = results(events);
    assert_eq!(got.len(), commands.len(), "{when}: {events:?}");
    let asked = |i: usize| events.iter().any(|e| e["type"] == "approval_required" && e["index"] == i);
    let mut ran = Vec::new();
    for (i, (command, result)) in commands.iter().zip(&got).enumerate() {
        let content = result["content"].as_str().unwrap_or_default();
        let denied = content.contains("Denied by policy") && !asked(i);
        let refused = asked(i) && content.contains("not_approved");
        if !(denied || refused) || content.contains("STAND-IN GIT RAN") {
            ran.push(format!("{command:?}: {content}"));
        }
    }
    assert!(ran.is_empty(), "{when}: ran unasked:\n{}", ran.join("\n"));
}

#[test]
fn code_run_as_text_is_asked_even_in_full_auto_and_the_victim_survives() {
    let bed = Bed::new();
    let config = bed.config(FULL_AUTO);
    let events = bed.replay(&config, "none", SPELLINGS);
    all_refused(&events, SPELLINGS, "full-auto");
    assert!(bed.victim().exists(), "the victim was removed");
    assert!(!bed.marker().exists(), "git ran: {:?}", std::fs::read_to_string(bed.marker()));

    // The control: in the same mode, what the rules do not name runs unasked and has its effect,
    // so a spelling that got through would have removed the victim.
    let events = bed.replay(&config, "none", &["touch made", "git commit -m x", "ls -la"]);
    assert!(!events.iter().any(|e| e["type"] == "approval_required"), "{events:?}");
    assert!(bed.ws().join("made").exists(), "{events:?}");
    assert!(bed.marker().exists(), "the stand-in git did not run: {events:?}");
}

#[test]
fn code_run_as_text_is_asked_in_ask_mode_past_an_allow_rule() {
    let bed = Bed::new();
    let config = bed.config(ASK_ALLOWING);
    let events = bed.replay(&config, "none", SPELLINGS);
    all_refused(&events, SPELLINGS, "ask mode, allow-all rule");
    assert!(bed.victim().exists(), "the victim was removed");
    assert!(!bed.marker().exists(), "git ran");

    // The control: the allow rule runs a plain command unasked.
    let events = bed.replay(&config, "none", &["touch made"]);
    assert!(!events.iter().any(|e| e["type"] == "approval_required"), "{events:?}");
    assert!(bed.ws().join("made").exists(), "{events:?}");
}

#[test]
fn a_glob_among_the_arguments_is_the_paths_it_can_name() {
    let bed = Bed::new();
    let config = bed.config(FULL_AUTO);
    // They expand to the secret now: denied.
    let denied = [
        "cat secret?/prod.key",
        "cat */prod.key",
        "cat [s]ecrets/prod.key",
        "head -n1 s*/p*",
        "cat secrets/p?od.key",
        "tail ./secre[t]s/*",
        "grep -r SECRET s*",
    ];
    // They may name it once the line has run: asked.
    let asked = [
        "mkdir -p secretz && cp secrets/prod.key secretz/ && cat secret?/prod.key2",
        "cat < secret?/prod.key",
    ];
    let all: Vec<&str> = denied.iter().chain(&asked).copied().collect();
    let events = bed.replay(&config, "none", &all);
    all_refused(&events, &all, "globs");
    for (i, r) in results(&events).iter().enumerate() {
        let content = r["content"].as_str().unwrap_or_default();
        assert!(!content.contains("SECRET-PROD-KEY"), "{}: {content}", all[i]);
        if i < denied.len() {
            assert!(content.contains("secrets stay put"), "{}: {content}", all[i]);
        }
    }
    // The control: a glob that cannot name the secret runs.
    let events = bed.replay(&config, "none", &["cat *.md"]);
    assert!(
        results(&events)[0]["content"].as_str().unwrap_or_default().contains("readme"),
        "{events:?}"
    );
}

#[test]
fn policy_explain_says_why_a_command_is_opaque() {
    let bed = Bed::new();
    let config = bed.config(FULL_AUTO);
    for (command, why) in [
        ("echo rm victim | sh", "opaque: `sh` reads commands from its input"),
        ("env -S'ls victim'", "opaque: `env -S` splits its argument into a command"),
        (
            "/nowhere/r? victim",
            "opaque: the program word `/nowhere/r?` is a glob: it may name any program",
        ),
        (
            "timeout --sig KILL 5 ls victim",
            "opaque: `timeout --sig` is an option the judgement does not know exactly",
        ),
        ("python3 -c 'print(1)'", "opaque: `python3 -c` runs its argument as code"),
        ("git -c alias.p=push p", "opaque: `git -c` sets configuration"),
        (
            "cat secret?/missing",
            "`secret?/missing` is a glob: it may expand to a path the rule names",
        ),
    ] {
        let v = bed.explain(&config, command);
        assert_eq!(v["decision"], "ask", "{command}: {v}");
        let reason = v["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("may apply: ") && reason.contains(why), "{command}: {reason}");
    }
    let v = bed.explain(&config, "echo rm victim | sh");
    assert_eq!(v["opaque"], json!(["`sh` reads commands from its input"]), "{v}");
    assert_eq!(v["segments"][1]["opaque"], json!(["`sh` reads commands from its input"]), "{v}");
    assert_eq!(v["segments"][0]["opaque"], json!([]), "{v}");
    let v = bed.explain(&config, "cat secret?/missing");
    assert_eq!(v["segments"][0]["patterns"], json!(["secret?/missing"]), "{v}");
    // What the words show is denied with the rule's own reason; what cannot match is allowed.
    for command in ["env -S'rm victim'", "timeout --sig KILL 5 rm victim", "sh -c 'rm victim'"] {
        let v = bed.explain(&config, command);
        assert_eq!(
            (v["decision"].as_str(), v["reason"].as_str()),
            (Some("deny"), Some("nothing is removed")),
            "{v}"
        );
    }
    let v = bed.explain(&config, "ls -la");
    assert_eq!((v["decision"].as_str(), v["opaque"].clone()), (Some("allow"), json!([])), "{v}");
}
