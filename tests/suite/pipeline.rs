//! The Dispatcher and the five stages against docs/CONTRACT.md.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use toolslot::event::PipelineEvent;
use toolslot_actors::{HostDecision, RoundInput, Stage};

use super::support::*;

#[test]
fn results_are_in_index_order_whatever_the_completion_order() {
    system(async {
        let bed = Bed::new("");
        let d = bed.dispatcher();
        let s = bed.session(&d);
        // Later calls finish first.
        let calls: Vec<(&str, serde_json::Value)> = (0..8)
            .map(|i| ("sleepy", json!({"ms": 80 - i * 10, "tag": format!("t{i}")})))
            .collect();
        let events = run_round(&d, &s, openai_chat(&calls, "tool_calls")).await;
        let results = results(&events);
        let got: Vec<(usize, String)> = results.iter().map(|r| (r.index, r.content.clone())).collect();
        let want: Vec<(usize, String)> = (0..8).map(|i| (i, format!("t{i}"))).collect();
        assert_eq!(got, want);
        // They ran concurrently: finish events came in completion order, not index order.
        let finished: Vec<usize> = events
            .iter()
            .filter_map(|e| match e {
                PipelineEvent::CallFinished { index, .. } => Some(*index),
                _ => None,
            })
            .collect();
        assert_eq!(finished.len(), 8);
        assert!(matches!(events.last(), Some(PipelineEvent::RoundComplete { .. })));
    });
}

#[test]
fn every_call_gets_exactly_one_result_whatever_fails() {
    system(async {
        let bed = Bed::new("[execution]\ncall_timeout_ms = 200\n");
        let d = bed.dispatcher();
        let s = bed.session(&d);
        let body = openai_chat_raw(
            &[
                ("sleepy", r#"{"ms": 0, "tag": "ok"}"#),
                ("no_such_tool", r#"{}"#),
                ("read_file", r#"{"path": 3}"#),
                ("panicky", r#"{}"#),
                ("failing", r#"{}"#),
                ("sleepy", r#"{"ms": 5000, "tag": "slow"}"#),
                ("read_file", r#"{"path": "missing.txt"}"#),
                ("sleepy", r#"{"ms": 1, "tag": "last"}"#),
            ],
            "tool_calls",
        );
        let events = run_round(&d, &s, body).await;
        let r = results(&events);
        assert_eq!(r.iter().map(|r| r.index).collect::<Vec<_>>(), (0..8).collect::<Vec<_>>());
        let errors: Vec<bool> = r.iter().map(|r| r.is_error).collect();
        assert_eq!(errors, vec![false, true, true, true, true, true, true, false]);
        assert!(r[1].content.contains("unknown_tool"));
        assert!(r[2].content.contains("\"field\":\"path\""), "{}", r[2].content);
        assert!(r[3].content.contains("panicked"));
        assert!(r[5].content.contains("\"error\":\"timeout\""), "{}", r[5].content);
        assert_eq!(r[7].content, "last");
        // The session still works.
        let again = run_round(&d, &s, openai_chat(&[("sleepy", json!({"ms": 0, "tag": "after"}))], "tool_calls")).await;
        assert_eq!(results(&again)[0].content, "after");
    });
}

#[test]
fn rejection_is_exact_and_approval_for_session_is_loose() {
    system(async {
        // A question nobody answers becomes a rejection after 10 s instead of a hang.
        let bed = Bed::new("[execution]\napproval_timeout_ms = 10000\n");
        let d = bed.dispatcher();
        let s = bed.session(&d);
        let answer = |decision: HostDecision| {
            let d = d.clone();
            let s = s.clone();
            // Subscribed before the round starts, so no request is missed.
            let mut live = d.subscribe(&s).unwrap();
            async move {
                while let Ok(e) = live.recv().await {
                    if let PipelineEvent::ApprovalRequired { index, request, .. } = e {
                        d.answer_request(&s, index, Some(request), decision).await.unwrap();
                    }
                }
            }
        };
        let write = |path: &str| openai_chat(&[("write_file", json!({"path": path, "content": "x"}))], "tool_calls");
        // Reject a write.
        let h = actix_rt::spawn(answer(HostDecision::Reject));
        let ev = run_round(&d, &s, write("a.txt")).await;
        h.abort();
        assert!(results(&ev)[0].content.contains("not_approved"));
        assert!(!bed.workspace.path().join("a.txt").exists());
        // The exact same call is auto-rejected without asking.
        let ev = run_round(&d, &s, write("a.txt")).await;
        assert!(ev.iter().any(|e| matches!(
            e,
            PipelineEvent::ApprovalDecided {
                decision: toolslot::event::ApprovalDecision::CachedRejection,
                ..
            }
        )));
        assert!(!ev.iter().any(|e| matches!(e, PipelineEvent::ApprovalRequired { .. })));
        // A shell command approved for the session covers its subcommand with other flags…
        let shell = |cmd: &str| openai_chat(&[("exec_shell", json!({"command": cmd}))], "tool_calls");
        let h = actix_rt::spawn(answer(HostDecision::ApproveForSession));
        let ev = run_round(&d, &s, shell("echo hi > /dev/null; true")).await;
        h.abort();
        assert!(!results(&ev)[0].is_error, "{}", results(&ev)[0].content);
        let h = actix_rt::spawn(answer(HostDecision::ApproveForSession));
        let _ = run_round(&d, &s, shell("git tag --list")).await;
        h.abort();
        let ev = run_round(&d, &s, shell("git tag -l 'v*'")).await;
        assert!(
            ev.iter().any(|e| matches!(
                e,
                PipelineEvent::ApprovalDecided {
                    decision: toolslot::event::ApprovalDecision::CachedApproval,
                    ..
                }
            )),
            "{ev:?}"
        );
        // …but not another subcommand.
        let h = actix_rt::spawn(answer(HostDecision::Reject));
        let ev = run_round(&d, &s, shell("git init")).await;
        h.abort();
        assert!(ev.iter().any(|e| matches!(e, PipelineEvent::ApprovalRequired { .. })));
    });
}

#[test]
fn loop_guard_blocks_the_third_repeat_and_pauses_after_eight_failures() {
    system(async {
        let bed = Bed::new("");
        std::fs::write(bed.workspace.path().join("f.txt"), "x").unwrap();
        let d = bed.dispatcher();
        let s = bed.session(&d);
        let read = openai_chat(&[("read_file", json!({"path": "f.txt"}))], "tool_calls");
        assert!(!results(&run_round(&d, &s, read.clone()).await)[0].is_error);
        assert!(!results(&run_round(&d, &s, read.clone()).await)[0].is_error);
        let third = run_round(&d, &s, read).await;
        assert!(results(&third)[0].content.contains("loop_blocked"));
        assert!(notice_kinds(&third).contains(&"loop_blocked".to_string()));
        // After a success, eight failures in a row: a warning at the third, a pause at the
        // eighth; the call after it is not run.
        let mut calls: Vec<(&str, serde_json::Value)> = vec![("counter", json!({"x": "first"}))];
        calls.extend((0..9).map(|i| ("failing", json!({"x": i}))));
        let ev = run_round(&d, &s, openai_chat(&calls, "tool_calls")).await;
        let kinds = notice_kinds(&ev);
        assert!(
            kinds.contains(&"loop_warning".to_string()) && kinds.contains(&"loop_paused".to_string()),
            "{kinds:?}"
        );
        let r = results(&ev);
        assert_eq!(r.len(), 10);
        assert!(r[3].content.contains("your last 3 tool calls all failed"), "{}", r[3].content);
        assert!(r[8].content.contains("it failed"), "the eighth failure ran: {}", r[8].content);
        assert!(r[9].content.contains("paused"), "{}", r[9].content);
        let ran_before = bed.runs.load(Ordering::SeqCst);
        // Paused: nothing runs until the host resumes.
        let ev = run_round(&d, &s, openai_chat(&[("counter", json!({}))], "tool_calls")).await;
        assert!(results(&ev)[0].content.contains("paused"));
        assert_eq!(bed.runs.load(Ordering::SeqCst), ran_before);
        d.resume(&s).await.unwrap();
        let ev = run_round(&d, &s, openai_chat(&[("counter", json!({}))], "tool_calls")).await;
        assert_eq!(results(&ev)[0].content, "ran");
    });
}

#[test]
fn a_read_finishes_before_the_stream_ends() {
    system(async {
        let bed = Bed::new("");
        std::fs::write(bed.workspace.path().join("f.txt"), "content").unwrap();
        let d = bed.dispatcher();
        let s = bed.session(&d);
        // A read-only call early in the response, then text: the call's block ends long
        // before the stream does.
        let first = anthropic_head(&[("read_file", json!({"path": "f.txt"}))]);
        let rest = anthropic_tail("Now I know what the file holds.", "tool_use");
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Result<Vec<u8>, std::io::Error>>();
        let stream = tokio_stream(rx);
        let mut events = d.submit_round(&s, RoundInput::Bytes(stream)).unwrap();
        tx.send(Ok(first.into_bytes())).unwrap();
        // A paced stream: the rest arrives only after the read has finished. Without
        // speculative start this wait would time out.
        let finished_early = tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(e) = events.recv().await {
                if let PipelineEvent::CallFinished {
                    index: 0, is_error: false, ..
                } = e
                {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(finished_early, Ok(true), "the read did not finish before the stream's last byte");
        tx.send(Ok(rest.into_bytes())).unwrap();
        drop(tx);
        let mut complete = None;
        while let Some(e) = events.recv().await {
            if let PipelineEvent::RoundComplete { results, .. } = e {
                complete = Some(results);
            }
        }
        let results = complete.unwrap();
        assert_eq!(results.len(), 1, "the early call is not run twice");
        assert!(results[0].content.contains("content"));
    });
}

fn tokio_stream(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Result<Vec<u8>, std::io::Error>>,
) -> std::pin::Pin<Box<dyn futures::Stream<Item = Result<Vec<u8>, std::io::Error>> + Send>> {
    Box::pin(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)))
}

#[test]
fn a_round_cut_at_the_output_limit_runs_only_complete_calls() {
    system(async {
        let bed = Bed::new("[approval]\nmode = \"full-auto\"\n");
        let d = bed.dispatcher();
        let s = bed.session(&d);
        let body = openai_chat_raw(
            &[
                ("sleepy", r#"{"ms": 0, "tag": "whole"}"#),
                ("write_file", r#"{"path": "half.txt", "content": "abc"#),
            ],
            "length",
        );
        let ev = run_round(&d, &s, body).await;
        let r = results(&ev);
        assert_eq!(r[0].content, "whole");
        assert!(
            r[1].content.contains("truncated_round") && r[1].content.contains("cut off"),
            "{}",
            r[1].content
        );
        assert!(!bed.workspace.path().join("half.txt").exists(), "no half-written file");
        let kinds = notice_kinds(&ev);
        assert!(kinds.contains(&"round_truncated".to_string()) && kinds.contains(&"args_rejected".to_string()));
    });
}

#[test]
fn every_stage_recovers_from_a_panic() {
    for stage in [
        Stage::StreamAssembler,
        Stage::Planner,
        Stage::Approval,
        Stage::BatchExecutor,
        Stage::PostProcessor,
    ] {
        system(async move {
            let bed = Bed::new("[approval]\nmode = \"ask\"\n");
            let d = bed.dispatcher();
            let s = bed.session(&d);
            // Two reads and a write that needs approval (nobody answers: the approval stage
            // is exercised; a failed approval stage refuses the write).
            let h = {
                let d = d.clone();
                let s = s.clone();
                let mut live = d.subscribe(&s).unwrap();
                actix_rt::spawn(async move {
                    while let Ok(e) = live.recv().await {
                        if let PipelineEvent::ApprovalRequired { index, request, .. } = e {
                            let _ = d.answer_request(&s, index, Some(request), HostDecision::Approve).await;
                        }
                    }
                })
            };
            let body = openai_chat(
                &[
                    ("sleepy", json!({"ms": 0, "tag": "a"})),
                    ("write_file", json!({"path": "w.txt", "content": "x"})),
                    ("sleepy", json!({"ms": 0, "tag": "b"})),
                ],
                "tool_calls",
            );
            let ev = if stage == Stage::StreamAssembler {
                // The assembler fails after the first call was complete: that call still gets
                // its result, and the round still completes.
                let text = String::from_utf8(body).unwrap();
                let cut = text.find("\"index\":1").map(|i| text[..i].rfind("data: ").unwrap()).unwrap();
                let cut = text[cut + 1..].find("data: ").map(|j| cut + 1 + j).unwrap();
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Result<Vec<u8>, std::io::Error>>();
                let mut events = d.submit_round(&s, RoundInput::Bytes(tokio_stream(rx))).unwrap();
                tx.send(Ok(text.as_bytes()[..cut].to_vec())).unwrap();
                let mut ev = Vec::new();
                while let Some(e) = events.recv().await {
                    let assembled = matches!(e, PipelineEvent::CallAssembled { index: 0, .. });
                    ev.push(e);
                    if assembled {
                        d.inject_fault(&s, stage).unwrap();
                        let _ = tx.send(Ok(text.as_bytes()[cut..].to_vec()));
                    }
                }
                let r = results(&ev);
                assert_eq!(r.len(), 1, "the call that was complete gets its result");
                assert_eq!(r[0].content, "a");
                ev
            } else {
                d.inject_fault(&s, stage).unwrap();
                let ev = run_round(&d, &s, body).await;
                assert_eq!(results(&ev).len(), 3, "{stage:?}: one result per call");
                ev
            };
            assert!(
                notice_kinds(&ev).contains(&"actor_restarted".to_string()),
                "{stage:?}: {:?}",
                notice_kinds(&ev)
            );
            // The next round works normally.
            let ev = run_round(&d, &s, openai_chat(&[("sleepy", json!({"ms": 0, "tag": "again"}))], "tool_calls")).await;
            assert_eq!(results(&ev)[0].content, "again", "{stage:?}");
            h.abort();
        });
    }
}

/// The blocks of an Anthropic stream after its first ones (no `message_start`), numbered from
/// `first`.
fn anthropic_blocks(first: usize, calls: &[(&str, serde_json::Value)]) -> String {
    let mut out = String::new();
    for (k, (name, args)) in calls.iter().enumerate() {
        let i = first + k;
        let block = |v: serde_json::Value, kind: &str| format!("event: {kind}\ndata: {v}\n\n");
        out.push_str(&block(
            json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": {}}}),
            "content_block_start",
        ));
        out.push_str(&block(
            json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": args.to_string()}}),
            "content_block_delta",
        ));
        out.push_str(&block(json!({"type": "content_block_stop", "index": i}), "content_block_stop"));
    }
    out
}

#[test]
fn a_stage_that_fails_mid_round_answers_what_it_held_and_the_round_completes() {
    // A call started early is running when the stage fails on the rest of the round: every
    // call still gets exactly one result, and the session goes on.
    for stage in [Stage::Planner, Stage::Approval, Stage::BatchExecutor, Stage::PostProcessor] {
        system(async move {
            let bed = Bed::new("[approval]\nmode = \"ask\"\n");
            let d = bed.dispatcher();
            let s = bed.session(&d);
            let h = {
                let d = d.clone();
                let s = s.clone();
                let mut live = d.subscribe(&s).unwrap();
                actix_rt::spawn(async move {
                    while let Ok(e) = live.recv().await {
                        if let PipelineEvent::ApprovalRequired { index, request, .. } = e {
                            let _ = d.answer_request(&s, index, Some(request), HostDecision::Approve).await;
                        }
                    }
                })
            };
            // Long enough, for the post-processor, that the fault is armed before the early
            // call's outcome reaches it however slow the machine is to follow the events.
            let early_ms = if stage == Stage::PostProcessor { 3000 } else { 500 };
            let head = anthropic_head(&[("sleepy", json!({"ms": early_ms, "tag": "early"}))]);
            let rest = anthropic_blocks(
                1,
                &[
                    ("write_file", json!({"path": "w.txt", "content": "x"})),
                    ("sleepy", json!({"ms": 0, "tag": "late"})),
                ],
            ) + &anthropic_tail("done", "tool_use");
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Result<Vec<u8>, std::io::Error>>();
            let mut events = d.submit_round(&s, RoundInput::Bytes(tokio_stream(rx))).unwrap();
            tx.send(Ok(head.into_bytes())).unwrap();
            let mut ev = Vec::new();
            let mut rest = Some((tx, rest));
            while let Some(e) = events.recv().await {
                // The fault is armed once the first call is running; then the rest arrives
                // and the stream ends.
                let started = matches!(e, PipelineEvent::CallStarted { index: 0, .. });
                ev.push(e);
                if started && let Some((tx, rest)) = rest.take() {
                    d.inject_fault(&s, stage).unwrap();
                    tx.send(Ok(rest.into_bytes())).unwrap();
                }
            }
            let r = results(&ev);
            assert_eq!(r.iter().map(|r| r.index).collect::<Vec<_>>(), vec![0, 1, 2], "{stage:?}: {r:?}");
            let completes = ev.iter().filter(|e| matches!(e, PipelineEvent::RoundComplete { .. })).count();
            assert_eq!(completes, 1, "{stage:?}");
            match stage {
                // The rest of the round was one message for these stages: all of it refused.
                Stage::Planner | Stage::Approval => assert!(r[1].is_error && r[2].is_error, "{stage:?}: {r:?}"),
                // The write, approved on its own, was the message the executor failed on; the
                // call after it came after the restart and ran.
                Stage::BatchExecutor => assert!(r[1].content.contains("Not run"), "{r:?}"),
                // The early call's outcome was the first message after the fault: handed back
                // as lost, not dropped.
                _ => assert!(r[0].is_error && r[0].content.contains("lost"), "{r:?}"),
            }
            if stage != Stage::PostProcessor {
                assert_eq!(r[0].content, "early", "{stage:?}: the running call keeps its result");
                assert!(!bed.workspace.path().join("w.txt").exists(), "{stage:?}: a held write never ran");
            }
            assert!(
                notice_kinds(&ev).contains(&"actor_restarted".to_string()),
                "{stage:?}: {:?}",
                notice_kinds(&ev)
            );
            let again = run_round(&d, &s, openai_chat(&[("sleepy", json!({"ms": 0, "tag": "again"}))], "tool_calls")).await;
            assert_eq!(results(&again)[0].content, "again", "{stage:?}");
            h.abort();
        });
    }
}

#[test]
fn cancelling_a_round_stops_running_calls_and_still_completes_it() {
    system(async {
        let bed = Bed::new("");
        let d = bed.dispatcher();
        let s = bed.session(&d);
        let stream = futures::stream::iter([Ok(openai_chat(
            &[
                ("sleepy", json!({"ms": 10_000, "tag": "never"})),
                ("sleepy", json!({"ms": 0, "tag": "quick"})),
            ],
            "tool_calls",
        ))]);
        let mut rx = d.submit_round(&s, RoundInput::Bytes(Box::pin(stream))).unwrap();
        let mut events = Vec::new();
        while let Some(e) = rx.recv().await {
            if matches!(e, PipelineEvent::CallStarted { index: 0, .. }) {
                d.cancel_round(&s).unwrap();
            }
            events.push(e);
        }
        let r = results(&events);
        assert!(
            r[0].content.contains("\"error\":\"cancelled\"") && r[0].content.contains("host cancelled"),
            "{}",
            r[0].content
        );
        assert!(!r[0].content.contains("user interrupt") || r[0].content.contains("not a user interrupt"));
    });
}

#[test]
fn a_cancellation_aimed_at_one_submission_never_reaches_the_next() {
    use toolslot_actors::SubmissionState;
    system(async {
        let bed = Bed::new("");
        let d = bed.dispatcher();
        let s = bed.session(&d);
        let write = || {
            RoundInput::Bytes(Box::pin(futures::stream::iter([Ok(openai_chat(
                &[("write_file", json!({"path": "a.txt", "content": "x"}))],
                "tool_calls",
            ))])))
        };
        let (first, mut rx) = d.submit_numbered(&s, write(), None).unwrap();
        let mut events = Vec::new();
        let mut asked = 0;
        while let Some(e) = rx.recv().await {
            if let PipelineEvent::ApprovalRequired { index, request, .. } = &e {
                asked = *request;
                // An answer naming another question does not reach this one.
                assert!(
                    d.answer_request(&s, *index, Some(request + 1), HostDecision::Approve)
                        .await
                        .is_err()
                );
                assert_eq!(d.submission_state(&s, first).unwrap(), SubmissionState::Running);
                assert!(d.cancel_submission(&s, first).unwrap());
            }
            events.push(e);
        }
        let r = results(&events);
        assert!(r[0].content.contains("\"error\":\"cancelled\""), "{}", r[0].content);
        assert!(r[0].content.contains("waited for approval"), "{}", r[0].content);
        assert!(!bed.workspace.path().join("a.txt").exists());
        assert_eq!(d.submission_state(&s, first).unwrap(), SubmissionState::Over);
        // The same call again: asked again (a cancelled question is nobody's rejection), and a
        // late cancellation of the first submission does not reach this one.
        let (second, mut rx) = d.submit_numbered(&s, write(), None).unwrap();
        assert!(second > first);
        let mut events = Vec::new();
        while let Some(e) = rx.recv().await {
            if let PipelineEvent::ApprovalRequired { index, request, .. } = &e {
                assert!(*request > asked);
                assert!(!d.cancel_submission(&s, first).unwrap());
                // The old question's number reaches nothing; this one's is answered.
                assert!(d.answer_request(&s, *index, Some(asked), HostDecision::Approve).await.is_err());
                d.answer_request(&s, *index, Some(*request), HostDecision::Approve).await.unwrap();
            }
            events.push(e);
        }
        assert!(!results(&events)[0].is_error, "{}", results(&events)[0].content);
        assert!(bed.workspace.path().join("a.txt").exists());
        // After its end, an answer to any question is refused.
        assert!(d.answer_request(&s, 0, None, HostDecision::Approve).await.is_err());
    });
}

#[test]
fn an_answer_after_its_question_expired_is_refused_and_runs_nothing() {
    system(async {
        let bed = Bed::new("[approval]\ntimeout_ms = 100\n");
        let d = bed.dispatcher();
        let s = bed.session(&d);
        let write = || openai_chat(&[("write_file", json!({"path": "late.txt", "content": "x"}))], "tool_calls");
        for _ in 0..2 {
            let stream = futures::stream::iter([Ok(write())]);
            let mut rx = d.submit_round(&s, RoundInput::Bytes(Box::pin(stream))).unwrap();
            let mut events = Vec::new();
            let mut asked = None;
            while let Some(e) = rx.recv().await {
                if let PipelineEvent::ApprovalRequired { index, request, .. } = &e {
                    asked = Some((*index, *request));
                }
                events.push(e);
            }
            // Asked each time: an expired question is nobody's rejection.
            let (index, request) = asked.expect("asked");
            assert!(results(&events)[0].is_error);
            for named in [None, Some(request)] {
                assert!(d.answer_request(&s, index, named, HostDecision::Approve).await.is_err());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert!(!bed.workspace.path().join("late.txt").exists());
        }
    });
}

#[test]
fn an_answer_that_does_not_name_its_question_is_refused_once_the_index_was_asked_before() {
    // A host that answers late, without `request`, must not approve the next question about
    // the same index: the first question expires unanswered, the second waits, and a bare
    // answer is refused with a reason; only the answer naming the second question runs it.
    system(async {
        let bed = Bed::new("[approval]\ntimeout_ms = 60000\n");
        let d = bed.dispatcher();
        let s = bed.session(&d);
        let write = |path: &str| openai_chat(&[("write_file", json!({"path": path, "content": "x"}))], "tool_calls");
        // The first question: answered without naming it (one question so far: unambiguous).
        let mut rx = d
            .submit_round(&s, RoundInput::Bytes(Box::pin(futures::stream::iter([Ok(write("one.txt"))]))))
            .unwrap();
        while let Some(e) = rx.recv().await {
            if let PipelineEvent::ApprovalRequired { index, .. } = &e {
                d.answer_approval(&s, *index, HostDecision::Reject).await.unwrap();
            }
        }
        assert!(!bed.workspace.path().join("one.txt").exists());
        let mut rx = d
            .submit_round(&s, RoundInput::Bytes(Box::pin(futures::stream::iter([Ok(write("two.txt"))]))))
            .unwrap();
        let mut events = Vec::new();
        while let Some(e) = rx.recv().await {
            if let PipelineEvent::ApprovalRequired { index, request, .. } = &e {
                let bare = d.answer_approval(&s, *index, HostDecision::Approve).await;
                match bare {
                    Err(toolslot_actors::DispatchError::NeedsRequest { reason, .. }) => {
                        assert!(reason.contains("name the one you answer"), "{reason}");
                    }
                    other => panic!("a bare answer to a second question about call {index}: {other:?}"),
                }
                assert!(d.pending_approval(&s).await.unwrap().is_some(), "the question still waits");
                d.answer_request(&s, *index, Some(*request), HostDecision::Approve).await.unwrap();
            }
            events.push(e);
        }
        assert!(!results(&events)[0].is_error, "{}", results(&events)[0].content);
        assert!(bed.workspace.path().join("two.txt").exists());
    });
}

#[test]
fn a_second_round_while_one_runs_is_refused() {
    system(async {
        let bed = Bed::new("");
        let d = bed.dispatcher();
        let s = bed.session(&d);
        let slow = futures::stream::iter([Ok(openai_chat(&[("sleepy", json!({"ms": 300, "tag": "x"}))], "tool_calls"))]);
        let mut rx = d.submit_round(&s, RoundInput::Bytes(Box::pin(slow))).unwrap();
        let again = futures::stream::iter([Ok(Vec::new())]);
        assert!(matches!(
            d.submit_round(&s, RoundInput::Bytes(Box::pin(again))),
            Err(toolslot_actors::DispatchError::RoundRunning(_))
        ));
        while rx.recv().await.is_some() {}
    });
}

#[test]
fn every_recorded_fixture_completes_with_one_result_per_call() {
    system(async {
        let bed = Bed::new("[approval]\nmode = \"read-only\"\n");
        let d = bed.dispatcher();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/recorded");
        let mut seen = 0;
        for dir in ["anthropic", "gemini", "openai-chat", "openai-compatible", "openai-responses"] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap() {
                let path = entry.unwrap().path();
                let raw = std::fs::read(&path).unwrap();
                let body = if path.extension().is_some_and(|e| e == "jsonl") {
                    toolslot::stream::sse::frame_data_lines(&raw)
                } else {
                    raw
                };
                let s = bed.session(&d);
                let events = run_round(&d, &s, body).await;
                let assembled = events.iter().filter(|e| matches!(e, PipelineEvent::CallAssembled { .. })).count();
                let rounds: Vec<usize> = events
                    .iter()
                    .filter_map(|e| match e {
                        PipelineEvent::RoundComplete { results, .. } => Some(results.len()),
                        _ => None,
                    })
                    .collect();
                assert!(!rounds.is_empty(), "{}", path.display());
                assert_eq!(
                    rounds.iter().sum::<usize>(),
                    assembled,
                    "{}: one result per assembled call",
                    path.display()
                );
                assert!(matches!(events.last(), Some(PipelineEvent::RoundComplete { .. })));
                if path.ends_with("three-messages-tool-use-and-server-tool.jsonl") {
                    assert_eq!(
                        rounds,
                        vec![1, 1, 0],
                        "three messages replay as three rounds; server tools get no result"
                    );
                }
                seen += 1;
            }
        }
        assert_eq!(seen, 34);
    });
}
