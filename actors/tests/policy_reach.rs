//! Rules that hold against the whole shell language, enforced where no spelling reaches,
//! through the binary (`toolslot replay`) as an attacker would: in full-auto, and in ask mode
//! with every question answered no, asserting that the side effect did not happen (the victim
//! file is still there, the secret's bytes are in no result, the model's fsmonitor program never
//! runs when the user runs `git status` afterwards).
//!
//! - The program is what runs, not what it is called: a link to `rm`, a copy of it, `git
//!   send-pack` for a denied `git push`.
//! - A path deny holds for every way of reading: recursive tools, `grep -r`, `tar`, `find
//!   -exec`, `cd`, `env -C`, symlinks (the sandbox masks what the rule names).
//! - Files git reads as code (everything under `.git`, a `.git` file, what `commondir` names)
//!   are never written by the write tools, and a shell command that writes there is asked.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use support::{bin, json_lines, openai_stream, replay_with, round_results as results};

/// Bytes of the secret; no result may ever hold them.
const SECRET: &str = "TOPSECRET-5e1f-prod-key";

/// A workspace (not under /tmp: a call cleared to write gets a private /tmp), a home, a `bin`
/// folder first on the PATH for stand-ins.
struct Bed {
    dir: tempfile::TempDir,
}

impl Bed {
    fn new() -> Self {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let bed = Bed { dir };
        for d in ["ws/src", "ws/secrets/v2", "home", "bin"] {
            std::fs::create_dir_all(bed.dir.path().join(d)).unwrap();
        }
        std::fs::write(bed.ws().join("victim.txt"), "keep me\n").unwrap();
        std::fs::write(bed.ws().join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(bed.ws().join("secrets/prod.key"), format!("{SECRET}\n")).unwrap();
        // `current/../prod.key` is `secrets/prod.key` to the kernel, `prod.key` to the words.
        std::os::unix::fs::symlink("secrets/v2", bed.ws().join("current")).unwrap();
        bed
    }
    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }
    fn victim(&self) -> PathBuf {
        self.ws().join("victim.txt")
    }
    fn config(&self, extra: &str) -> PathBuf {
        let file = self.dir.path().join("toolslot.toml");
        std::fs::write(
            &file,
            format!(
                "[overflow]\ndir = \"{}\"\n[audit]\nledger_dir = \"\"\n[policy]\nmanaged_file = \"{}\"\ntrust_file = \"\"\n{extra}\n",
                self.dir.path().join("overflow").display(),
                self.dir.path().join("managed.toml").display()
            ),
        )
        .unwrap();
        file
    }
    /// A stand-in program in the bed's `bin`, first on the PATH: it says it ran and leaves a
    /// marker in the workspace.
    fn stand_in(&self, name: &str) -> PathBuf {
        support::stand_in(&self.dir.path().join("bin"), name, &self.marker())
    }
    fn marker(&self) -> PathBuf {
        self.ws().join("PWNED-stand-in")
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
    /// `toolslot replay` of `rounds` (lists of calls): its events (it must exit 0).
    fn replay(&self, config: &Path, approve: &str, rounds: &[Vec<(&str, Value)>]) -> Vec<Value> {
        let rounds: Vec<String> = rounds.iter().map(|calls| openai_stream(calls)).collect();
        let out = replay_with(self.command(), self.dir.path(), &self.ws(), config, approve, &rounds);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        json_lines(&out.stdout)
    }
}

/// The first program of `name` on the test's PATH (the machine's own `rm`).
fn installed(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("`{name}` is not on PATH"))
}

fn asked(events: &[Value], index: usize) -> bool {
    events.iter().any(|e| e["type"] == "approval_required" && e["index"] == index)
}

fn content(r: &Value) -> &str {
    r["content"].as_str().unwrap_or_default()
}

/// Whether a result is a rule's refusal (a deny is never asked: the result of an asked call
/// that was answered no says `not approved`, not `Denied by policy`).
fn denied(r: &Value) -> bool {
    content(r).starts_with("Denied by policy")
}

const DENY_RM: &str =
    "[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"deny\"\ncommand = [\"rm\"]\nreason = \"nothing is deleted here\"\n";

#[test]
fn a_denied_program_is_denied_under_any_name() {
    let rm = installed("rm");
    for mode in ["full-auto", "ask"] {
        let bed = Bed::new();
        let config = bed.config(&format!("[approval]\nmode = \"{mode}\"\n{DENY_RM}"));
        let rm_s = rm.display().to_string();
        // Round 1 makes a link to rm and a copy of it (neither runs rm); round 2 runs them.
        let round1 = vec![
            ("exec_shell", json!({"command": format!("ln -s {rm_s} del")})),
            ("exec_shell", json!({"command": format!("cp {rm_s} tidy")})),
        ];
        let round2 = vec![
            ("exec_shell", json!({"command": "./del victim.txt"})),
            ("exec_shell", json!({"command": "./tidy -f victim.txt"})),
            ("exec_shell", json!({"command": "sh -c './del victim.txt'"})),
            ("exec_shell", json!({"command": "cd src && ../del ../victim.txt"})),
        ];
        let events = bed.replay(&config, if mode == "ask" { "all" } else { "none" }, &[round1, round2]);
        let got = results(&events);
        assert_eq!(got.len(), 6, "{mode}: {events:?}");
        for r in &got[2..] {
            assert!(denied(r), "{mode}: not denied: {}", content(r));
            assert!(content(r).contains("nothing is deleted here"), "{mode}: {}", content(r));
        }
        assert!(bed.victim().exists(), "{mode}: rm ran under another name");

        // The link made in the same command line cannot be known now: asked, and not run.
        let config = bed.config(&format!("[approval]\nmode = \"{mode}\"\n{DENY_RM}"));
        let events = bed.replay(
            &config,
            "none",
            &[vec![
                ("exec_shell", json!({"command": format!("ln -sf {rm_s} del2 && ./del2 victim.txt")})),
                ("exec_shell", json!({"command": format!("cp {rm_s} ./x; ./x victim.txt")})),
            ]],
        );
        for (i, r) in results(&events).iter().enumerate() {
            assert!(asked(&events, i) && content(r).contains("not_approved"), "{mode}: {}", content(r));
        }
        assert!(bed.victim().exists(), "{mode}: rm ran under a name made on the same line");
        assert!(!bed.ws().join("del2").exists(), "{mode}: the line ran");
    }
}

#[test]
fn a_denied_git_push_covers_the_plumbing_that_pushes() {
    let bed = Bed::new();
    bed.stand_in("git");
    bed.stand_in("ssh");
    let deny =
        "[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"deny\"\ncommand = [\"git\", \"push\"]\nreason = \"pushes go through CI\"\n";
    for mode in ["full-auto", "ask"] {
        let config = bed.config(&format!("[approval]\nmode = \"{mode}\"\n{deny}"));
        let calls = vec![
            ("exec_shell", json!({"command": "git send-pack origin main"})),
            ("exec_shell", json!({"command": "git -C . http-push https://example.com/r main"})),
            ("exec_shell", json!({"command": "git-send-pack origin main"})),
            ("exec_shell", json!({"command": "ssh host git-receive-pack repo.git"})),
        ];
        let events = bed.replay(&config, "none", &[calls]);
        let got = results(&events);
        for r in &got[..3] {
            assert!(denied(r), "{mode}: {}", content(r));
        }
        // Another program's arguments may run there: asked, and answered no.
        assert!(
            asked(&events, 3) && content(&got[3]).contains("not_approved"),
            "{mode}: {}",
            content(&got[3])
        );
        assert!(!bed.marker().exists(), "{mode}: a stand-in ran");
    }
}

const DENY_SECRETS: &str = "[[policy.rules]]\ntool = \"*\"\ndecision = \"deny\"\npath = \"secrets/**\"\nreason = \"secrets stay secret\"\n";

/// Every way of reading the secret that a model might try.
fn readers() -> Vec<(&'static str, Value)> {
    vec![
        ("grep_files", json!({"pattern": "TOPSECRET"})),
        ("grep_files", json!({"pattern": "TOPSECRET", "path": "."})),
        ("list_dir", json!({"depth": 3})),
        ("read_file", json!({"path": "current/../prod.key"})),
        ("exec_shell", json!({"command": "grep -r TOPSECRET ."})),
        ("exec_shell", json!({"command": "grep -rl TOPSECRET"})),
        ("exec_shell", json!({"command": "cat current/../prod.key"})),
        ("exec_shell", json!({"command": "tar cf - ."})),
        ("exec_shell", json!({"command": "find . -type f -exec cat {} +"})),
        ("exec_shell", json!({"command": "cd src && cat ../secrets/prod.key"})),
        ("exec_shell", json!({"command": "env -C src cat ../secrets/prod.key"})),
        ("exec_shell", json!({"command": "ln -s secrets s && cat s/prod.key"})),
        ("exec_shell", json!({"command": "cat \"$(printf sec)rets/prod.key\""})),
        (
            "exec_shell",
            json!({"command": "python3 -c \"print(open('sec'+'rets/prod.key').read())\""}),
        ),
        ("exec_shell", json!({"command": "sh -c 'cd secrets && cat *'"})),
    ]
}

fn assert_no_secret(events: &[Value], what: &str) {
    for r in results(events) {
        assert!(!content(&r).contains(SECRET), "{what}: the secret was read: {}", content(&r));
    }
    for e in events {
        assert!(!e.to_string().contains(SECRET), "{what}: the secret is in an event: {e}");
    }
}

#[test]
fn a_path_deny_holds_for_every_way_of_reading() {
    // Under bubblewrap the masks hold for every call; under Landlock for calls that run
    // without a write grant (what ask mode runs unasked), see docs/ARCHITECTURE.md.
    for (sandbox, mode) in [("bwrap", "full-auto"), ("bwrap", "ask"), ("landlock", "ask")] {
        let bed = Bed::new();
        let config = bed.config(&format!(
            "[approval]\nmode = \"{mode}\"\n[shell]\nsandbox = \"{sandbox}\"\n{DENY_SECRETS}"
        ));
        let calls = readers();
        let events = bed.replay(&config, "none", std::slice::from_ref(&calls));
        let what = format!("{mode} under {sandbox}");
        assert_no_secret(&events, &what);
        let got = results(&events);
        assert_eq!(got.len(), calls.len(), "{what}");
        // What names the secret is refused by the rule, however it is spelled.
        for i in [3, 6, 9, 10, 11] {
            assert!(denied(&got[i]), "{what}: {:?} not denied: {}", calls[i], content(&got[i]));
        }
        // What cannot be sure asks, even in full-auto.
        assert!(
            asked(&events, 12),
            "{what}: an expansion that may name the secret ran unasked: {}",
            content(&got[12])
        );
        // What reads everything ran (the masks, not the judgement, kept the secret).
        for i in [0, 4] {
            assert!(!asked(&events, i) && !denied(&got[i]), "{what}: {}", content(&got[i]));
        }
        assert!(
            content(&got[0]).contains("paths the policy denies were not searched"),
            "{what}: {}",
            content(&got[0])
        );
        assert!(!content(&got[2]).contains("prod.key"), "{what}: {}", content(&got[2]));
        if mode == "full-auto" {
            // A reader of everything that needs approval ran (the mode approved it), and read
            // only the mask.
            assert!(!asked(&events, 7) && !denied(&got[7]), "{what}: {}", content(&got[7]));
        }
        assert!(bed.ws().join("secrets/prod.key").exists());
    }
}

/// A repository in the bed's workspace, and `git status` as the user runs it afterwards,
/// outside toolslot.
fn git(ws: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(ws)
        .output()
        .unwrap()
}

#[test]
fn the_files_git_reads_as_code_stay_as_they_were() {
    for mode in ["auto-edit", "full-auto", "ask"] {
        let bed = Bed::new();
        let ws = bed.ws();
        assert!(git(&ws, &["init", "-q"]).status.success());
        std::fs::create_dir_all(ws.join("lib/sub")).unwrap();
        let fired = ws.join("PWNED-fsmonitor");
        let evil = format!("[core]\n\tfsmonitor = touch {}; echo\n", fired.display());
        let config = bed.config(&format!("[approval]\nmode = \"{mode}\"\n"));
        let writes = vec![
            // A folder of the model's own, with a config that runs its program...
            ("write_file", json!({"path": "evil/config", "content": evil})),
            // ...and every way of making git read it as its config.
            ("write_file", json!({"path": ".git/commondir", "content": "../evil\n"})),
            ("write_file", json!({"path": ".git/config", "content": evil})),
            ("write_file", json!({"path": ".git/config.worktree", "content": evil})),
            ("write_file", json!({"path": ".git/info/attributes", "content": "* diff=x\n"})),
            ("write_file", json!({"path": "lib/sub/.git", "content": "gitdir: ../../evil\n"})),
            ("write_file", json!({"path": "lib/sub/.git/config", "content": evil})),
            ("edit_file", json!({"path": ".git/HEAD", "search": "ref", "replace": "ref"})),
        ];
        // Approved where the mode asks: the tools themselves must refuse.
        let events = bed.replay(&config, "all", std::slice::from_ref(&writes));
        let got = results(&events);
        assert!(ws.join("evil/config").exists(), "{mode}: {}", content(&got[0]));
        for (i, r) in got.iter().enumerate().skip(1) {
            assert!(
                r["is_error"] == true && content(r).contains("is protected"),
                "{mode}: {:?}: {}",
                writes[i],
                content(r)
            );
        }
        assert!(!ws.join(".git/commondir").exists() && !ws.join("lib/sub/.git").exists(), "{mode}");
        if mode != "full-auto" {
            // A shell command that writes is Required: asked (and answered no) in every mode
            // but full-auto, where the user has cleared every command to write.
            let shell = vec![
                ("exec_shell", json!({"command": "printf ../evil > .git/commondir"})),
                (
                    "exec_shell",
                    json!({"command": "git config core.fsmonitor 'touch PWNED-fsmonitor'"}),
                ),
                ("exec_shell", json!({"command": "cp evil/config .git/config"})),
            ];
            let events = bed.replay(&config, "none", &[shell]);
            for (i, r) in results(&events).iter().enumerate() {
                assert!(asked(&events, i) && content(r).contains("not_approved"), "{mode}: {}", content(r));
            }
        }
        // The user runs git afterwards, outside toolslot: the model's program never runs.
        for dir in [ws.clone(), ws.join("lib/sub")] {
            let _ = git(&dir, &["status"]);
        }
        assert!(
            !fired.exists(),
            "{mode}: the model's fsmonitor program ran at the user's git status"
        );
    }
}

#[test]
fn a_projects_policy_file_is_read_only_as_the_workspaces_own() {
    // A checkout's `.toolslot/policy.toml` that is a link out of it, or a FIFO: toolslot must
    // neither read without end (`/dev/zero`), nor read its own input (`/dev/stdin`), nor take a
    // file from elsewhere (a secret, another project's rules), nor wait on a FIFO for ever.
    let bed = Bed::new();
    let outside = bed.dir.path().join("outside.toml");
    std::fs::write(&outside, format!("[[policy.rules]]\ntool = \"{SECRET}\"\ndecision = \"deny\"\n")).unwrap();
    let config = bed.config("");
    let policy = bed.ws().join(".toolslot/policy.toml");
    std::fs::create_dir_all(policy.parent().unwrap()).unwrap();
    let explain_ls = || {
        let mut c = bed.command();
        c.args(["policy", "explain", "--config"])
            .arg(&config)
            .arg("--workspace")
            .arg(bed.ws())
            .args(["exec_shell", r#"{"command": "ls"}"#]);
        c
    };
    for what in ["/dev/zero", "/dev/stdin", "a file outside", "a FIFO"] {
        let _ = std::fs::remove_file(&policy);
        match what {
            "a FIFO" => assert!(Command::new("mkfifo").arg(&policy).status().unwrap().success()),
            "a file outside" => std::os::unix::fs::symlink(&outside, &policy).unwrap(),
            target => std::os::unix::fs::symlink(target, &policy).unwrap(),
        }
        let mut child = explain_ls()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Its stdin stays open: a read of it would never end.
        let stdin = child.stdin.take();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("{what}: toolslot is still reading the project's policy file");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(2), "{what}: {stdout} {stderr}");
        assert!(
            stderr.contains(".toolslot/policy.toml") && stderr.contains("not read"),
            "{what}: {stderr}"
        );
        assert_eq!(stderr.trim().lines().count(), 1, "{what}: {stderr}");
        assert!(!stdout.contains(SECRET) && !stderr.contains(SECRET), "{what}: {stdout} {stderr}");
    }
    // The workspace's own file is read as before.
    std::fs::remove_file(&policy).unwrap();
    std::fs::write(&policy, "[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"deny\"\n").unwrap();
    let out = explain_ls().output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"deny\""));
}

#[test]
fn a_folder_above_a_hidden_path_cannot_be_renamed_to_unhide_it() {
    // A command cleared to write (full-auto) renames a folder that holds what a rule denies, or
    // moves the hidden folder aside; the file tools, which judge paths by their names, would
    // then read it under the new name. Under bubblewrap every folder on the way to a masked
    // path stays where it is.
    let bed = Bed::new();
    let ws = bed.ws();
    // The bed's own secret is not under this test's rule.
    std::fs::remove_dir_all(ws.join("secrets")).unwrap();
    std::fs::create_dir_all(ws.join("config/secrets")).unwrap();
    std::fs::write(ws.join("config/secrets/prod.key"), format!("{SECRET}\n")).unwrap();
    std::fs::write(ws.join("config/app.toml"), "port = 1\n").unwrap();
    let rule = "[[policy.rules]]\ntool = \"*\"\ndecision = \"deny\"\npath = \"config/secrets/**\"\nreason = \"secrets stay secret\"\n";
    let config = bed.config(&format!("[approval]\nmode = \"full-auto\"\n[shell]\nsandbox = \"bwrap\"\n{rule}"));
    let moves = vec![
        ("exec_shell", json!({"command": "mv config cfg"})),
        ("exec_shell", json!({"command": "mv config/secrets config/s2"})),
        (
            "exec_shell",
            json!({"command": "python3 -c \"import os; os.rename('config', 'cfg2')\""}),
        ),
        // What is not on the way to a hidden path moves as before.
        ("exec_shell", json!({"command": "mv config/app.toml config/app2.toml"})),
    ];
    let reads = vec![
        ("read_file", json!({"path": "cfg/secrets/prod.key"})),
        ("read_file", json!({"path": "config/s2/prod.key"})),
        ("read_file", json!({"path": "cfg2/secrets/prod.key"})),
        ("grep_files", json!({"pattern": "TOPSECRET"})),
        ("exec_shell", json!({"command": "cat cfg/secrets/prod.key config/s2/prod.key"})),
    ];
    let events = bed.replay(&config, "all", &[moves, reads]);
    assert_no_secret(&events, "renamed");
    assert!(ws.join("config/secrets/prod.key").exists(), "the hidden file moved");
    for gone in ["cfg", "cfg2", "config/s2"] {
        assert!(!ws.join(gone).exists(), "{gone} was made by a rename");
    }
    assert!(
        ws.join("config/app2.toml").exists(),
        "a file beside the hidden folder could not be renamed"
    );
}

#[test]
fn a_hidden_name_that_is_a_link_hides_what_it_leads_to_from_the_file_tools() {
    // A checkout ships `config -> .cfg` (or `.env -> notes/app.txt`); the user puts the secret
    // where the rule's name says. The sandbox masks the file the name leads to; the file tools
    // must not read it under its own name either.
    let layouts: [(&str, &str, &str, &str); 2] = [
        ("config/secrets/**", ".cfg/secrets/prod.key", "config/secrets/prod.key", ".cfg"),
        ("**/.env", "notes/app.txt", ".env", "notes"),
    ];
    for sandbox in ["bwrap", "landlock"] {
        for (glob, real, named, folder) in layouts {
            let bed = Bed::new();
            let ws = bed.ws();
            std::fs::remove_dir_all(ws.join("secrets")).unwrap();
            std::fs::create_dir_all(ws.join(real).parent().unwrap()).unwrap();
            if glob.starts_with("config") {
                std::os::unix::fs::symlink(".cfg", ws.join("config")).unwrap();
            } else {
                std::os::unix::fs::symlink(real, ws.join(named)).unwrap();
            }
            // The user writes the secret through the name the rule names.
            std::fs::write(ws.join(named), format!("{SECRET}\n")).unwrap();
            assert!(ws.join(real).is_file());
            let rule = format!("[[policy.rules]]\ntool = \"*\"\ndecision = \"deny\"\npath = \"{glob}\"\nreason = \"x\"\n");
            let config = bed.config(&format!("[approval]\nmode = \"ask\"\n[shell]\nsandbox = \"{sandbox}\"\n{rule}"));
            let calls = vec![
                ("read_file", json!({"path": real})),
                ("grep_files", json!({"pattern": "TOPSECRET"})),
                ("grep_files", json!({"pattern": "TOPSECRET", "path": folder})),
                ("list_dir", json!({"path": folder, "depth": 3})),
                ("exec_shell", json!({"command": format!("cat {real}")})),
            ];
            let events = bed.replay(&config, "none", &[calls]);
            let what = format!("{glob} under {sandbox}");
            assert_no_secret(&events, &what);
            let got = results(&events);
            assert_eq!(got.len(), 5, "{what}");
            assert!(content(&got[0]).contains("denied by the policy"), "{what}: {}", content(&got[0]));
            let file = std::path::Path::new(real).file_name().unwrap().to_str().unwrap();
            assert!(!content(&got[3]).contains(file), "{what}: listed: {}", content(&got[3]));
            // Nor changed by the tools that write, which would show what they replaced.
            let config = bed.config(&format!(
                "[approval]\nmode = \"full-auto\"\n[shell]\nsandbox = \"{sandbox}\"\n{rule}"
            ));
            let writes = vec![
                ("edit_file", json!({"path": real, "search": "TOPSECRET", "replace": "x"})),
                ("edit_file", json!({"path": real, "search": "no such text", "replace": "x"})),
                ("write_file", json!({"path": real, "content": "overwritten"})),
            ];
            let events = bed.replay(&config, "all", &[writes]);
            assert_no_secret(&events, &what);
            assert_eq!(std::fs::read_to_string(ws.join(real)).unwrap(), format!("{SECRET}\n"), "{what}");
        }
    }
}

#[test]
fn a_committed_hidden_file_is_not_read_back_through_git_object_names() {
    // The mask hides the working tree's file; git keeps the committed and the staged copies in
    // its object store, which `git show REV:path` prints. The words name the file: the rule
    // holds for them.
    let bed = Bed::new();
    let ws = bed.ws();
    assert!(git(&ws, &["init", "-q"]).status.success());
    assert!(git(&ws, &["add", "-A"]).status.success());
    assert!(git(&ws, &["commit", "-qm", "x"]).status.success());
    for mode in ["ask", "full-auto"] {
        let config = bed.config(&format!(
            "[approval]\nmode = \"{mode}\"\n[shell]\nsandbox = \"bwrap\"\n{DENY_SECRETS}"
        ));
        let calls = vec![
            ("exec_shell", json!({"command": "git show HEAD:secrets/prod.key"})),
            ("exec_shell", json!({"command": "git show :secrets/prod.key"})),
            ("exec_shell", json!({"command": "git cat-file -p HEAD:secrets/prod.key"})),
            ("exec_shell", json!({"command": "cd src && git show HEAD:../secrets/prod.key"})),
            ("exec_shell", json!({"command": "git show HEAD:src/main.rs"})),
        ];
        let events = bed.replay(&config, "none", &[calls]);
        assert_no_secret(&events, mode);
        let got = results(&events);
        for (i, r) in got.iter().enumerate().take(4) {
            assert!(denied(r), "{mode}: call {i} not denied: {}", content(r));
        }
        assert!(content(&got[4]).contains("fn main"), "{mode}: {}", content(&got[4]));
    }
}

#[test]
fn a_denied_program_is_not_run_through_the_workspaces_own_programs_nor_unknown_wrappers() {
    let rm = installed("rm").display().to_string();
    let env = installed("env").display().to_string();
    let bed = Bed::new();
    let config = bed.config(&format!("[approval]\nmode = \"full-auto\"\n{DENY_RM}"));
    // Round 1 makes them (nothing here runs rm).
    let round1 = vec![
        ("write_file", json!({"path": "s.sh", "content": "#!/bin/sh\nrm victim.txt\n"})),
        ("exec_shell", json!({"command": "chmod +x s.sh"})),
        ("exec_shell", json!({"command": format!("ln -s {env} e")})),
        ("exec_shell", json!({"command": format!("cp {rm} del")})),
        ("exec_shell", json!({"command": "echo >> del"})),
        ("write_file", json!({"path": "y", "content": format!("#!{rm}\n")})),
        ("exec_shell", json!({"command": "chmod +x y"})),
    ];
    let round2 = vec![
        ("exec_shell", json!({"command": "./s.sh"})),
        ("exec_shell", json!({"command": "./e rm victim.txt"})),
        ("exec_shell", json!({"command": "./del victim.txt"})),
        ("exec_shell", json!({"command": "./y victim.txt"})),
        ("exec_shell", json!({"command": "env 2>/dev/null rm victim.txt"})),
        ("exec_shell", json!({"command": "nice >/dev/null rm victim.txt"})),
        ("exec_shell", json!({"command": "prlimit --nofile=100 rm victim.txt"})),
        ("exec_shell", json!({"command": "setarch x86_64 rm victim.txt"})),
        (
            "exec_shell",
            json!({"command": format!("/lib64/ld-linux-x86-64.so.2 {rm} victim.txt")}),
        ),
    ];
    let events = bed.replay(&config, "none", &[round1, round2]);
    let got = results(&events);
    assert_eq!(got.len(), 16, "{events:?}");
    for (i, r) in got.iter().enumerate().skip(7) {
        let refused = denied(r) || (asked(&events, i - 7) && content(r).contains("not_approved"));
        assert!(refused, "call {} ran: {}", i - 7, content(r));
    }
    assert!(bed.victim().exists(), "rm ran");
    // Commands run in the shell whose grammar was judged: dash reads these as running `rm`.
    let round3 = vec![
        ("exec_shell", json!({"command": "echo hi &>/dev/null rm victim.txt"})),
        ("exec_shell", json!({"command": "echo $'a\\'; rm victim.txt\necho '"})),
    ];
    let events = bed.replay(&config, "none", &[round3]);
    assert_eq!(results(&events).len(), 2, "{events:?}");
    assert!(bed.victim().exists(), "rm ran in a shell that reads the line otherwise");
}

#[test]
fn git_running_the_repositorys_own_hooks_or_programs_is_asked_under_a_deny_rule() {
    // In full-auto a command may write `.git`; git then runs what it finds there.
    let bed = Bed::new();
    let ws = bed.ws();
    assert!(git(&ws, &["init", "-q"]).status.success());
    assert!(git(&ws, &["config", "user.name", "t"]).status.success());
    assert!(git(&ws, &["config", "user.email", "t@t"]).status.success());
    let config = bed.config(&format!("[approval]\nmode = \"full-auto\"\n{DENY_RM}"));
    // A repository without hooks: git runs unasked.
    let events = bed.replay(&config, "none", &[vec![("exec_shell", json!({"command": "git status --short"}))]]);
    assert!(!asked(&events, 0), "{events:?}");
    let hook = "#!/bin/sh\\nrm victim.txt\\n";
    let round1 = vec![
        ("exec_shell", json!({"command": format!("printf '{hook}' > .git/hooks/pre-commit")})),
        ("exec_shell", json!({"command": "chmod +x .git/hooks/pre-commit"})),
    ];
    bed.replay(&config, "none", &[round1]);
    assert!(ws.join(".git/hooks/pre-commit").is_file(), "the hook was not written");
    let round2 = vec![("exec_shell", json!({"command": "git commit --allow-empty -qm x"}))];
    let events = bed.replay(&config, "none", &[round2]);
    let got = results(&events);
    assert!(
        asked(&events, 0) && content(&got[0]).contains("not_approved"),
        "{}",
        content(&got[0])
    );
    assert!(bed.victim().exists(), "the hook ran rm");
    // Written on the same line as the command that runs it.
    std::fs::remove_file(ws.join(".git/hooks/pre-commit")).unwrap();
    let line = format!("printf '{hook}' > .git/hooks/post-commit; chmod +x .git/hooks/post-commit; git commit --allow-empty -qm y");
    let events = bed.replay(&config, "none", &[vec![("exec_shell", json!({"command": line}))]]);
    assert!(asked(&events, 0), "{events:?}");
    assert!(bed.victim().exists(), "the hook ran rm");
    // A program the configuration names.
    let mut text = std::fs::read_to_string(ws.join(".git/config")).unwrap();
    text.push_str("[core]\n\tsshCommand = rm victim.txt\n");
    std::fs::write(ws.join(".git/config"), text).unwrap();
    let events = bed.replay(&config, "none", &[vec![("exec_shell", json!({"command": "git fetch ssh://h/x"}))]]);
    assert!(asked(&events, 0), "{events:?}");
    assert!(bed.victim().exists(), "the configured program ran rm");
}
