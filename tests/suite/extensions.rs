//! Extension tools and sub-agents, governed like every other tool.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::json;
use toolslot::config::Config;
use toolslot::event::PipelineEvent;
use toolslot_actors::subagent::{AgentRunner, Turn};
use toolslot_actors::{Dispatcher, SessionOptions, build_toolset};

use super::support::*;

fn config(toml: &str, ws: &std::path::Path) -> Arc<Config> {
    let file = ws.join(".ext.toml");
    std::fs::write(
        &file,
        format!("[execution]\nworkers = 1\n[overflow]\ndir = \"{}/.overflow\"\n{toml}", ws.display()),
    )
    .unwrap();
    Arc::new(Config::load_with_env(Some(&file), std::iter::empty()).unwrap())
}

fn word_count() -> String {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/extensions/word_count.py");
    format!(
        "[[extensions]]\nname = \"word_count\"\ndescription = \"Count words\"\ncapabilities = [\"read_only\"]\ncommand = [\"python3\", \"{}\"]\ninput_schema = '{{\"type\":\"object\",\"properties\":{{\"path\":{{\"type\":\"string\"}}}},\"required\":[\"path\"]}}'\nparallel = true\n",
        script.display()
    )
}

#[test]
fn extension_tools_run_out_of_process_and_bad_ones_fail_closed() {
    system(async {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("doc.txt"), "one two three\nfour\n").unwrap();
        let bad = "[[extensions]]\nname = \"bad_caps\"\ndescription = \"x\"\ncapabilities = [\"teleport\"]\ncommand = [\"true\"]\ninput_schema = '{\"type\":\"object\"}'\n\
                   [[extensions]]\nname = \"bad_schema\"\ndescription = \"x\"\ncommand = [\"true\"]\ninput_schema = 'not json'\n";
        let cfg = config(&format!("{}{bad}", word_count()), ws.path());
        let toolset = build_toolset(Arc::clone(&cfg), None).await.unwrap();
        let reg = toolset.registry.current();
        let kinds: Vec<String> = reg.notices().iter().map(|n| n.message.clone()).collect();
        assert!(kinds.iter().any(|m| m.contains("bad_caps") && m.contains("teleport")), "{kinds:?}");
        assert!(
            kinds.iter().any(|m| m.contains("bad_schema") && m.contains("not JSON")),
            "{kinds:?}"
        );
        assert!(reg.get("word_count").unwrap().meta.parallel_safe);
        let d = toolset.attach(Dispatcher::new(Arc::clone(&cfg), Arc::clone(&reg)));
        let s = d.open_session(SessionOptions {
            workspace: Some(ws.path().to_path_buf()),
            ..Default::default()
        });
        let ev = run_round(
            &d,
            &s,
            openai_chat(
                &[
                    ("word_count", json!({"path": "doc.txt"})),
                    ("word_count", json!({"path": "../etc/passwd"})),
                    ("bad_caps", json!({})),
                    ("word_count", json!({})),
                ],
                "tool_calls",
            ),
        )
        .await;
        let r = results(&ev);
        assert_eq!(r[0].content, "4 words, 2 lines");
        assert!(r[1].is_error && r[1].content.contains("no such file"));
        assert!(r[2].content.contains("unavailable"), "{}", r[2].content);
        assert!(
            r[3].content.contains("\"field\":\"path\""),
            "validated like any tool: {}",
            r[3].content
        );
    });
}

/// A runner that answers from a script of recorded-format responses, one per turn, and
/// checks it was handed the previous turn's results.
struct Scripted {
    responses: Vec<Vec<u8>>,
}

impl AgentRunner for Scripted {
    fn next_response<'a>(&'a self, task: &'a str, depth: usize, turns: &'a [Turn]) -> BoxFuture<'a, Result<Vec<u8>, String>> {
        Box::pin(async move {
            assert_eq!(depth, 1);
            assert!(task.contains("words"));
            let n = turns.iter().filter(|t| matches!(t, Turn::Assistant(_))).count();
            self.responses.get(n).cloned().ok_or_else(|| "script exhausted".to_string())
        })
    }
}

#[test]
fn a_sub_agent_runs_its_own_session_with_the_same_tools() {
    system(async {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("doc.txt"), "alpha beta\n").unwrap();
        let cfg = config(&format!("[approval]\nmode = \"full-auto\"\n{}", word_count()), ws.path());
        let final_answer = format!(
            "event: message_start\ndata: {}\n\nevent: content_block_start\ndata: {}\n\nevent: content_block_delta\ndata: {}\n\nevent: message_delta\ndata: {}\n\nevent: message_stop\ndata: {}\n\n",
            json!({"type": "message_start", "message": {}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "The file has 2 words."}}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
            json!({"type": "message_stop"})
        );
        let runner = Arc::new(Scripted {
            responses: vec![
                openai_chat(&[("word_count", json!({"path": "doc.txt"}))], "tool_calls"),
                final_answer.into_bytes(),
            ],
        });
        let toolset = build_toolset(Arc::clone(&cfg), Some(runner)).await.unwrap();
        assert!(toolset.registry.current().get("spawn_agent").is_some());
        let d = toolset.attach(Dispatcher::new(Arc::clone(&cfg), toolset.registry.clone()));
        let s = d.open_session(SessionOptions {
            workspace: Some(ws.path().to_path_buf()),
            ..Default::default()
        });
        let ev = run_round(
            &d,
            &s,
            openai_chat(&[("spawn_agent", json!({"task": "count the words of doc.txt"}))], "tool_calls"),
        )
        .await;
        let r = results(&ev);
        assert_eq!(r[0].content, "The file has 2 words.", "{r:?}");
        assert!(
            ev.iter()
                .any(|e| matches!(e, PipelineEvent::CallFinished { name, .. } if name == "spawn_agent"))
        );
    });
}

#[test]
fn sub_agents_nest_only_to_the_configured_depth() {
    system(async {
        let ws = tempfile::tempdir().unwrap();
        let cfg = config("[subagents]\nmax_depth = 1\n", ws.path());
        let runner = Arc::new(Scripted { responses: Vec::new() });
        let toolset = build_toolset(Arc::clone(&cfg), Some(runner)).await.unwrap();
        assert!(toolset.registry.current().get("spawn_agent").is_some(), "depth 0 may spawn");
        let cfg0 = config("[subagents]\nmax_depth = 0\n", ws.path());
        let toolset = build_toolset(cfg0, Some(Arc::new(Scripted { responses: Vec::new() })))
            .await
            .unwrap();
        assert!(
            toolset.registry.current().get("spawn_agent").is_none(),
            "max_depth 0 means no sub-agents"
        );
    });
}
