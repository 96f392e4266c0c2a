//! The truncation gate and the argument ladder, applied to one assembled call.
//!
//! A round cut by the output limit closes the ladder: a call whose arguments do not parse
//! strictly is not run, and the model is told to resend it. Anywhere else the ladder runs;
//! when it fails the call goes on with `{}` so the tool's validation names what is missing,
//! and the raw text is never kept as the call's input.

pub use crate::event::RepairMark;
use crate::event::RepairStep;
use serde_json::{Map, Value};

use crate::config::RepairConfig;
use crate::notice::{Notice, NoticeKind};
use crate::repair::args::{RepairError, decode_stringified, repair_arguments};
use crate::stream::RawCall;
use crate::tool::{ErrorCategory, ToolError};

/// A call's arguments after the gate and the ladder.
#[derive(Debug, Clone, PartialEq)]
pub struct Finalized {
    /// The arguments (`{}` when rejected).
    pub input: Value,
    /// What repair did.
    pub repair: RepairMark,
    /// Set when the call must not run (cut by the output limit).
    pub refusal: Option<ToolError>,
    /// `args_repaired`, `args_rejected`.
    pub notices: Vec<Notice>,
}

/// Whether arguments parse strictly to an object as sent (`""` counts as `{}`); the test for
/// speculative start, which never runs repaired arguments early.
pub fn parses_strictly(arguments: &str) -> bool {
    let t = arguments.trim();
    // Checked without building the value: this runs on every call of a streaming round.
    t.is_empty() || (t.starts_with('{') && serde_json::from_str::<serde::de::IgnoredAny>(t).is_ok())
}

/// Applies the truncation gate and the ladder to `call`. `cut` is true when the round ended
/// at the output limit; a call whose block never ended counts as cut too, since its end was
/// never seen. `schema` (the tool's own) lets stringified structures be decoded.
pub fn finalize_call(call: &RawCall, cut: bool, schema: Option<&Value>, cfg: &RepairConfig) -> Finalized {
    let index = call.index;
    if cut || !call.complete {
        if parses_strictly(&call.arguments) {
            let mut input = strict(&call.arguments);
            if let Some(schema) = schema {
                decode_stringified(&mut input, schema, cfg.string_decode_depth);
            }
            return Finalized {
                input,
                repair: RepairMark::None,
                refusal: None,
                notices: Vec::new(),
            };
        }
        let message = format!(
            "Your output was cut off at the output limit while you were writing the arguments of \
             `{}`, so the call was not run. Send the call again, complete (shorten long content or \
             split it into several calls).",
            call.name
        );
        return Finalized {
            input: Value::Object(Map::new()),
            repair: RepairMark::Rejected,
            refusal: Some(ToolError::refused(ErrorCategory::TruncatedRound, message)),
            notices: vec![Notice::for_call(
                NoticeKind::ArgsRejected,
                index,
                format!("arguments of `{}` were cut at the output limit; not repaired, not run", call.name),
            )],
        };
    }
    match repair_arguments(&call.arguments, cfg.max_input_bytes) {
        Ok(repaired) => {
            let mut input = repaired.value;
            let mut steps = repaired.steps;
            let mut repair = repaired.step.map_or(RepairMark::None, RepairMark::Step);
            if let Some(schema) = schema
                && decode_stringified(&mut input, schema, cfg.string_decode_depth) > 0
            {
                steps.add(RepairStep::DecodedString);
                if repair == RepairMark::None {
                    repair = RepairMark::Step(RepairStep::DecodedString);
                }
            }
            // `repair` holds one step (the last applied); the notice names every one.
            let notices = if steps.is_empty() {
                Vec::new()
            } else {
                let names: Vec<&str> = steps.iter().map(RepairStep::as_str).collect();
                vec![Notice::for_call(
                    NoticeKind::ArgsRepaired,
                    index,
                    format!("arguments of `{}` repaired ({})", call.name, names.join(", ")),
                )]
            };
            Finalized {
                input,
                repair,
                refusal: None,
                notices,
            }
        }
        Err(RepairError::TooLarge { len, limit }) => {
            // Run with `{}`, the call would fail on a missing field the model did send, and the
            // model would send the same call again: say what is wrong, and by how much.
            let message = format!(
                "The arguments of `{}` are {len} bytes, {} bytes over the {limit}-byte limit on argument \
                 text (repair.max_input_bytes), so the call was not run. Send less in one call: split \
                 long content over several calls (write the first part, then add to it).",
                call.name,
                len - limit
            );
            Finalized {
                input: Value::Object(Map::new()),
                repair: RepairMark::Rejected,
                refusal: Some(ToolError::refused(ErrorCategory::InvalidInput, message)),
                notices: vec![Notice::for_call(
                    NoticeKind::ArgsRejected,
                    index,
                    format!("arguments of `{}` are {len} bytes, over the {limit}-byte limit; not run", call.name),
                )],
            }
        }
        Err(err) => {
            let reason: String = err.to_string();
            Finalized {
                input: Value::Object(Map::new()),
                repair: RepairMark::Rejected,
                refusal: None,
                notices: vec![Notice::for_call(
                    NoticeKind::ArgsRejected,
                    index,
                    format!("arguments of `{}` rejected: {reason}; the call goes on with {{}}", call.name),
                )],
            }
        }
    }
}

fn strict(arguments: &str) -> Value {
    let t = arguments.trim();
    if t.is_empty() {
        return Value::Object(Map::new());
    }
    serde_json::from_str(t).unwrap_or_else(|_| Value::Object(Map::new()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(args: &str, complete: bool) -> RawCall {
        RawCall {
            index: 0,
            id: "c".into(),
            name: "write_file".into(),
            arguments: args.into(),
            thought_signature: None,
            complete,
            text_before: String::new(),
        }
    }

    fn cfg() -> RepairConfig {
        crate::config::Config::builtin().repair
    }

    #[test]
    fn valid_arguments_pass_unchanged() {
        let f = finalize_call(&call(r#"{"path": "a"}"#, true), false, None, &cfg());
        assert_eq!(
            (f.input, f.repair, f.refusal.is_none(), f.notices.len()),
            (json!({"path": "a"}), RepairMark::None, true, 0)
        );
        assert_eq!(finalize_call(&call("", true), false, None, &cfg()).input, json!({}));
    }

    #[test]
    fn broken_arguments_are_repaired_and_reported() {
        let f = finalize_call(&call(r#"{"path": "a",}"#, true), false, None, &cfg());
        assert_eq!(f.input, json!({"path": "a"}));
        assert_eq!(f.repair, RepairMark::Step(RepairStep::TrailingCommas));
        assert_eq!(f.notices[0].kind, NoticeKind::ArgsRepaired);
        assert_eq!(serde_json::to_value(f.repair).unwrap(), json!("trailing_commas"));
    }

    #[test]
    fn unrepairable_arguments_go_on_as_an_empty_object() {
        let f = finalize_call(&call("path=a.txt", true), false, None, &cfg());
        assert_eq!(f.input, json!({}));
        assert_eq!(f.repair, RepairMark::Rejected);
        assert!(f.refusal.is_none(), "validation, not the gate, explains what is missing");
        assert_eq!(f.notices[0].kind, NoticeKind::ArgsRejected);
        assert!(!f.notices[0].message.contains("path=a.txt"), "the raw text is not kept");
    }

    #[test]
    fn truncated_round_rejects_unparsable_call() {
        // Built from gpt4o-long-args-54-fragments: the stream cut after a few fragments.
        let cut = r#"{"response":[{"name":"Frankfurt","lat"#;
        let f = finalize_call(&call(cut, true), true, None, &cfg());
        assert_eq!(f.repair, RepairMark::Rejected);
        assert_eq!(f.input, json!({}));
        let refusal = f.refusal.unwrap();
        assert_eq!(refusal.category, ErrorCategory::TruncatedRound);
        assert!(
            refusal.message.contains("cut off") && refusal.message.contains("again"),
            "{}",
            refusal.message
        );
        assert!(!refusal.started);
    }

    #[test]
    fn every_applied_step_is_named_and_repair_holds_the_last() {
        let f = finalize_call(&call("{path: 'a.txt', recursive: True,}", true), false, None, &cfg());
        assert_eq!(f.input, json!({"path": "a.txt", "recursive": true}));
        assert_eq!(f.repair, RepairMark::Step(RepairStep::TrailingCommas));
        assert_eq!(
            f.notices[0].message,
            "arguments of `write_file` repaired (single_quotes, python_literals, unquoted_keys, trailing_commas)"
        );
    }

    #[test]
    fn truncated_round_repairs_none_of_the_tolerant_readings() {
        // Each would read as a valid object in a round that ended normally.
        for cut in ["{'path': 'a.txt'}", "{path: \"a.txt\"}", r#"{"n": 2."#, "```json\n{\"a\": 1}\n```"] {
            let f = finalize_call(&call(cut, true), true, None, &cfg());
            assert_eq!((f.input, f.repair), (json!({}), RepairMark::Rejected), "{cut:?}");
            assert_eq!(f.refusal.map(|r| r.category), Some(ErrorCategory::TruncatedRound), "{cut:?}");
            assert!(finalize_call(&call(cut, true), false, None, &cfg()).refusal.is_none());
        }
    }

    #[test]
    fn truncated_round_lets_complete_calls_through() {
        let f = finalize_call(&call(r#"{"path": "a"}"#, true), true, None, &cfg());
        assert_eq!((f.input, f.refusal), (json!({"path": "a"}), None));
    }

    #[test]
    fn unended_block_counts_as_cut() {
        let f = finalize_call(&call(r#"{"path": "a", "content": "half a fi"#, false), false, None, &cfg());
        assert_eq!(f.refusal.map(|r| r.category), Some(ErrorCategory::TruncatedRound));
    }

    #[test]
    fn stringified_structures_are_decoded_with_the_schema() {
        let schema = json!({"type": "object", "properties": {"edits": {"type": "array"}}});
        let f = finalize_call(&call(r#"{"edits": "[1, 2]"}"#, true), false, Some(&schema), &cfg());
        assert_eq!(f.input, json!({"edits": [1, 2]}));
        assert_eq!(f.repair, RepairMark::Step(RepairStep::DecodedString));
        // After another step, `repair` keeps that step and the notice names both.
        let f = finalize_call(&call(r#"{"edits": "[1, 2]",}"#, true), false, Some(&schema), &cfg());
        assert_eq!(f.input, json!({"edits": [1, 2]}));
        assert_eq!(f.repair, RepairMark::Step(RepairStep::TrailingCommas));
        assert_eq!(
            f.notices[0].message,
            "arguments of `write_file` repaired (trailing_commas, decoded_string)"
        );
    }
}
