use std::path::{Path, PathBuf};

use super::*;
use crate::policy::paths::places;
use crate::shell::parse;

/// A file the host's PATH names (the tests run against the machine's own `rm` and `git`).
fn installed(name: &str) -> PathBuf {
    crate::child_env::on_host_path(name).unwrap_or_else(|| panic!("`{name}` is not on PATH"))
}

#[track_caller]
fn check_with(ws: &Path, rule: &[&str], command: &str, cap: u64, want: Match) {
    let root = Root::new(ws);
    let script = parse(command);
    let places = places(&script, &root);
    let cx = Context {
        root: &root,
        script: &script,
        places: &places,
        hash_max_bytes: cap,
    };
    let rule: Vec<String> = rule.iter().map(|w| w.to_string()).collect();
    assert_eq!(restricts(&rule, &cx), want, "{rule:?} against {command:?}");
}

/// The default `policy.program_hash_max_bytes`.
const CAP: u64 = 64 << 20;

#[track_caller]
fn check(ws: &Path, rule: &[&str], command: &str, want: Match) {
    check_with(ws, rule, command, CAP, want);
}

fn ws() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    dir
}

#[test]
fn a_link_to_the_denied_program_is_the_denied_program() {
    let dir = ws();
    let ws = dir.path();
    std::os::unix::fs::symlink(installed("rm"), ws.join("del")).unwrap();
    std::os::unix::fs::symlink("del", ws.join("del2")).unwrap();
    for c in [
        "./del victim",
        "./del2 -f victim",
        "sh -c './del victim'",
        "env ./del victim",
        "cd sub && ../del victim",
        "ls; ./del victim",
    ] {
        check(ws, &["rm"], c, Match::Yes);
    }
    std::os::unix::fs::symlink(installed("git"), ws.join("g")).unwrap();
    check(ws, &["git", "push"], "./g push origin", Match::Yes);
    check(ws, &["git", "push"], "./g send-pack origin", Match::Yes);
    // The rule's other words still have to be there.
    check(ws, &["git", "push"], "./g status", Match::No);
}

#[test]
fn a_copy_is_found_by_its_content_up_to_the_cap() {
    let dir = ws();
    let ws = dir.path();
    std::fs::copy(installed("rm"), ws.join("tidy")).unwrap();
    check(ws, &["rm"], "./tidy victim", Match::Yes);
    // With no content compared, or one byte more, a copy is another program: one of the
    // workspace's, which may run anything, so still a doubt.
    check_with(ws, &["rm"], "./tidy victim", 0, Match::Maybe);
    let mut bytes = std::fs::read(ws.join("tidy")).unwrap();
    bytes.push(0);
    std::fs::write(ws.join("tidy"), bytes).unwrap();
    check(ws, &["rm"], "./tidy victim", Match::Maybe);
    // Outside the workspace, another file is another program.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("tidy"), "#!/bin/sh\necho hi\n").unwrap();
    check(ws, &["rm"], &format!("{}/tidy victim", outside.path().display()), Match::No);
}

#[test]
fn a_program_the_same_line_makes_or_that_is_missing_may_be_the_denied_one() {
    let dir = ws();
    let ws = dir.path();
    // A harmless file now, replaced by the line before it runs.
    std::fs::write(ws.join("del"), "#!/bin/sh\necho hi\n").unwrap();
    for c in [
        "ln -s /bin/rm del && ./del victim",
        "ln -sf /bin/rm del; ./del victim",
        "cp /bin/rm ./x && ./x victim",
        "cat /bin/rm > ./x; ./x victim",
        "./missing victim",
        "missing-program-4711 victim",
    ] {
        check(ws, &["rm"], c, Match::Maybe);
    }
    // Only where the rule's other words could match.
    check(ws, &["git", "push"], "ln -s /bin/rm del && ./del victim", Match::No);
    check(ws, &["git", "push"], "./missing victim", Match::No);
    check(ws, &["git", "push"], "./missing push", Match::Maybe);
}

#[test]
fn other_programs_are_not_the_denied_one() {
    let dir = ws();
    let ws = dir.path();
    std::fs::write(ws.join("build.sh"), "#!/bin/sh\necho building\n").unwrap();
    for c in ["ls -la", "cat victim", "echo rm", "cd sub", "true", "/bin/ls victim"] {
        check(ws, &["rm"], c, Match::No);
    }
    // The workspace's own program may run the denied one: a doubt where the rule could match.
    check(ws, &["rm"], "./build.sh victim", Match::Maybe);
    check(ws, &["git", "push"], "./build.sh", Match::No);
}

#[test]
fn git_plumbing_is_the_porcelain_it_does_the_work_of() {
    let dir = ws();
    let ws = dir.path();
    for c in [
        "git send-pack origin main",
        "git -C . send-pack origin",
        "git http-push https://x/r main",
        "git-send-pack origin main",
        "/usr/lib/git-core/git-send-pack origin",
        "git-receive-pack .",
        "git remote-ext origin 'sh -c x'",
    ] {
        check(ws, &["git", "push"], c, Match::Yes);
    }
    check(ws, &["git", "push"], "ssh host git-receive-pack repo.git", Match::Maybe);
    for c in ["git status", "git log --oneline", "git commit-tree x", "git send-email x"] {
        check(ws, &["git", "push"], c, Match::No);
    }
    for c in ["git commit-tree HEAD^{tree} -m x", "git update-ref refs/heads/main abc"] {
        check(ws, &["git", "commit"], c, Match::Yes);
    }
    check(ws, &["git", "fetch"], "git fetch-pack origin", Match::Yes);
    check(ws, &["git", "add"], "git update-index --add x", Match::Yes);
}

#[test]
fn equivalents_keep_the_rules_rest() {
    let words = |w: &[&str]| w.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let eqs = equivalents(&words(&["git", "commit", "--amend"]));
    assert_eq!(eqs[0], words(&["git", "commit", "--amend"]));
    assert!(eqs.contains(&words(&["git", "commit-tree", "--amend"])));
    assert!(eqs.contains(&words(&["git", "update-ref", "--amend"])));
    assert_eq!(equivalents(&words(&["rm"])), vec![words(&["rm"])]);
}

#[test]
fn a_fifo_swapped_in_for_a_program_is_not_waited_on() {
    // `restricts` looks at a file before it hashes it; a FIFO put in its place between the two
    // is what `digest` then meets.
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("del");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o700) }, 0);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(digest(&fifo, CAP)));
    let hashed = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the hash waited on a FIFO");
    assert_eq!(hashed, None);
    let file = dir.path().join("copy");
    std::fs::write(&file, "#!/bin/sh\n").unwrap();
    assert!(digest(&file, CAP).is_some());
}
