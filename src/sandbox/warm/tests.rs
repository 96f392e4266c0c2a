//! A session's sandbox against what a fresh one promises, on real processes: entered again,
//! ended with what a command left in it, no power inside, masks kept across a replaced file,
//! the same exit statuses.

use super::super::tests::{READ_ONLY, spawn, spawn_request};
use super::super::{Backend, Request, View};
use super::idle_inits;
use std::path::{Path, PathBuf};

use crate::config::{Config, SandboxMode, ShellConfig};

/// Whether a process of this machine runs `argv` (its arguments joined by NULs).
fn host_runs(argv: &[&str]) -> bool {
    let want: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    let found = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(Result::ok)
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .any(|c| c == want)
    };
    // A killed process may take a moment to be gone.
    for _ in 0..40 {
        if !found() {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    true
}

fn bwrap_shell() -> ShellConfig {
    let mut shell = Config::builtin().shell;
    shell.sandbox = SandboxMode::Bwrap;
    shell
}

/// A read-only `sh -c` of `session` in the confined view of `ws`, `hidden` masked.
fn read_only_sh<'a>(shell: &'a ShellConfig, ws: &'a Path, args: &'a [String], hidden: &'a [PathBuf], session: &'a str) -> Request<'a> {
    Request {
        program: "sh",
        args,
        workspace: ws,
        grant: READ_ONLY,
        view: View::Confined,
        keep_env: &[],
        shell,
        hidden,
        session: Some(session),
        policy: None,
    }
}

#[test]
fn a_sessions_read_only_commands_enter_one_sandbox_until_one_leaves_a_process_behind() {
    let session = "warm-reuse";
    let shell = bwrap_shell();
    let ws = tempfile::tempdir().unwrap();
    let run = |script: &str| spawn(&shell, Backend::Bwrap, READ_ONLY, View::Confined, ws.path(), script, Some(session));
    let first = run("echo made");
    assert!(first.stdout.contains("made"), "{}", first.stderr);
    let inits = idle_inits(session);
    assert_eq!(inits.len(), 1, "one sandbox made and kept: {}", first.stderr);
    // Entered again: the same sandbox, whose process namespace holds bubblewrap's init, the
    // placeholder and this command's own processes only.
    let counted = run("ls /proc | grep -c '^[0-9]'");
    assert_eq!(idle_inits(session), inits, "entered again");
    let n: u32 = counted.stdout.trim().parse().unwrap_or_else(|_| panic!("{}", counted.stderr));
    assert!(n <= 6, "{n} processes in sight");
    // A process left in the command's group ends with the command; the sandbox stays.
    let out = run("sleep 6071 & echo started");
    assert!(out.stdout.contains("started"), "{}", out.stderr);
    assert!(!host_runs(&["sleep", "6071"]), "a process outlived its command");
    assert_eq!(idle_inits(session), inits);
    // One that left the group (and its output) ends the sandbox, and itself with it.
    let out = run("(setsid sleep 6072 > /dev/null 2>&1 < /dev/null &); sleep 0.3; echo started");
    assert!(out.stdout.contains("started"), "{}", out.stderr);
    assert!(!host_runs(&["sleep", "6072"]), "a process outlived its command");
    assert!(idle_inits(session).is_empty(), "the sandbox it was left in is ended");
    // The next command gets a new sandbox.
    let out = run("echo again");
    assert!(out.stdout.contains("again"), "{}", out.stderr);
    let now = idle_inits(session);
    assert_eq!(now.len(), 1);
    assert_ne!(now, inits);
}

#[test]
fn a_command_in_a_sessions_sandbox_keeps_no_power_and_writes_nothing() {
    let shell = bwrap_shell();
    let ws = tempfile::tempdir().unwrap();
    let w = ws.path().display();
    let script = format!(
        "mount -o remount,rw,bind {w} 2>&1; touch {w}/inside 2>&1; mount -o remount,rw,bind / 2>&1; mount -t tmpfs none /usr 2>&1; grep -E 'CapEff|CapBnd|NoNewPrivs' /proc/self/status"
    );
    for _ in 0..2 {
        let out = spawn(
            &shell,
            Backend::Bwrap,
            READ_ONLY,
            View::Confined,
            ws.path(),
            &script,
            Some("warm-power"),
        );
        assert!(!ws.path().join("inside").exists(), "wrote the workspace: {}", out.stdout);
        for field in ["CapEff", "CapBnd"] {
            let line = out
                .stdout
                .lines()
                .find(|l| l.starts_with(field))
                .unwrap_or_else(|| panic!("{}", out.stdout));
            assert!(line.ends_with("0000000000000000"), "{line}");
        }
        assert!(out.stdout.contains("NoNewPrivs:\t1"), "{}", out.stdout);
    }
    assert_eq!(idle_inits("warm-power").len(), 1, "entered twice, kept");
}

#[test]
fn a_masked_file_replaced_since_the_sandbox_was_made_stays_masked() {
    let shell = bwrap_shell();
    let ws = tempfile::tempdir().unwrap();
    let secret = ws.path().canonicalize().unwrap().join("prod.key");
    std::fs::write(&secret, "first secret").unwrap();
    let session = "warm-mask";
    let run = || {
        let args = ["-c".to_string(), "cat prod.key; echo end".to_string()];
        let hidden = [secret.clone()];
        spawn_request(&read_only_sh(&shell, ws.path(), &args, &hidden, session), Backend::Bwrap).stdout
    };
    let out = run();
    assert!(out.contains("end") && !out.contains("secret"), "{out}");
    let inits = idle_inits(session);
    // Replaced on the host (a new file where the masked one was): a sandbox made before
    // would show it, since the mask covered the old file only.
    std::fs::remove_file(&secret).unwrap();
    std::fs::write(&secret, "second secret").unwrap();
    let out = run();
    assert!(out.contains("end") && !out.contains("secret"), "{out}");
    assert_ne!(idle_inits(session), inits, "a new sandbox for the new file");
}

#[test]
fn a_command_in_a_sessions_sandbox_exits_as_it_would_in_a_fresh_one() {
    let shell = bwrap_shell();
    let ws = tempfile::tempdir().unwrap();
    for (script, code) in [("exit 3", 3), ("kill -9 $$", 128 + 9), ("echo out; echo err >&2", 0)] {
        let fresh = spawn(&shell, Backend::Bwrap, READ_ONLY, View::Confined, ws.path(), script, None);
        let warm = spawn(
            &shell,
            Backend::Bwrap,
            READ_ONLY,
            View::Confined,
            ws.path(),
            script,
            Some("warm-exit"),
        );
        assert_eq!(warm.code, Some(code), "{script}: {}", warm.stderr);
        assert_eq!(
            (warm.code, &warm.stdout, &warm.stderr),
            (fresh.code, &fresh.stdout, &fresh.stderr),
            "{script}"
        );
    }
    // A program the sandbox's PATH does not have: as a shell says it.
    let out = spawn_request(
        &Request {
            program: "toolslot-no-such-program",
            args: &[],
            workspace: ws.path(),
            grant: READ_ONLY,
            view: View::Confined,
            keep_env: &[],
            shell: &shell,
            hidden: &[],
            session: Some("warm-exit"),
            policy: None,
        },
        Backend::Bwrap,
    );
    assert_eq!(out.code, Some(127));
    assert!(out.stderr.contains("toolslot-no-such-program: not found"), "{}", out.stderr);
}

#[test]
fn a_command_dropped_while_it_runs_ends_with_its_group_and_is_collected() {
    let shell = bwrap_shell();
    let ws = tempfile::tempdir().unwrap();
    let args = ["-c".to_string(), "sleep 6073 & sleep 6074".to_string()];
    let req = read_only_sh(&shell, ws.path(), &args, &[], "warm-drop");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let pid = rt.block_on(async {
        let mut s = super::super::command(&req).unwrap();
        let child = s.spawn().await.unwrap();
        let pid = child.id().unwrap();
        // The command is toolslot's own child now, not the entering process's.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let ppid: u32 = stat.rsplit(')').next().unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
        assert_eq!(ppid, std::process::id());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        drop(child);
        pid
    });
    // Killed and collected: not even a zombie is left, and nothing it started.
    let gone = (0..100).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(20));
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
    });
    assert!(gone, "the dropped command was left running or uncollected");
    assert!(!host_runs(&["sleep", "6073"]), "a process outlived its dropped command");
    assert!(!host_runs(&["sleep", "6074"]), "the dropped command's own program outlived it");
}
