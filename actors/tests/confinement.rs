//! Workspace confinement through the binary (issue #12, part 5): the last component of a
//! path, special files, and paths built to make resolution slow, as a model would send them.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;

const SECRET: &str = "outside-secret-7f3a";

/// A workspace holding `link` (a symlink to a file outside holding [`SECRET`]), `dirlink` (to
/// the folder outside), `zero` (to /dev/zero) and `fifo` (a named pipe nobody writes).
fn hostile_bed() -> (Bed, tempfile::TempDir) {
    let bed = Bed::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), format!("{SECRET}\n")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), bed.ws.join("link")).unwrap();
    std::os::unix::fs::symlink(outside.path(), bed.ws.join("dirlink")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", bed.ws.join("zero")).unwrap();
    let status = std::process::Command::new("mkfifo").arg(bed.ws.join("fifo")).status().unwrap();
    assert!(status.success());
    std::fs::write(bed.ws.join("inside.txt"), "inside text\n").unwrap();
    (bed, outside)
}

/// Every spelling of a path that ends outside the workspace.
fn escapes() -> Vec<&'static str> {
    vec![
        "link",
        "link/",
        "link/.",
        "./link/./",
        "link//",
        "nothing/../link",
        "nothing/../link/",
        "dirlink/secret.txt",
        "dirlink/./secret.txt",
        "dirlink/",
        "nothing/../dirlink/secret.txt",
        "zero",
        "zero/",
    ]
}

fn calls_for(tool: &'static str) -> Vec<(&'static str, Value)> {
    escapes()
        .into_iter()
        .map(|p| {
            let args = match tool {
                "grep_files" => json!({"pattern": "secret", "path": p}),
                "edit_file" => json!({"path": p, "search": SECRET, "replace": "x"}),
                _ => json!({"path": p}),
            };
            (tool, args)
        })
        .collect()
}

#[test]
fn the_last_component_never_reaches_outside_through_replay() {
    let (bed, outside) = hostile_bed();
    for tool in ["read_file", "grep_files", "edit_file"] {
        let calls = calls_for(tool);
        let run = bed.replay("[approval]\nmode = \"full-auto\"\n", &calls);
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        let results = run.results();
        assert_eq!(results.len(), calls.len());
        for (r, (_, args)) in results.iter().zip(&calls) {
            let content = r["content"].as_str().unwrap();
            assert!(!content.contains(SECRET), "{tool} {args} read the outside file: {content}");
            assert_eq!(r["is_error"], true, "{tool} {args} was not refused: {content}");
        }
    }
    // Nothing outside was changed either.
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        format!("{SECRET}\n")
    );
    // What is inside still works, through a symlink that stays inside too.
    std::os::unix::fs::symlink("inside.txt", bed.ws.join("inner_link")).unwrap();
    let run = bed.replay(
        "[approval]\nmode = \"full-auto\"\n",
        &[
            ("read_file", json!({"path": "inner_link/"})),
            ("grep_files", json!({"pattern": "inside", "path": "."})),
        ],
    );
    assert!(run.content(0).contains("inside text"), "{}", run.content(0));
    assert!(run.content(1).contains("inside.txt:1:inside text"), "{}", run.content(1));
}

#[test]
fn special_files_are_refused_at_once_and_the_process_exits() {
    let (bed, _outside) = hostile_bed();
    let started = Instant::now();
    let run = bed.replay(
        "[approval]\nmode = \"full-auto\"\n[execution]\ncall_timeout_ms = 120000\n",
        &[
            ("read_file", json!({"path": "fifo"})),
            ("grep_files", json!({"pattern": "x", "path": "fifo"})),
            ("edit_file", json!({"path": "fifo", "search": "a", "replace": "b"})),
            ("grep_files", json!({"pattern": "x"})),
        ],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        // Far under the calls' timeout: a FIFO that held a call would hold it for two minutes.
        started.elapsed() < Duration::from_secs(60),
        "a FIFO held the call: {:?}",
        started.elapsed()
    );
    let c = run.content(0);
    assert!(run.results()[0]["is_error"] == true && c.contains("FIFO"), "{c}");
    assert!(!run.content(3).contains("timed out"), "{}", run.content(3));
}

#[test]
fn a_device_in_the_workspace_is_never_read_without_bound() {
    // A device node cannot be made without privileges, so /dev/zero is reached the way a
    // workspace would hold it: through a bind of the path the model gives, here an absolute
    // path into /dev (outside, refused) and a symlink whose target is inside /dev.
    let (bed, _outside) = hostile_bed();
    let run = bed.replay(
        "[approval]\nmode = \"full-auto\"\n",
        &[
            ("read_file", json!({"path": "/dev/zero"})),
            ("read_file", json!({"path": "zero"})),
            ("grep_files", json!({"pattern": "x", "path": "zero/"})),
        ],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    for r in run.results() {
        assert_eq!(r["is_error"], true, "{r}");
        assert!(r["content"].as_str().unwrap().len() < 2000, "{r}");
    }
}

#[test]
fn absurd_paths_are_refused_at_once_naming_the_limit() {
    let (bed, _outside) = hostile_bed();
    let deep = "a/".repeat(300_000);
    let many_dots = "./".repeat(300_000) + "inside.txt";
    let ups = "x/../".repeat(100_000) + "inside.txt";
    let started = Instant::now();
    let run = bed.replay(
        "[approval]\nmode = \"full-auto\"\n[repair]\nmax_input_bytes = 4194304\n",
        &[
            ("read_file", json!({"path": deep})),
            ("write_file", json!({"path": format!("{deep}x"), "content": "x"})),
            ("read_file", json!({"path": many_dots})),
            ("grep_files", json!({"pattern": "x", "path": ups})),
            ("read_file", json!({"path": "b/".repeat(200) + "x"})),
        ],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(
        // A stall, not a speed check: resolution quadratic in these paths takes many minutes.
        started.elapsed() < Duration::from_secs(60),
        "resolution was slow: {:?}",
        started.elapsed()
    );
    for i in 0..4 {
        let c = run.content(i);
        assert!(c.contains("workspace.max_path_bytes"), "{i}: {}", &c[..c.len().min(300)]);
    }
    // Within the limits, a long path of missing folders is an ordinary "not found".
    assert!(!run.content(4).contains("workspace.max_path"), "{}", run.content(4));
}

#[test]
fn serve_confines_the_last_component_too() {
    let (bed, _outside) = hostile_bed();
    let server = bed.serve("[loop_guard]\nfailure_warn = 1000\nfailure_pause = 1000\n");
    let session = server.session(&bed.ws);
    let calls: Vec<(&str, Value)> = escapes().into_iter().map(|p| ("read_file", json!({"path": p}))).collect();
    let results = server.round(&session, &calls);
    assert_eq!(results.len(), calls.len());
    for r in &results {
        assert!(!r["content"].as_str().unwrap().contains(SECRET), "{r}");
        assert_eq!(r["is_error"], true, "{r}");
    }
    // A FIFO neither hangs the call nor the server: the next round runs.
    let results = server.round(&session, &[("read_file", json!({"path": "fifo"}))]);
    assert!(results[0]["content"].as_str().unwrap().contains("FIFO"), "{}", results[0]);
    let results = server.round(&session, &[("read_file", json!({"path": "inside.txt"}))]);
    assert!(results[0]["content"].as_str().unwrap().contains("inside text"));
}

/// A repository's program that swaps folders for links as fast as it can (`renameat2` with
/// `RENAME_EXCHANGE`): `d` with `out` (a link out of the workspace) and `x` with a link to
/// `secrets` it makes itself (so no command word names the hidden folder), after saying it
/// started.
const SWAPPER: &str = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
os.symlink("secrets", "tl")
open("started", "w").close()
while True:
    libc.renameat2(-100, b"d", -100, b"out", 2)
    libc.renameat2(-100, b"x", -100, b"tl", 2)
"#;

#[test]
fn a_folder_a_running_program_swaps_for_a_link_never_takes_a_write_out_nor_a_read_to_a_hidden_file() {
    // `confine` resolves a path once; a command cleared to write, running in the background,
    // swaps `d` with a link out of the workspace and `x` (a folder holding a decoy) with a link
    // to `secrets`, which the policy hides. Writes by path landed outside; reads got the secret.
    let bed = Bed::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(bed.ws.join("swap.py"), SWAPPER).unwrap();
    std::fs::create_dir_all(bed.ws.join("secrets")).unwrap();
    std::fs::write(bed.ws.join("secrets/key"), SECRET).unwrap();
    for d in ["d", "x"] {
        std::fs::create_dir(bed.ws.join(d)).unwrap();
    }
    std::fs::write(bed.ws.join("x/key"), "decoy").unwrap();
    std::fs::write(outside.path().join("outside-name.txt"), "").unwrap();
    std::os::unix::fs::symlink(outside.path(), bed.ws.join("out")).unwrap();
    let config = "[approval]\nmode = \"full-auto\"\n[loop_guard]\nfailure_warn = 100000\nfailure_pause = 100000\n\
                  [[policy.rules]]\ntool = \"*\"\ndecision = \"deny\"\npath = \"secrets/**\"\nreason = \"hidden\"\n";
    let start = vec![("exec_shell", json!({"command": "python3 swap.py", "background": true}))];
    let started = vec![(
        "exec_shell",
        json!({"command": "until [ -e started ]; do sleep 0.05; done; echo up"}),
    )];
    let mut calls = Vec::new();
    for i in 0..300 {
        calls.push(("write_file", json!({"path": format!("d/f{i}.txt"), "content": "x"})));
        calls.push(("read_file", json!({"path": "x/key", "limit": i + 1})));
        calls.push(("list_dir", json!({"path": ".", "depth": 2 + i % 2})));
    }
    let run = bed.replay_rounds(config, &[start, started, calls], |_| {});
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let results = run.results();
    assert_eq!(results.len(), 900);
    let escaped: Vec<_> = std::fs::read_dir(outside.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(escaped, ["outside-name.txt"], "written outside the workspace");
    let contents: Vec<&str> = results.iter().map(|r| r["content"].as_str().unwrap()).collect();
    assert!(!contents.iter().any(|c| c.contains(SECRET)), "a read returned the hidden file");
    assert!(
        !contents.iter().any(|c| c.contains("outside-name")),
        "a listing showed a folder outside"
    );
    assert!(
        contents.iter().any(|c| c.contains("file  swap.py")),
        "no listing listed the workspace"
    );
    // The swaps did happen while the calls ran: some calls met a swapped folder, when their
    // path was resolved (outside, or hidden) or after (changed while it was opened).
    let met = contents
        .iter()
        .filter(|c| {
            ["changed while it was opened", "outside the workspace", "denied by the policy"]
                .iter()
                .any(|w| c.contains(w))
        })
        .count();
    assert!(met > 0, "no call met a swapped folder: {:?}", &contents[..4]);
    assert!(contents.iter().any(|c| c.contains("decoy")), "no read found the folder in place");
}

#[test]
fn a_command_cleared_to_write_above_the_workspace_cannot_move_it_for_a_link() {
    // `shell.writable_paths` holds a folder above the workspace: a command may write there,
    // but if it could rename the folder between them and put a link in the workspace's place,
    // the file tools, which find the workspace by its path, would read and write where the
    // link leads. bubblewrap pins the folder; Landlock, which cannot, refuses to run it.
    for sandbox in ["bwrap", "landlock"] {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let ws = dir.path().join("a/ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("inside.txt"), "inside\n").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), format!("{SECRET}\n")).unwrap();
        let bed = Bed { dir, ws };
        let top = bed.dir.path().display().to_string();
        let config = format!("[approval]\nmode = \"full-auto\"\n[shell]\nsandbox = \"{sandbox}\"\nwritable_paths = [\"{top}\"]\n");
        let swap = format!(
            "mv {top}/a {top}/b; mkdir -p {top}/a && ln -s {} {top}/a/ws; ls -la {top}/a",
            outside.path().display()
        );
        let rounds = vec![
            vec![("exec_shell", json!({"command": swap}))],
            vec![
                ("read_file", json!({"path": "secret.txt"})),
                ("write_file", json!({"path": "planted.txt", "content": "x"})),
                ("list_dir", json!({})),
            ],
        ];
        let run = bed.replay_rounds(&config, &rounds, |_| {});
        assert_eq!(run.code, Some(0), "{sandbox}: {}", run.stderr);
        let results = round_results(&run.events);
        assert_eq!(results.len(), 4, "{sandbox}");
        for r in &results {
            let content = r["content"].as_str().unwrap_or_default();
            assert!(!content.contains(SECRET), "{sandbox}: read outside: {content}");
        }
        let listed = results[3]["content"].as_str().unwrap_or_default();
        assert!(
            listed.contains("inside.txt") && !listed.contains("secret.txt"),
            "{sandbox}: listed outside: {listed}"
        );
        if sandbox == "landlock" {
            let said = results[0]["content"].as_str().unwrap_or_default();
            assert!(said.contains("cannot keep the workspace in place"), "{said}");
        }
        assert!(
            !outside.path().join("planted.txt").exists(),
            "{sandbox}: a file was written outside"
        );
        assert!(bed.ws.join("inside.txt").is_file(), "{sandbox}: the workspace was moved");
        assert!(
            !bed.dir.path().join("b").exists(),
            "{sandbox}: the folder above the workspace was renamed"
        );
    }
}
