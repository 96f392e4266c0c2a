//! Bounded output through the binary (issue #12, part 6): a command's output is streamed in
//! bounded memory and saved up to a cap; a background task's log and run time are capped,
//! and a task over a cap is killed with everything it started.

mod support;

use std::time::Duration;

use serde_json::json;
use support::*;

const FULL_AUTO: &str = "[approval]\nmode = \"full-auto\"\n";

/// Bytes of every saved output under `dir`.
fn saved_sizes(dir: &std::path::Path) -> Vec<u64> {
    let mut out = Vec::new();
    let Ok(sessions) = std::fs::read_dir(dir) else { return out };
    for s in sessions.flatten() {
        for f in std::fs::read_dir(s.path()).into_iter().flatten().flatten() {
            if f.path().extension().is_some_and(|e| e == "txt") {
                out.push(f.metadata().unwrap().len());
            }
        }
    }
    out
}

#[test]
fn a_large_output_is_streamed_in_bounded_memory_and_saved_up_to_the_cap() {
    let bed = Bed::new();
    // 100 MB of log lines with one failure in the middle of them (a debug build reads about
    // 10 MB a second; holding it whole took twice its size in memory).
    let command = "yes 'compiling a crate of the workspace' | head -c 50000000; echo; echo 'error[E0308]: mismatched types'; yes 'linking the rest of it' | head -c 50000000; echo done";
    let run = bed.replay(
        &format!("{FULL_AUTO}[shell]\ntimeout_ms = 120000\n"),
        &[("exec_shell", json!({"command": command}))],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let content = run.content(0);
    assert!(
        run.peak_rss_kb < 80_000,
        "reading 100 MB of output took {} kB of memory",
        run.peak_rss_kb
    );
    assert!(content.len() < 40_000, "the result is cut: {} bytes", content.len());
    assert!(content.contains("error[E0308]: mismatched types"), "the failure is rescued");
    assert!(content.ends_with("[exit code: 0]"), "{}", &content[content.len() - 200..]);
    assert!(content.contains("done\n"), "the tail is kept");
    assert!(
        content.contains("Only the first 16777216 of 100000037 bytes were saved (shell.max_saved_bytes)"),
        "{}",
        &content[20_000..content.len().min(23_000)]
    );
    assert!(!content.contains("Full output saved"), "only a part was saved");
    assert_eq!(saved_sizes(&bed.overflow()), vec![16_777_216], "what is on disk is the cap");
    let cut = run.notices("output_truncated");
    assert!(cut.iter().any(|m| m.contains("16777216 bytes saved")), "{cut:?}");
}

#[test]
fn an_output_under_the_cap_is_saved_whole_and_said_so() {
    let bed = Bed::new();
    let run = bed.replay(FULL_AUTO, &[("exec_shell", json!({"command": "seq 1 100000"}))]);
    let content = run.content(0);
    assert!(content.contains("Full output saved; call retrieve_tool_result ref="), "{content}");
    let sizes = saved_sizes(&bed.overflow());
    // The whole output, then the trailer.
    assert_eq!(sizes, vec![588_895 + "\n[exit code: 0]".len() as u64]);
}

#[test]
fn a_background_log_over_its_cap_kills_the_task_and_says_so() {
    let bed = Bed::new();
    let marker = bed.ws.join("survived");
    // The marker's 6 s leave a loaded machine room to kill the task once its log passes the cap.
    let command = format!("(sleep 6; touch {}) & yes 'a line of a chatty server'", marker.display());
    let run = bed.replay_rounds(
        &format!("{FULL_AUTO}[shell]\nbackground_max_log_bytes = 1000000\n"),
        &[
            vec![("exec_shell", json!({"command": command, "background": true}))],
            vec![
                ("exec_shell", json!({"command": "sleep 7"})),
                ("shell_output", json!({"task_id": "t1"})),
            ],
        ],
        |_| {},
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let polled = run.content(1);
    assert!(
        polled.contains("killed: its output passed shell.background_max_log_bytes (1000000 bytes)"),
        "{}",
        &polled[polled.len().saturating_sub(400)..]
    );
    assert!(!marker.exists(), "what the task started outlived the kill");
}

#[test]
fn a_background_task_over_its_run_time_is_killed_with_its_group() {
    let bed = Bed::new();
    let marker = bed.ws.join("late");
    // The marker's 6 s leave a loaded machine room to kill the task past its 1 s.
    let command = format!("sleep 1 & sleep 6; touch {}", marker.display());
    let run = bed.replay_rounds(
        &format!("{FULL_AUTO}[shell]\nbackground_max_secs = 1\n"),
        &[
            vec![("exec_shell", json!({"command": command, "background": true}))],
            vec![
                ("exec_shell", json!({"command": "sleep 7"})),
                ("shell_output", json!({"task_id": "t1"})),
            ],
        ],
        |_| {},
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let polled = run.content(1);
    assert!(polled.contains("killed: it ran past shell.background_max_secs (1 s)"), "{polled}");
    assert!(!marker.exists(), "the task ran past its time");
}

#[test]
fn serve_caps_background_logs_on_disk_and_exec_shell_memory() {
    let bed = Bed::new();
    let server = bed.serve(&format!(
        "{FULL_AUTO}[shell]\nbackground_max_log_bytes = 500000\nmax_saved_bytes = 1000000\n"
    ));
    let session = server.session(&bed.ws);
    let results = server.round(
        &session,
        &[("exec_shell", json!({"command": "yes 'spam spam spam'", "background": true}))],
    );
    assert!(results[0]["content"].as_str().unwrap().contains("Started background task"));
    // The log on disk never passes the cap, whatever the task writes.
    let tasks = bed.overflow().join(&session).join("tasks");
    let log_size = || -> u64 {
        std::fs::read_dir(&tasks)
            .map(|d| d.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum())
            .unwrap_or(0)
    };
    assert!(eventually(10, || log_size() >= 500_000), "the log never filled: {}", log_size());
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(log_size(), 500_000);
    let results = server.round(&session, &[("shell_output", json!({"task_id": "t1"}))]);
    let polled = results[0]["content"].as_str().unwrap();
    assert!(
        polled.contains("shell.background_max_log_bytes"),
        "{}",
        &polled[polled.len() - 300..]
    );
    // A foreground command's output over the cap: the saved part is the cap.
    let results = server.round(
        &session,
        &[("exec_shell", json!({"command": "head -c 50000000 /dev/zero | tr '\\0' 'z'"}))],
    );
    let content = results[0]["content"].as_str().unwrap();
    assert!(
        content.contains("Only the first 1000000 of 50000000 bytes were saved"),
        "{}",
        &content[..300]
    );
    assert!(saved_sizes(&bed.overflow()).contains(&1_000_000));
}
