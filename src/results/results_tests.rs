use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::event::{RepairMark, StopReason};

fn result(index: usize, id: &str, name: &str, is_error: bool, content: &str) -> ToolResult {
    ToolResult {
        index,
        tool_use_id: id.into(),
        name: name.into(),
        is_error,
        content: content.into(),
        blocks: None,
        structured: None,
    }
}

/// A round of three calls: one ran, one was refused, one carries an image.
fn round() -> Vec<ToolResult> {
    let mut with_image = result(
        2,
        "c",
        "shot",
        false,
        "[image: image/png, 8 B: passed to the host as content block 1]",
    );
    with_image.blocks = Some(vec![
        json!({"type": "text", "text": with_image.content}),
        json!({"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}),
        json!({"type": "audio", "mimeType": "audio/wav", "data": "UklGRg=="}),
    ]);
    vec![
        result(0, "a", "read_file", false, "hello"),
        result(1, "b", "exec_shell", true, "Not approved: the user rejected it."),
        with_image,
    ]
}

#[track_caller]
fn check(format: ResultFormat, expected: Value) {
    assert_eq!(Value::Array(to_messages(format, &round(), &SentNames::default())), expected);
}

#[test]
fn anthropic_answers_every_call_in_one_user_message() {
    check(
        ResultFormat::Anthropic,
        json!([{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "hello", "is_error": false},
            {"type": "tool_result", "tool_use_id": "b", "content": "Not approved: the user rejected it.", "is_error": true},
            {"type": "tool_result", "tool_use_id": "c", "is_error": false, "content": [
                {"type": "text", "text": "[image: image/png, 8 B: passed to the host as content block 1]"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            ]},
        ]}]),
    );
}

#[test]
fn openai_chat_gives_one_tool_message_per_call() {
    check(
        ResultFormat::OpenaiChat,
        json!([
            {"role": "tool", "tool_call_id": "a", "content": "hello"},
            {"role": "tool", "tool_call_id": "b", "content": "Not approved: the user rejected it."},
            {"role": "tool", "tool_call_id": "c", "content": "[image: image/png, 8 B: passed to the host as content block 1]"},
        ]),
    );
}

#[test]
fn openai_responses_gives_one_output_item_per_call() {
    check(
        ResultFormat::OpenaiResponses,
        json!([
            {"type": "function_call_output", "call_id": "a", "output": "hello"},
            {"type": "function_call_output", "call_id": "b", "output": "Not approved: the user rejected it."},
            {"type": "function_call_output", "call_id": "c", "output": [
                {"type": "input_text", "text": "[image: image/png, 8 B: passed to the host as content block 1]"},
                {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
            ]},
        ]),
    );
}

#[test]
fn gemini_answers_every_call_in_one_turn_with_errors_under_error() {
    check(
        ResultFormat::Gemini,
        json!([{"role": "user", "parts": [
            {"functionResponse": {"name": "read_file", "id": "a", "response": {"output": "hello"}}},
            {"functionResponse": {"name": "exec_shell", "id": "b", "response": {"error": "Not approved: the user rejected it."}}},
            {"functionResponse": {"name": "shot", "id": "c",
                "response": {"output": "[image: image/png, 8 B: passed to the host as content block 1]"},
                "parts": [{"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}]}},
        ]}]),
    );
}

#[test]
fn gemini_sends_no_invented_id_and_the_name_the_model_wrote() {
    let mut names = SentNames::default();
    names.observe(&assembled(0, "call_0", "ReadFile"));
    let results = vec![result(0, "call_0", "read_file", false, "x")];
    assert_eq!(
        to_messages(ResultFormat::Gemini, &results, &names),
        vec![json!({"role": "user", "parts": [{"functionResponse": {"name": "ReadFile", "response": {"output": "x"}}}]})]
    );
}

#[test]
fn a_round_without_calls_needs_no_message() {
    for format in ResultFormat::ALL {
        assert_eq!(to_messages(format, &[], &SentNames::default()), Vec::<Value>::new(), "{format}");
    }
}

#[test]
fn format_names_read_back_and_unknown_ones_are_refused() {
    for format in ResultFormat::ALL {
        assert_eq!(format.as_str().parse::<ResultFormat>(), Ok(format));
    }
    assert_eq!(
        "openai".parse::<ResultFormat>().map_err(|e| e.to_string()),
        Err("unknown result format `openai` (expected anthropic, openai-chat, openai-responses or gemini)".to_string())
    );
}

fn assembled(index: usize, id: &str, name: &str) -> PipelineEvent {
    PipelineEvent::CallAssembled {
        index,
        id: Arc::from(id),
        name: Arc::from(name),
        input: Arc::new(json!({})),
        repair: RepairMark::None,
        thought_signature: None,
    }
}

#[test]
fn names_go_to_the_round_that_answers_them_in_arrival_order() {
    // Two messages in one body: both have a call 0 with id call_0; the first round takes the
    // first name, the second the second.
    let mut names = SentNames::default();
    names.observe(&assembled(0, "call_0", "First"));
    names.observe(&assembled(0, "call_0", "Second"));
    let complete = |name: &str| PipelineEvent::RoundComplete {
        stop_reason: StopReason::ToolUse,
        text: String::new(),
        results: vec![result(0, "call_0", name, false, "ok")],
    };
    let first = event_with_messages(&complete("first"), ResultFormat::Gemini, &mut names).unwrap();
    let second = event_with_messages(&complete("second"), ResultFormat::Gemini, &mut names).unwrap();
    assert_eq!(first["messages"][0]["parts"][0]["functionResponse"]["name"], "First");
    assert_eq!(second["messages"][0]["parts"][0]["functionResponse"]["name"], "Second");
    assert_eq!(second["type"], "round_complete");
    assert!(names.waiting.is_empty(), "{names:?}");
}
