use super::*;

/// The recorded fixtures, shared with the project (see their PROVENANCE.md).
pub(crate) fn fixtures_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/recorded")
}

/// A fixture's bytes as an SSE body: `.jsonl` files hold only data payloads, so the framing
/// is added here, as PROVENANCE.md says a test must.
pub(crate) fn fixture_bytes(rel: &str) -> Vec<u8> {
    let path = fixtures_dir().join(rel);
    let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if rel.ends_with(".jsonl") {
        crate::stream::sse::frame_data_lines(&raw)
    } else {
        raw
    }
}

/// What a round came to: (text, stop, calls as (index, id, name, arguments, complete)).
type Summary = Vec<(String, StopReason, Vec<(usize, String, String, String, bool)>)>;

fn assemble(chunks: &[&[u8]]) -> (Summary, Vec<Notice>) {
    let mut a = Assembler::new(None);
    let mut out = Vec::new();
    for c in chunks {
        a.feed(c, &mut out);
    }
    a.finish(&mut out);
    let mut rounds = Vec::new();
    let mut calls = Vec::new();
    let mut notices = Vec::new();
    for ev in out {
        match ev {
            AssemblyEvent::CallReady(c) => calls.push((c.index, c.id, c.name, c.arguments, c.complete)),
            AssemblyEvent::Notice(n) => notices.push(n),
            AssemblyEvent::RoundEnd(r) => {
                calls.extend(r.unfinished.into_iter().map(|c| (c.index, c.id, c.name, c.arguments, c.complete)));
                calls.sort();
                rounds.push((r.text, r.stop_reason, std::mem::take(&mut calls)));
            }
        }
    }
    (rounds, notices)
}

pub(crate) fn all_fixtures() -> Vec<String> {
    let mut out = Vec::new();
    for dir in ["anthropic", "gemini", "openai-chat", "openai-compatible", "openai-responses"] {
        let mut names: Vec<String> = std::fs::read_dir(fixtures_dir().join(dir))
            .unwrap()
            .map(|e| format!("{dir}/{}", e.unwrap().file_name().to_string_lossy()))
            .collect();
        names.sort();
        out.extend(names);
    }
    out
}

#[test]
fn every_fixture_gives_the_same_calls_however_it_is_chunked() {
    let fixtures = all_fixtures();
    assert_eq!(fixtures.len(), 34, "PROVENANCE.md lists 34 recordings");
    let mut seed = 0x9e3779b97f4a7c15u64;
    for name in fixtures {
        let bytes = fixture_bytes(&name);
        let whole = assemble(&[&bytes]);
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(assemble(&singles), whole, "{name}: single bytes");
        for _ in 0..5 {
            let mut chunks = Vec::new();
            let mut rest: &[u8] = &bytes;
            while !rest.is_empty() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let n = ((seed % 97) as usize + 1).min(rest.len());
                chunks.push(&rest[..n]);
                rest = &rest[n..];
            }
            assert_eq!(assemble(&chunks), whole, "{name}: random chunks");
        }
        // Every complete call's arguments are valid JSON (after `""` → `{}`).
        for (_, _, calls) in &whole.0 {
            for (_, id, tool, args, complete) in calls {
                assert!(*complete, "{name}: {tool} never ended");
                assert!(!id.is_empty());
                if !args.is_empty() {
                    serde_json::from_str::<serde_json::Value>(args).unwrap_or_else(|e| panic!("{name}: {tool}: {e}: {args}"));
                }
            }
        }
    }
}

/// (label, stop reason, calls as (name, arguments)).
type ExpectedRound<'a> = (&'a str, StopReason, &'a [(&'a str, serde_json::Value)]);

#[track_caller]
fn expect_calls(name: &str, expected: &[ExpectedRound]) {
    let (rounds, _) = assemble(&[&fixture_bytes(name)]);
    let got: Vec<(StopReason, Vec<(String, serde_json::Value)>)> = rounds
        .into_iter()
        .map(|(_, stop, calls)| {
            let calls = calls
                .into_iter()
                .map(|(_, _, n, a, _)| {
                    (
                        n,
                        if a.is_empty() {
                            serde_json::json!({})
                        } else {
                            serde_json::from_str(&a).unwrap()
                        },
                    )
                })
                .collect();
            (stop, calls)
        })
        .collect();
    let want: Vec<(StopReason, Vec<(String, serde_json::Value)>)> = expected
        .iter()
        .map(|(_, stop, calls)| (*stop, calls.iter().map(|(n, v)| (n.to_string(), v.clone())).collect()))
        .collect();
    assert_eq!(got, want, "{name}");
}

#[test]
fn fixtures_yield_the_recorded_calls() {
    use StopReason::*;
    use serde_json::json;
    expect_calls(
        "openai-chat/gpt4o-single-call-split-string.sse",
        &[("", ToolUse, &[("get_weather", json!({"city": "Mexico City"}))])],
    );
    expect_calls(
        "openai-chat/gpt4o-parallel-two-noarg-calls.sse",
        &[("", ToolUse, &[("get_country", json!({})), ("get_product_name", json!({}))])],
    );
    expect_calls("openai-chat/gpt5nano-finish-length-reasoning-only.sse", &[("", MaxTokens, &[])]);
    expect_calls(
        "anthropic/sonnet-tool-use-no-args.jsonl",
        &[("", ToolUse, &[("updateIssueList", json!({}))])],
    );
    expect_calls(
        "gemini/gemini2-flash-single-chunk-call.sse",
        &[("", ToolUse, &[("get_capital", json!({"country": "France"}))])],
    );
    expect_calls(
        "gemini/vertex-partial-args-two-parallel-calls.jsonl",
        &[(
            "",
            ToolUse,
            &[
                ("getWeather", json!({"location": "Boston"})),
                ("getWeather", json!({"location": "San Francisco"})),
            ],
        )],
    );
    expect_calls(
        "openai-responses/gpt-function-call-get-capital.sse",
        &[("", ToolUse, &[("get_capital", json!({"country": "France"}))])],
    );
}

/// An OpenAI Chat chunk holding one tool-call fragment.
fn chat_fragment(slot: usize, head: Option<(&str, &str)>, args: &str) -> String {
    let mut call = serde_json::json!({"index": slot, "function": {"arguments": args}});
    if let Some((id, name)) = head {
        call["id"] = id.into();
        call["function"]["name"] = name.into();
    }
    let chunk = serde_json::json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]});
    format!("data: {chunk}\n\n")
}

const CHAT_END: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";

#[test]
fn interleaved_openai_chat_calls_are_not_split() {
    // Some compatible servers interleave the fragments of parallel calls.
    let body = [
        chat_fragment(0, Some(("a", "read_file")), "{\"pa"),
        chat_fragment(1, Some(("b", "list_dir")), "{\"depth"),
        chat_fragment(0, None, "th\": \"notes.txt\"}"),
        chat_fragment(1, None, "\": 1}"),
        CHAT_END.to_string(),
    ]
    .concat();
    let (rounds, notices) = assemble(&[body.as_bytes()]);
    assert!(notices.is_empty(), "{notices:?}");
    let calls = &rounds[0].2;
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0].3, "{\"path\": \"notes.txt\"}");
    assert_eq!(calls[1].3, "{\"depth\": 1}");
}

#[test]
fn sequential_openai_chat_calls_end_when_the_next_starts() {
    let mut a = Assembler::new(None);
    let mut out = Vec::new();
    a.feed(chat_fragment(0, Some(("a", "read_file")), "{\"path\": \"x\"}").as_bytes(), &mut out);
    a.feed(chat_fragment(1, Some(("b", "list_dir")), "{").as_bytes(), &mut out);
    // The first call is ready before the stream ends: it may start early.
    assert!(
        out.iter().any(|e| matches!(e, AssemblyEvent::CallReady(c) if c.index == 0)),
        "{out:?}"
    );
    // Text for a call that already ended is refused with a notice, not started as a new call.
    a.feed(chat_fragment(0, None, "garbage").as_bytes(), &mut out);
    a.feed(format!("{}{CHAT_END}", chat_fragment(1, None, "}")).as_bytes(), &mut out);
    a.finish(&mut out);
    let ready: Vec<_> = out
        .iter()
        .filter_map(|e| match e {
            AssemblyEvent::CallReady(c) => Some((c.index, c.arguments.clone())),
            AssemblyEvent::RoundEnd(r) => r.unfinished.first().map(|c| (c.index, c.arguments.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(ready, vec![(0, "{\"path\": \"x\"}".to_string()), (1, "{}".to_string())]);
    assert!(
        out.iter()
            .any(|e| matches!(e, AssemblyEvent::Notice(n) if n.message.contains("after its arguments were complete"))),
        "{out:?}"
    );
}
