//! Background shell tasks through the pipeline: start, poll, kill, forget, limits.

use std::time::Duration;

use serde_json::json;
use toolslot::event::ToolResult;
use toolslot_actors::Dispatcher;

use super::support::*;

async fn call(d: &Dispatcher, s: &str, name: &str, args: serde_json::Value) -> ToolResult {
    results(&run_round(d, s, openai_chat(&[(name, args)], "tool_calls")).await).remove(0)
}

/// Polls `id` until its output so far contains `want` and its state line contains `state`.
async fn poll_until(d: &Dispatcher, s: &str, id: &str, want: &str, state: &str) -> (String, ToolResult) {
    let mut seen = String::new();
    for _ in 0..200 {
        let r = call(d, s, "shell_output", json!({"task_id": id})).await;
        seen.push_str(&r.content);
        if seen.contains(want) && r.content.contains(state) {
            return (seen, r);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {id} never showed {want:?} with {state:?}: {seen}");
}

#[test]
fn a_background_task_is_started_polled_and_killed() {
    system(async {
        let bed = Bed::new("[approval]\nmode = \"full-auto\"\n");
        let d = bed.dispatcher();
        let s = bed.session(&d);
        let started = call(&d, &s, "exec_shell", json!({"command": "echo one; sleep 30", "background": true})).await;
        assert!(
            !started.is_error && started.content.contains("Started background task `t1`"),
            "{}",
            started.content
        );
        let (_, running) = poll_until(&d, &s, "t1", "one", ": running]").await;
        assert!(!running.is_error);
        let killed = call(&d, &s, "kill_shell", json!({"task_id": "t1"})).await;
        assert!(killed.content.contains("was killed"), "{}", killed.content);
        let last = call(&d, &s, "shell_output", json!({"task_id": "t1"})).await;
        assert!(last.content.contains(": killed]"), "{}", last.content);
        // Read to the end and ended: forgotten.
        let gone = call(&d, &s, "shell_output", json!({"task_id": "t1"})).await;
        assert!(
            gone.is_error && gone.content.contains("No background task `t1`"),
            "{}",
            gone.content
        );
    });
}

#[test]
fn a_finished_task_reports_its_exit_and_a_running_poll_is_never_saved_whole() {
    system(async {
        let bed = Bed::new("[approval]\nmode = \"full-auto\"\n");
        let d = bed.dispatcher();
        let s = bed.session(&d);
        call(&d, &s, "exec_shell", json!({"command": "echo done; exit 3", "background": true})).await;
        let (_, ended) = poll_until(&d, &s, "t1", "done", "exited with code 3").await;
        assert!(ended.is_error, "a non-zero exit is an error result");
        // More output than one result may hold, from a task still running: cut, and no
        // promise of a saved whole, since the whole is not written yet.
        call(
            &d,
            &s,
            "exec_shell",
            json!({"command": "yes x | head -c 200000; sleep 30", "background": true}),
        )
        .await;
        // Wait until it has written everything, then look once.
        let logs = bed.workspace.path().join(".overflow").join(&s).join("tasks");
        for _ in 0..200 {
            let size: u64 = std::fs::read_dir(&logs)
                .map(|it| it.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum())
                .unwrap_or(0);
            if size >= 200_000 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let big = call(&d, &s, "shell_output", json!({"task_id": "t2"})).await;
        assert!(big.content.contains(": running]"), "{}", &big.content[big.content.len() - 200..]);
        assert!(big.content.contains("bytes ("), "cut like any output");
        assert!(big.content.len() < 100_000, "cut like any output: {}", big.content.len());
        assert!(
            !big.content.contains("retrieve_tool_result"),
            "a partial view is not saved as the full output"
        );
        call(&d, &s, "kill_shell", json!({"task_id": "t2"})).await;
    });
}

#[test]
fn running_tasks_are_limited_per_session() {
    system(async {
        let bed = Bed::new("[approval]\nmode = \"full-auto\"\n[shell]\nbackground_max_tasks = 1\n");
        let d = bed.dispatcher();
        let s = bed.session(&d);
        call(&d, &s, "exec_shell", json!({"command": "sleep 30", "background": true})).await;
        let refused = call(&d, &s, "exec_shell", json!({"command": "sleep 30", "background": true})).await;
        assert!(
            refused.is_error && refused.content.contains("background_max_tasks"),
            "{}",
            refused.content
        );
        call(&d, &s, "kill_shell", json!({"task_id": "t1"})).await;
        let again = call(&d, &s, "exec_shell", json!({"command": "true", "background": true})).await;
        assert!(!again.is_error, "a killed task frees its place: {}", again.content);
        // Closing the session ends what is left.
        d.close_session(&s).unwrap();
    });
}
