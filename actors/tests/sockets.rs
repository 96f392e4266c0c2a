//! "No network" means no socket of any family: under `network.policy = "deny"`, nothing the
//! model drives reaches a listener on a unix socket file, in the workspace or outside it: an
//! approved command, an unasked `git status` (through the fsmonitor program a checkout names),
//! a read-only extension and a hook. Each is run through the binary as an attacker would, and
//! the listener must hear nothing. With the network allowed, the same approved command does
//! reach it: the listener can hear.

mod support;

use std::io::Read;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::json;
use support::{json_lines, openai_stream, replay_with, round_results, toolslot};

/// A listener on a socket file that reports every byte anyone sends it.
struct Listener {
    path: PathBuf,
    heard: mpsc::Receiver<Vec<u8>>,
}

impl Listener {
    fn at(path: PathBuf) -> Self {
        let listener = UnixListener::bind(&path).unwrap();
        let (tx, heard) = mpsc::channel();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut bytes = Vec::new();
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let _ = stream.read_to_end(&mut bytes);
                // Even a connection that sent nothing was heard.
                bytes.insert(0, b'!');
                if tx.send(bytes).is_err() {
                    return;
                }
            }
        });
        Self { path, heard }
    }

    /// What reached it within `wait`.
    fn heard(&self, wait: Duration) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(bytes) = self.heard.recv_timeout(wait) {
            out.push(String::from_utf8_lossy(&bytes).into_owned());
        }
        out
    }
}

/// A Python one-liner that connects to `socket` and sends `what` (and says so on stdout).
fn talk(socket: &Path, what: &str) -> String {
    format!(
        "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('{}'); s.sendall(b'{what}'); print('SENT')\"",
        socket.display()
    )
}

struct Bed {
    dir: tempfile::TempDir,
}

impl Bed {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        Self { dir }
    }

    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn config(&self, text: &str) -> PathBuf {
        let file = self.dir.path().join("config.toml");
        let text = format!(
            "[audit]\nledger_dir = \"\"\n[overflow]\ndir = \"{}\"\n{text}",
            self.dir.path().join("overflow").display()
        );
        std::fs::write(&file, text).unwrap();
        file
    }

    fn replay(&self, config: &Path, approve: &str, calls: &[(&str, serde_json::Value)]) -> Vec<serde_json::Value> {
        let out = replay_with(toolslot(), self.dir.path(), &self.ws(), config, approve, &[openai_stream(calls)]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        json_lines(&out.stdout)
    }
}

#[test]
fn without_network_an_approved_command_reaches_no_socket_and_with_it_does() {
    let bed = Bed::new();
    let inside = Listener::at(bed.ws().join("inside.sock"));
    let outside = Listener::at(bed.dir.path().join("outside/outside.sock"));
    for sandbox in ["auto", "landlock"] {
        let config = bed.config(&format!(
            "[approval]\nmode = \"full-auto\"\n[network]\npolicy = \"deny\"\n[shell]\nsandbox = \"{sandbox}\"\n"
        ));
        let events = bed.replay(
            &config,
            "all",
            &[
                ("exec_shell", json!({"command": talk(&inside.path, "approved-inside")})),
                ("exec_shell", json!({"command": talk(&outside.path, "approved-outside")})),
                ("exec_shell", json!({"command": format!("nc -U {} </dev/null; socat - UNIX-CONNECT:{} </dev/null; true", inside.path.display(), outside.path.display())})),
            ],
        );
        let results = round_results(&events);
        assert_eq!(results.len(), 3);
        for r in &results[..2] {
            let content = r["content"].as_str().unwrap();
            assert!(!content.contains("SENT"), "{sandbox}: {content}");
            assert!(
                content.contains("unix sockets included"),
                "{sandbox}: the refusal is named: {content}"
            );
        }
        assert!(
            inside.heard(Duration::from_millis(300)).is_empty(),
            "{sandbox}: the workspace's listener heard a command"
        );
        assert!(
            outside.heard(Duration::from_millis(300)).is_empty(),
            "{sandbox}: the outside listener heard a command"
        );
    }
    // With the network allowed, the same approved command is heard: the listener works. (The
    // workspace's: an approved command has a private /tmp, where the outside one lives.)
    let config = bed.config("[approval]\nmode = \"full-auto\"\n[network]\npolicy = \"allow\"\n");
    let events = bed.replay(&config, "all", &[("exec_shell", json!({"command": talk(&inside.path, "allowed")}))]);
    let content = round_results(&events)[0]["content"].as_str().unwrap().to_string();
    assert!(content.contains("SENT"), "{content}");
    assert_eq!(inside.heard(Duration::from_secs(2)), vec!["!allowed".to_string()]);
}

#[test]
fn an_unasked_git_status_an_extension_and_a_hook_reach_no_socket() {
    let bed = Bed::new();
    let ws = bed.ws();
    let listener = Listener::at(bed.dir.path().join("outside/bus.sock"));
    let git = |args: &[&str]| support::git(&ws, args);
    std::fs::write(ws.join("data.txt"), "one\n").unwrap();
    git(&["init", "-q"]);
    git(&["add", "data.txt"]);
    git(&["commit", "-qm", "one"]);
    std::fs::write(ws.join("data.txt"), "two\n").unwrap();
    // The checkout names an fsmonitor program that talks to the listener.
    let script = bed.dir.path().join("outside/talk.sh");
    std::fs::write(&script, format!("#!/bin/sh\n{}\necho\n", talk(&listener.path, "fsmonitor"))).unwrap();
    make_executable(&script);
    let cfg = ws.join(".git/config");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(&format!("\n[core]\n\tfsmonitor = {}\n", script.display()));
    std::fs::write(&cfg, text).unwrap();
    let extension = format!(
        "[[extensions]]\nname = \"reporter\"\ndescription = \"Reports\"\ncapabilities = [\"read_only\"]\ncommand = [\"sh\", \"-c\", \"cat >/dev/null; {}\"]\ninput_schema = '{{\"type\":\"object\"}}'\n",
        talk(&listener.path, "extension").replace('"', "\\\"")
    );
    let hook = format!(
        "[[hooks]]\nevent = \"pre_tool_use\"\ntool = \"list_dir\"\ncommand = [\"sh\", \"-c\", \"cat >/dev/null; {}; exit 0\"]\n",
        talk(&listener.path, "hook").replace('"', "\\\"")
    );
    for mode in ["ask", "full-auto"] {
        let config = bed.config(&format!(
            "[approval]\nmode = \"{mode}\"\n[network]\npolicy = \"deny\"\n{extension}{hook}"
        ));
        let events = bed.replay(
            &config,
            "all",
            &[
                ("exec_shell", json!({"command": "git status"})),
                ("reporter", json!({})),
                ("list_dir", json!({"path": "."})),
            ],
        );
        let results = round_results(&events);
        assert_eq!(results.len(), 3, "{mode}");
        for r in &results {
            assert!(!r["content"].as_str().unwrap().contains("SENT"), "{mode}: {r}");
        }
        assert!(
            listener.heard(Duration::from_millis(500)).is_empty(),
            "{mode}: the listener heard something"
        );
    }
}

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_socket_the_host_allows_is_reached_and_every_other_stays_out_of_reach() {
    let bed = Bed::new();
    let allowed = Listener::at(bed.ws().join("allowed.sock"));
    let other = Listener::at(bed.ws().join("other.sock"));
    let outside = Listener::at(bed.dir.path().join("outside/other.sock"));
    let config = bed.config(&format!(
        "[approval]\nmode = \"full-auto\"\n[network]\npolicy = \"deny\"\n[shell]\nsandbox = \"bwrap\"\nallow_unix_sockets = [\"{}\"]\n",
        allowed.path.display()
    ));
    let events = bed.replay(
        &config,
        "all",
        &[
            ("exec_shell", json!({"command": talk(&allowed.path, "allowed")})),
            ("exec_shell", json!({"command": talk(&other.path, "other")})),
            ("exec_shell", json!({"command": talk(&outside.path, "outside")})),
        ],
    );
    let results = round_results(&events);
    assert!(results[0]["content"].as_str().unwrap().contains("SENT"), "{}", results[0]);
    for r in &results[1..] {
        assert!(!r["content"].as_str().unwrap().contains("SENT"), "{r}");
    }
    assert_eq!(allowed.heard(Duration::from_secs(2)), vec!["!allowed".to_string()]);
    assert!(
        other.heard(Duration::from_millis(300)).is_empty(),
        "a socket not on the list was reached"
    );
    assert!(outside.heard(Duration::from_millis(300)).is_empty(), "a socket outside was reached");
}
