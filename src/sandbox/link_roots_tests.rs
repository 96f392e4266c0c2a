//! Hidden paths under folders reached through a symlink, on real processes: Landlock makes a
//! rule on where a path leads, so a folder named through a link must be compared and carved by
//! its real path (`landlock::real_roots`, the writable folders in `landlock::ruleset`).

use super::tests::spawn_request;
use super::*;
use crate::config::{Config, SandboxMode};

const BACKENDS: [(SandboxMode, Backend); 2] = [(SandboxMode::Bwrap, Backend::Bwrap), (SandboxMode::Landlock, Backend::Landlock)];

const WRITE: Grant = Grant {
    write: true,
    network: false,
};

#[test]
fn a_hidden_file_under_a_folder_of_the_root_that_is_a_symlink_stays_unreadable() {
    // A merged /usr has `/lib` leading to `/usr/lib` (a machine may have `/home` leading
    // elsewhere): Landlock made its rule on where the link leads and allowed it whole, so a
    // hidden file beneath it was read by either path.
    let (link, target) = std::fs::read_dir("/")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_symlink()))
        .filter_map(|e| {
            let real = e.path().canonicalize().ok()?;
            real.is_dir().then_some((e.path(), real))
        })
        .next()
        .expect("a folder of / that is a symlink (a merged /usr has /lib -> usr/lib)");
    let secret = std::fs::read_dir(&target)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        // No shared library or loader: hiding one would stop `sh` itself from starting.
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| !n.contains(".so") && !n.starts_with("ld"))
        })
        .find(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file() && m.len() > 0) && std::fs::File::open(p).is_ok())
        .expect("a file to hide");
    let name = secret.file_name().unwrap();
    let script = format!(
        "head -c1 '{}' | grep -q . && echo READ-REAL; head -c1 '{}' | grep -q . && echo READ-LINK; echo RAN",
        secret.display(),
        link.join(name).display()
    );
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path().canonicalize().unwrap();
    let hidden = [secret.clone()];
    let args = ["-c".to_string(), script];
    for (mode, want) in BACKENDS {
        let mut shell = Config::builtin().shell;
        shell.sandbox = mode;
        let out = spawn_request(&Request::granted_nothing("sh", &args, &ws, &shell, &hidden), want);
        assert!(out.stdout.contains("RAN"), "{mode:?}: {}", out.stderr);
        assert!(
            !out.stdout.contains("READ"),
            "{mode:?}: {} was read: {}",
            secret.display(),
            out.stdout
        );
    }
}

#[test]
fn a_hidden_file_in_a_writable_folder_named_through_a_symlink_is_not_read_under_landlock() {
    // Landlock cannot carve a hidden path out of a folder the call may write: it must refuse
    // the program. A writable folder named through a symlink was compared with the hidden
    // path (a real path) as written, so it was not found inside, and the write rule, made on
    // where the link leads, let the program read it.
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path().canonicalize().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let outside = outside.path().canonicalize().unwrap();
    std::fs::create_dir_all(outside.join("real")).unwrap();
    std::fs::write(outside.join("real/secret.txt"), "secret bytes").unwrap();
    std::os::unix::fs::symlink(outside.join("real"), outside.join("link")).unwrap();
    let mut shell = Config::builtin().shell;
    shell.sandbox = SandboxMode::Landlock;
    shell.writable_paths = vec![outside.join("link").display().to_string()];
    let hidden = [outside.join("real/secret.txt")];
    let args = ["-c".to_string(), format!("cat '{}'; echo RAN", hidden[0].display())];
    let req = Request {
        grant: WRITE,
        ..Request::granted_nothing("sh", &args, &ws, &shell, &hidden)
    };
    match command(&req) {
        Err(SandboxError::CannotHide(paths)) => assert!(paths.contains("secret.txt"), "{paths}"),
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => {
            let out = spawn_request(&req, Backend::Landlock);
            panic!("the program ran: {} {}", out.stdout, out.stderr);
        }
    }
}

#[test]
fn landlock_allows_the_devices_a_program_needs_not_the_folder_of_devices() {
    // `/dev` as a readable root let a program read any device the user may read, a disk's
    // among them, and every file on it with it, hidden or not.
    let ws = tempfile::tempdir().unwrap();
    let ws = ws.path().canonicalize().unwrap();
    let script = "ls /dev >/dev/null 2>&1 && echo LISTED; \
                  for d in /dev/* /dev/*/*; do [ -b \"$d\" ] && head -c1 \"$d\" >/dev/null 2>&1 && echo READ-BLOCK \"$d\"; done; \
                  head -c4 /dev/urandom | wc -c; echo x > /dev/null && echo RAN";
    let args = ["-c".to_string(), script.to_string()];
    let mut shell = Config::builtin().shell;
    shell.sandbox = SandboxMode::Landlock;
    for grant in [Grant::default(), WRITE] {
        let req = Request {
            grant,
            ..Request::granted_nothing("sh", &args, &ws, &shell, &[])
        };
        let out = spawn_request(&req, Backend::Landlock);
        assert!(
            out.stdout.contains("RAN") && out.stdout.contains('4'),
            "{grant:?}: {} {}",
            out.stdout,
            out.stderr
        );
        assert!(!out.stdout.contains("LISTED"), "{grant:?}: /dev was listed");
        assert!(!out.stdout.contains("READ-BLOCK"), "{grant:?}: {}", out.stdout);
    }
}
