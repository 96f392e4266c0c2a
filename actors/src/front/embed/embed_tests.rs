use serde_json::json;
use toolslot::tool::Capability;

use super::*;

/// An OpenAI Chat response calling `calls` (name, arguments).
fn chat(calls: &[(&str, serde_json::Value)]) -> Vec<u8> {
    let mut out = String::new();
    for (n, (name, args)) in calls.iter().enumerate() {
        let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": n, "id": format!("call_{n}"), "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}, "finish_reason": null}]});
        out.push_str(&format!("data: {chunk}\n\n"));
    }
    out.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n");
    out.into_bytes()
}

fn quiet() -> Config {
    let mut config = Config::builtin();
    config.audit.ledger_dir = String::new();
    config
}

fn echo() -> HostToolDef {
    HostToolDef {
        name: "echo".into(),
        description: "Says the text back.".into(),
        input_schema: json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        capabilities: vec![Capability::ReadOnly],
    }
}

#[test]
fn a_host_tool_runs_in_the_host_and_every_call_gets_one_result() {
    let ws = tempfile::tempdir().unwrap();
    let slot = Embedded::start(quiet(), vec![echo()]).unwrap();
    let session = slot
        .open_session(OpenOptions {
            workspace: Some(ws.path().to_path_buf()),
            ..OpenOptions::default()
        })
        .unwrap();
    let round = slot.submit(&session, None).unwrap();
    // Validation refuses the second call before the host hears of it.
    round.push(chat(&[("echo", json!({"text": "hi"})), ("echo", json!({"text": 3}))]));
    round.finish();
    let (mut asked, mut results) = (Vec::new(), None);
    while let Some(item) = round.next() {
        match item {
            Item::Call(call) => {
                asked.push(call.input.clone());
                let text = call.input["text"].as_str().unwrap_or_default().to_uppercase();
                call.finish(Ok(text));
            }
            Item::Event(PipelineEvent::RoundComplete { results: r, .. }) => results = Some(r),
            Item::Event(_) => {}
        }
    }
    assert_eq!(asked, vec![json!({"text": "hi"})]);
    let results = results.expect("round_complete");
    assert_eq!(
        results.iter().map(|r| (r.tool_use_id.as_str(), r.is_error)).collect::<Vec<_>>(),
        vec![("call_0", false), ("call_1", true)]
    );
    assert_eq!(results[0].content, "HI");
    // The round's pipe was written to: an event loop watching it would have woken.
    let mut byte = 0u8;
    // SAFETY: the pipe is open while the round is held; one byte into a valid buffer.
    let read = unsafe { libc::read(round.wake_pipe().read_fd(), (&mut byte as *mut u8).cast(), 1) };
    assert_eq!(read, 1);
    slot.close();
    assert!(matches!(slot.open_session(OpenOptions::default()), Err(EmbedError::Stopped(_))));
}

#[test]
fn a_host_tool_under_a_taken_name_is_refused_by_name() {
    let slot = Embedded::start(quiet(), Vec::new()).unwrap();
    let mut taken = echo();
    taken.name = "read_file".into();
    assert_eq!(
        slot.add_tools(vec![taken]),
        Err(EmbedError::Config("tool `read_file`: the name is taken".into()))
    );
    slot.close();
}
