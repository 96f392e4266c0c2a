//! Each backend, on real processes, against what the sandbox promises: what a call may write,
//! read, reach and see, and the limits. Run as root in CI, which is the hard case: root keeps
//! no capability inside, and `/proc` of toolslot's processes stays out of reach.

use std::path::Path;

use super::*;
use crate::config::{Config, SandboxMode, ShellConfig};

const BACKENDS: [(SandboxMode, Backend); 2] = [(SandboxMode::Bwrap, Backend::Bwrap), (SandboxMode::Landlock, Backend::Landlock)];

pub(super) const READ_ONLY: Grant = Grant {
    write: false,
    network: false,
};
const WRITE: Grant = Grant {
    write: true,
    network: false,
};
const WRITE_NET: Grant = Grant {
    write: true,
    network: true,
};

pub(super) struct Out {
    pub(super) code: Option<i32>,
    pub(super) stdout: String,
    pub(super) stderr: String,
}

fn run_with(mode: SandboxMode, want: Backend, grant: Grant, view: View, ws: &Path, script: &str, tweak: impl Fn(&mut ShellConfig)) -> Out {
    let mut shell = Config::builtin().shell;
    shell.sandbox = mode;
    tweak(&mut shell);
    let fresh = spawn(&shell, want, grant, view, ws, script, None);
    if want != Backend::Bwrap || grant != READ_ONLY || shell.warm_sandbox_idle_secs == 0 {
        return fresh;
    }
    // What runs in a session's sandbox (`warm/`) is held to the same promises: the second
    // command enters the sandbox the first one made, and what the test then checks of the
    // files, processes and network holds after all three.
    spawn(&shell, want, grant, view, ws, script, Some(TEST_SESSION));
    let warm = spawn(&shell, want, grant, view, ws, script, Some(TEST_SESSION));
    assert_eq!(
        warm.code, fresh.code,
        "the session's sandbox and a fresh one answer alike:\n{}\n---\n{}",
        warm.stderr, fresh.stderr
    );
    warm
}

/// The session the tests' read-only commands share a sandbox in.
const TEST_SESSION: &str = "sandbox-tests";

pub(super) fn spawn(shell: &ShellConfig, want: Backend, grant: Grant, view: View, ws: &Path, script: &str, session: Option<&str>) -> Out {
    let args = ["-c".to_string(), script.to_string()];
    let req = Request {
        program: "sh",
        args: &args,
        workspace: ws,
        grant,
        view,
        keep_env: &[],
        shell,
        hidden: &[],
        session,
        policy: None,
    };
    spawn_request(&req, want)
}

/// Runs `req`'s program to its end, under backend `want`, with its output.
pub(super) fn spawn_request(req: &Request<'_>, want: Backend) -> Out {
    let mut s = command(req).unwrap();
    assert_eq!(
        s.backend, want,
        "{:?} is not available on this machine: install it (scripts/install-test-deps.sh)",
        req.shell.sandbox
    );
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let out = rt.block_on(async {
        s.command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
        let child = s.spawn().await.unwrap();
        s.guard.spawned();
        child.wait_with_output().await.unwrap()
    });
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `sh` with `args`, cleared to write `ws`, in the full view, in a sandbox of its own.
fn cleared_to_write<'a>(shell: &'a ShellConfig, ws: &'a Path, args: &'a [String]) -> Request<'a> {
    Request {
        grant: WRITE,
        ..Request::granted_nothing("sh", args, ws, shell, &[])
    }
}

fn run(mode: SandboxMode, want: Backend, grant: Grant, view: View, ws: &Path, script: &str) -> Out {
    run_with(mode, want, grant, view, ws, script, |_| {})
}

#[test]
fn a_read_only_call_writes_nothing_anywhere() {
    for (mode, want) in BACKENDS {
        let ws = tempfile::tempdir().unwrap();
        for view in [View::Confined, View::Full] {
            let out = run(
                mode,
                want,
                READ_ONLY,
                view,
                ws.path(),
                "touch inside; touch /tmp/toolslot-sandbox-outside-$$; echo done",
            );
            assert!(out.stdout.contains("done"), "{mode:?}: {}", out.stderr);
            assert!(!ws.path().join("inside").exists(), "{mode:?} {view:?}: wrote the workspace");
            assert!(
                out.stderr.contains("Read-only file system") || out.stderr.contains("Permission denied"),
                "{mode:?}: {}",
                out.stderr
            );
        }
    }
}

#[test]
fn a_write_call_writes_the_workspace_and_its_temp_only() {
    for (mode, want) in BACKENDS {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let script = format!(
            "touch inside && t=$(mktemp) && echo tmp-ok; touch {}/escaped; cp /dev/null \"$HOME/.toolslot-sandbox-probe\"",
            outside.path().display()
        );
        let out = run(mode, want, WRITE, View::Full, ws.path(), &script);
        assert!(ws.path().join("inside").exists(), "{mode:?}: {}", out.stderr);
        assert!(out.stdout.contains("tmp-ok"), "{mode:?}: a private temp folder: {}", out.stderr);
        assert!(!outside.path().join("escaped").exists(), "{mode:?}: wrote outside the workspace");
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from).unwrap();
        assert!(!home.join(".toolslot-sandbox-probe").exists(), "{mode:?}: wrote the home folder");
        // A folder the host opened: written only there.
        let extra = tempfile::tempdir().unwrap();
        let script = format!("touch {}/cache", extra.path().display());
        let extra_path = extra.path().display().to_string();
        let out = run_with(mode, want, WRITE, View::Full, ws.path(), &script, |s| {
            s.writable_paths = vec![extra_path.clone()]
        });
        assert!(extra.path().join("cache").exists(), "{mode:?}: {}", out.stderr);
    }
}

#[test]
fn a_confined_view_shows_the_workspace_and_the_system_only() {
    for (mode, want) in BACKENDS {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("mine.txt"), "workspace bytes").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "outside bytes").unwrap();
        // A symlink inside the workspace pointing out does not help.
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), ws.path().join("link")).unwrap();
        let script = format!(
            "cat mine.txt; cat {}/secret.txt; cat link; ls /usr/bin/env",
            outside.path().display()
        );
        let out = run(mode, want, READ_ONLY, View::Confined, ws.path(), &script);
        assert!(out.stdout.contains("workspace bytes"), "{mode:?}: {}", out.stderr);
        assert!(out.stdout.contains("/usr/bin/env"), "{mode:?}: programs stay visible");
        assert!(!out.stdout.contains("outside bytes"), "{mode:?}: read outside the workspace");
        // The full view (an approved call) reads everywhere.
        let out = run(mode, want, READ_ONLY, View::Full, ws.path(), &script);
        assert!(out.stdout.contains("outside bytes"), "{mode:?}: {}", out.stderr);
    }
}

#[test]
fn toolslots_processes_and_their_environment_stay_hidden() {
    // A sibling, started by this process with a secret in its environment, as an MCP server is.
    let mut sibling = std::process::Command::new("sleep")
        .arg("30")
        .env("SANDBOX_SIBLING_SECRET", "sibling-secret-value")
        .spawn()
        .unwrap();
    let me = std::process::id();
    for (mode, want) in BACKENDS {
        let ws = tempfile::tempdir().unwrap();
        for (grant, view) in [(READ_ONLY, View::Confined), (WRITE_NET, View::Full)] {
            let script = format!(
                "cat /proc/{me}/environ; cat /proc/{}/environ; cat /proc/$PPID/environ; kill -0 {me} && echo signalled",
                sibling.id()
            );
            let out = run(mode, want, grant, view, ws.path(), &script);
            assert!(!out.stdout.contains("sibling-secret-value"), "{mode:?} {view:?}: {}", out.stdout);
            // cargo runs tests with CARGO_MANIFEST_DIR set: in toolslot's environment, never
            // in the command's (`$PPID` is the sandbox's own first process under bubblewrap).
            assert!(
                !out.stdout.contains("CARGO_MANIFEST_DIR"),
                "{mode:?} {view:?}: read toolslot's environment"
            );
            assert!(!out.stdout.contains("signalled"), "{mode:?} {view:?}: signalled toolslot");
        }
    }
    let _ = sibling.kill();
    let _ = sibling.wait();
}

#[test]
fn the_network_is_off_unless_granted() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            use std::io::Write;
            let mut c = conn;
            let _ = c.write_all(b"hello from the host\n");
        }
    });
    // Python's socket module: present wherever the test dependencies are.
    let script = format!("python3 -c 'import socket; s=socket.create_connection((\"127.0.0.1\", {port}), 2); print(s.recv(100).decode())'");
    for (mode, want) in BACKENDS {
        let ws = tempfile::tempdir().unwrap();
        for grant in [READ_ONLY, WRITE] {
            let out = run(mode, want, grant, View::Full, ws.path(), &script);
            assert!(!out.stdout.contains("hello from the host"), "{mode:?} {grant:?}: connected");
        }
        let out = run(mode, want, WRITE_NET, View::Full, ws.path(), &script);
        assert!(out.stdout.contains("hello from the host"), "{mode:?}: {}", out.stderr);
    }
}

#[test]
fn root_keeps_no_power_inside() {
    for (mode, want) in BACKENDS {
        let ws = tempfile::tempdir().unwrap();
        let out = run(
            mode,
            want,
            WRITE,
            View::Full,
            ws.path(),
            "mount -o remount,rw,bind / 2>&1; mount -t tmpfs none /mnt 2>&1; touch /usr/toolslot-sandbox-probe 2>&1; grep CapEff /proc/self/status",
        );
        assert!(!Path::new("/usr/toolslot-sandbox-probe").exists(), "{mode:?}: {}", out.stdout);
        if let Some(line) = out.stdout.lines().find(|l| l.starts_with("CapEff")) {
            assert!(line.ends_with("0000000000000000"), "{mode:?}: {line}");
        }
    }
}

#[test]
fn limits_stop_a_runaway_command() {
    for (mode, want) in BACKENDS {
        let ws = tempfile::tempdir().unwrap();
        let out = run_with(mode, want, WRITE, View::Full, ws.path(), "head -c 100000 /dev/zero > big", |s| {
            s.limit_file_bytes = 4096
        });
        let size = std::fs::metadata(ws.path().join("big")).map(|m| m.len()).unwrap_or(0);
        assert!(size <= 4096, "{mode:?}: wrote {size} bytes");
        assert_ne!(out.code, Some(0), "{mode:?}");
        let out = run_with(mode, want, WRITE, View::Full, ws.path(), "while :; do :; done", |s| {
            s.limit_cpu_secs = 1
        });
        assert_ne!(out.code, Some(0), "{mode:?}: the CPU limit stopped it");
    }
}

#[test]
fn bubblewrap_ends_everything_a_command_started() {
    let ws = tempfile::tempdir().unwrap();
    run(
        SandboxMode::Bwrap,
        Backend::Bwrap,
        WRITE,
        View::Full,
        ws.path(),
        "(sleep 1; touch survivor) > /dev/null 2>&1 & exit 0",
    );
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(!ws.path().join("survivor").exists(), "a process outlived its command");
}

#[test]
fn the_environment_is_the_core_set() {
    for (mode, want) in BACKENDS {
        let ws = tempfile::tempdir().unwrap();
        let out = run(mode, want, READ_ONLY, View::Confined, ws.path(), "env");
        for line in out.stdout.lines() {
            let name = line.split('=').next().unwrap_or("");
            assert!(
                [
                    "PATH",
                    "HOME",
                    "USER",
                    "LOGNAME",
                    "SHELL",
                    "LANG",
                    "LANGUAGE",
                    "TERM",
                    "COLORTERM",
                    "NO_COLOR",
                    "TZ",
                    "TMPDIR",
                    "PWD",
                    "SHLVL",
                    "_",
                    "OLDPWD"
                ]
                .contains(&name)
                    || name.starts_with("LC_"),
                "{mode:?}: `{name}` reached the command"
            );
        }
    }
}

#[test]
fn the_none_backend_is_plain_and_auto_picks_the_strongest() {
    assert_eq!(backend(SandboxMode::None), Backend::None);
    assert_eq!(backend(SandboxMode::Auto), Backend::Bwrap);
    assert!(unavailable_notice(SandboxMode::Auto).is_none());
    assert!(unavailable_notice(SandboxMode::None).is_some());
}

#[test]
fn a_program_cleared_to_write_cannot_change_the_projects_policy() {
    let attack = "mkdir -p .toolslot; echo '[[policy.rules]]' > .toolslot/policy.toml; mv .toolslot .gone; mkdir .toolslot; echo evil > .toolslot/policy.toml; echo done > ok.txt";
    let none = (SandboxMode::None, Backend::None);
    for (mode, want) in BACKENDS.into_iter().chain([none]) {
        // No policy yet: none may be made.
        let ws = tempfile::tempdir().unwrap();
        let out = run(mode, want, WRITE, View::Full, ws.path(), attack);
        assert!(
            ws.path().join("ok.txt").exists(),
            "{mode:?}: the rest of the workspace is writable: {}",
            out.stderr
        );
        assert!(!ws.path().join(".toolslot/policy.toml").exists(), "{mode:?}: a policy was made");
        assert!(
            !ws.path().join(".toolslot").exists(),
            "{mode:?}: the stand-in folder is left behind"
        );
        // A policy folder turned into a link to the user's own: the link goes, and the file
        // it leads to stays.
        let own = tempfile::tempdir().unwrap();
        std::fs::write(own.path().join("policy.toml"), "# the user's own\n").unwrap();
        let link = format!(
            "rmdir .toolslot 2>/dev/null; ln -s {} .toolslot; echo done > ok.txt",
            own.path().display()
        );
        run(mode, want, WRITE, View::Full, ws.path(), &link);
        assert_eq!(
            std::fs::read_to_string(own.path().join("policy.toml")).unwrap_or_default(),
            "# the user's own\n",
            "{mode:?}: the file behind the link was removed"
        );
        assert!(!ws.path().join(".toolslot").exists(), "{mode:?}: the link is left behind");
        // A policy the team wrote stays as it is.
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join(".toolslot")).unwrap();
        let policy = "[[policy.rules]]\ntool = \"exec_shell\"\ndecision = \"deny\"\n";
        std::fs::write(ws.path().join(".toolslot/policy.toml"), policy).unwrap();
        let file = ws.path().join(".toolslot/policy.toml");
        let mode_of = |f: &std::path::Path| std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(f).unwrap().permissions()) & 0o777;
        let was = mode_of(&file);
        for script in [
            attack,
            "rm -rf .toolslot",
            "echo '' > .toolslot/policy.toml",
            // Put back with its own mode, not the program's (000 would leave it unreadable).
            "echo evil > .toolslot/policy.toml; chmod 000 .toolslot/policy.toml",
        ] {
            run(mode, want, WRITE, View::Full, ws.path(), script);
            assert_eq!(
                std::fs::read_to_string(&file).unwrap(),
                policy,
                "{mode:?}: `{script}` changed the policy"
            );
            assert_eq!(mode_of(&file), was, "{mode:?}: `{script}` changed the policy's mode");
        }
    }
}

#[test]
fn a_policy_folder_another_call_made_and_removed_does_not_fail_the_next() {
    let ws = tempfile::tempdir().unwrap();
    // The empty folder a running call's bubblewrap made as its mount point...
    std::fs::create_dir(ws.path().join(".toolslot")).unwrap();
    let mut shell = Config::builtin().shell;
    shell.sandbox = SandboxMode::Bwrap;
    let args = ["-c".to_string(), "echo done > ok.txt".to_string()];
    let mut s = command(&cleared_to_write(&shell, ws.path(), &args)).unwrap();
    assert_eq!(s.backend, Backend::Bwrap, "install bubblewrap (scripts/install-test-deps.sh)");
    // ...goes when that call ends, after this one looked and before it starts.
    std::fs::remove_dir(ws.path().join(".toolslot")).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let out = rt.block_on(async {
        let child = s.command.stderr(std::process::Stdio::piped()).spawn().unwrap();
        s.guard.spawned();
        child.wait_with_output().await.unwrap()
    });
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(ws.path().join("ok.txt")).unwrap(), "done\n");
    drop(s);
    // An empty folder someone made stays: only a folder that was not there is cleaned up.
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join(".toolslot")).unwrap();
    let out = run(
        SandboxMode::Bwrap,
        Backend::Bwrap,
        WRITE,
        View::Full,
        ws.path(),
        "echo done > ok.txt",
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(ws.path().join(".toolslot").is_dir(), "an empty .toolslot the user made is kept");
}

#[test]
fn a_call_that_ends_first_leaves_the_stand_in_to_the_calls_still_running() {
    // Removing a mount point on the host detaches it in every sandbox: the stand-in of the call
    // still running would be gone, and its program could make a policy.
    let ws = tempfile::tempdir().unwrap();
    let shell = {
        let mut shell = Config::builtin().shell;
        shell.sandbox = SandboxMode::Bwrap;
        shell
    };
    let attack =
        "sleep 0.6; mkdir -p .toolslot 2>/dev/null; (echo '[[policy.rules]]' > .toolslot/policy.toml) 2>/dev/null && echo WROTE; echo done";
    let (ws_path, long_shell) = (ws.path().to_path_buf(), shell.clone());
    let long = std::thread::spawn(move || spawn(&long_shell, Backend::Bwrap, WRITE, View::Full, &ws_path, attack, None));
    // The short calls start after the long one's stand-in is mounted and end well before it looks.
    std::thread::sleep(std::time::Duration::from_millis(250));
    for _ in 0..3 {
        let short = spawn(&shell, Backend::Bwrap, WRITE, View::Full, ws.path(), "true", None);
        assert_eq!(short.code, Some(0), "{}", short.stderr);
    }
    let long = long.join().unwrap();
    assert_eq!(long.code, Some(0), "{}", long.stderr);
    assert_eq!(long.stdout, "done\n", "the stand-in stayed read-only while its call ran");
    assert!(!ws.path().join(".toolslot").exists(), "the last call out removed the stand-in");
}

#[test]
fn a_workspace_another_program_holds_locked_is_refused_in_time_and_nothing_runs() {
    let ws = tempfile::tempdir().unwrap();
    let holder = std::fs::File::open(ws.path()).unwrap();
    holder.lock().unwrap();
    let mut shell = Config::builtin().shell;
    shell.sandbox = SandboxMode::Bwrap;
    shell.policy_lock_wait_ms = 50;
    let args = ["-c".to_string(), "touch ran".to_string()];
    let req = cleared_to_write(&shell, ws.path(), &args);
    let err = command(&req).unwrap_err().to_string();
    assert!(err.contains("shell.policy_lock_wait_ms") && err.contains("nothing ran"), "{err}");
    assert!(!ws.path().join("ran").exists());
    // A program that only reads takes no lock, and once the holder lets go the call runs.
    assert_eq!(
        spawn(&shell, Backend::Bwrap, READ_ONLY, View::Full, ws.path(), "true", None).code,
        Some(0)
    );
    holder.unlock().unwrap();
    assert_eq!(spawn_request(&req, Backend::Bwrap).code, Some(0));
    assert!(ws.path().join("ran").exists());
}

#[test]
fn without_network_no_unix_socket_is_made_and_everything_else_still_runs() {
    use std::os::unix::process::CommandExt;
    // A child under the filter: unix sockets and datagram pairs are refused, a stream pair (the
    // pipes programs make) and a TCP socket (the network namespace's or Landlock's business)
    // are not; nor is netlink (the kernel's own). Under Landlock's, UDP (over which Landlock
    // has no rule) and other families (vsock, to the machine hosting this one) are refused.
    let probe = r#"
import socket, errno
def tried(f):
    try:
        f(); return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
print(tried(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)),
      tried(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)),
      tried(lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)),
      tried(lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)),
      tried(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)),
      tried(lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)),
      tried(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)),
      tried(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)),
      tried(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)),
      tried(lambda: socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)),
      tried(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)),
      tried(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132)),
      tried(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).sendto(b"x", socket.MSG_FASTOPEN, ("127.0.0.1", 9))))
"#;
    let probed = |filter: super::NoSockets| {
        let filter: &'static super::NoSockets = Box::leak(Box::new(filter));
        let mut cmd = std::process::Command::new("python3");
        cmd.args(["-c", probe]);
        // SAFETY: the closure makes only the filter's two prctl calls.
        unsafe {
            cmd.pre_exec(move || filter.install());
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    // Under Landlock: TCP and netlink alone (not MPTCP nor SCTP, not a fast open's connect).
    assert_eq!(
        probed(super::NoSockets::tcp_only()),
        "EACCES EACCES ok EACCES ok ok EACCES EACCES ok EACCES EACCES EACCES EACCES"
    );
    // In a network namespace: unix sockets refused, the namespace holds the rest (what the
    // kernel makes of MPTCP, SCTP and a fast open to a closed port is its own).
    let namespaced = probed(super::NoSockets::new());
    let words: Vec<&str> = namespaced.split_whitespace().collect();
    assert_eq!(
        words[..10],
        ["EACCES", "EACCES", "ok", "EACCES", "ok", "ok", "ok", "ok", "ok", "ok"],
        "{namespaced}"
    );
    // Without the filter, the same probe makes every socket it can here: the test can tell.
    let out = std::process::Command::new("python3").args(["-c", probe]).output().unwrap();
    let unfiltered = String::from_utf8_lossy(&out.stdout);
    let words: Vec<&str> = unfiltered.split_whitespace().collect();
    assert_eq!(words[..9], ["ok"; 9], "{unfiltered}");
}

/// Run as root (as CI is), the same tests again as an unprivileged user: bubblewrap then makes
/// user namespaces, and entering a session's sandbox takes another path (`warm/`,
/// `user_namespaces`).
#[test]
fn the_sandbox_holds_for_an_unprivileged_user_too() {
    // SAFETY: geteuid only reads this process's credentials.
    if unsafe { libc::geteuid() } != 0 {
        return;
    }
    // A copy where that user can run it, wherever the checkout lies.
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let me = dir.path().join("sandbox-tests");
    // Copied by another program: a copy written from here would be open for writing in this
    // process while other tests fork it, and running it would then fail (`Text file busy`).
    let copied = std::process::Command::new("cp")
        .arg(std::env::current_exe().unwrap())
        .arg(&me)
        .status()
        .unwrap();
    assert!(copied.success());
    std::fs::set_permissions(&me, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&me)
        .args([
            "sandbox::",
            "--skip",
            "the_sandbox_holds_for_an_unprivileged_user_too",
            "--test-threads=2",
        ])
        .env("HOME", std::env::temp_dir())
        .current_dir(std::env::temp_dir())
        .output()
        .expect("setpriv (util-linux) runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let passed: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("test result: ok. ").and_then(|r| r.split(' ').next()?.parse().ok()))
        .unwrap_or(0);
    // The sandbox's tests and its session sandbox's, all of them.
    assert!(passed >= 20, "{text}");
}
