//! Extension tools and sub-agents, governed like every other tool.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::json;
use toolslot::config::Config;
use toolslot::event::PipelineEvent;
use toolslot_actors::host::subagent::{AgentRunner, Turn};
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
        // What a program says is external content, like a server's answer.
        assert!(
            r[0].content.starts_with("<external_content source=\"word_count\"") && r[0].content.contains("\n4 words, 2 lines\n"),
            "{}",
            r[0].content
        );
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
                .any(|e| matches!(e, PipelineEvent::CallFinished { name, .. } if &**name == "spawn_agent"))
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

/// An Anthropic response that only says `text` (a sub-agent's final answer).
fn final_text(text: &str) -> Vec<u8> {
    format!(
        "event: message_start\ndata: {}\n\nevent: content_block_start\ndata: {}\n\nevent: content_block_delta\ndata: {}\n\nevent: content_block_stop\ndata: {}\n\nevent: message_delta\ndata: {}\n\nevent: message_stop\ndata: {}\n\n",
        json!({"type": "message_start", "message": {}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
        json!({"type": "message_stop"})
    )
    .into_bytes()
}

/// Runs a parent round calling spawn_agent in `ask` mode, answering the parent's own approval
/// with yes and every relayed sub-agent approval with `child_decision`. Returns the events.
async fn ask_mode_spawn(child_decision: toolslot_actors::HostDecision) -> (Vec<PipelineEvent>, tempfile::TempDir) {
    let ws = tempfile::tempdir().unwrap();
    let cfg = config("[approval]\nmode = \"ask\"\n", ws.path());
    let runner = Arc::new(toolslot_actors::RecordedRunner::new(vec![
        openai_chat(
            &[("write_file", json!({"path": "note.txt", "content": "written by the child"}))],
            "tool_calls",
        ),
        final_text("The child is done."),
    ]));
    let toolset = build_toolset(Arc::clone(&cfg), Some(runner)).await.unwrap();
    let d = toolset.attach(Dispatcher::new(Arc::clone(&cfg), toolset.registry.clone()));
    let s = d.open_session(SessionOptions {
        workspace: Some(ws.path().to_path_buf()),
        ..Default::default()
    });
    let body = openai_chat(&[("spawn_agent", json!({"task": "write the note"}))], "tool_calls");
    let input = toolslot_actors::RoundInput::Bytes(Box::pin(futures::stream::iter([Ok(body)])));
    let mut rx = d.submit_round(&s, input).unwrap();
    let mut events = Vec::new();
    while let Some(e) = rx.recv().await {
        match &e {
            PipelineEvent::ApprovalRequired { index, request, .. } => {
                d.answer_request(&s, *index, Some(*request), toolslot_actors::HostDecision::Approve)
                    .await
                    .unwrap();
            }
            PipelineEvent::Subagent { session, event, .. } => {
                assert_ne!(session, &s, "answers go to the child's session");
                if let PipelineEvent::ApprovalRequired { index, name, request, .. } = event.as_ref() {
                    assert_eq!(&**name, "write_file");
                    d.answer_request(session, *index, Some(*request), child_decision).await.unwrap();
                }
            }
            _ => {}
        }
        events.push(e);
    }
    assert_eq!(d.session_count(), 1, "the child's session is closed when the call ends");
    (events, ws)
}

#[test]
fn a_sub_agents_approvals_reach_the_host_and_are_obeyed() {
    system(async {
        let (events, ws) = ask_mode_spawn(toolslot_actors::HostDecision::Approve).await;
        let relayed: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                PipelineEvent::Subagent { index: 0, event, .. } => Some(match event.as_ref() {
                    PipelineEvent::ApprovalRequired { .. } => "required",
                    PipelineEvent::ApprovalDecided { .. } => "decided",
                    _ => "other",
                }),
                _ => None,
            })
            .collect();
        assert_eq!(relayed, vec!["required", "decided"]);
        assert_eq!(std::fs::read_to_string(ws.path().join("note.txt")).unwrap(), "written by the child");
        assert_eq!(results(&events)[0].content, "The child is done.");

        let (_, ws) = ask_mode_spawn(toolslot_actors::HostDecision::Reject).await;
        assert!(
            !ws.path().join("note.txt").exists(),
            "a rejected write in the child does not happen"
        );
    });
}
