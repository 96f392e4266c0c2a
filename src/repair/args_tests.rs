use serde_json::{Value, json};

use super::*;

const LIMIT: usize = 1 << 20;

/// What a case must come out as: the exact value and step, or a refusal.
enum Want {
    Fixed(Value, Option<RepairStep>),
    Refused,
}

#[track_caller]
fn check(raw: &str, want: Want) {
    let got = repair_arguments(raw, LIMIT);
    match (got, want) {
        (Ok(r), Want::Fixed(v, step)) => {
            assert_eq!(r.value, v, "value of {raw:?}");
            assert_eq!(r.step, step, "step of {raw:?}");
        }
        (Err(_), Want::Refused) => {}
        (got, Want::Fixed(v, _)) => panic!("{raw:?}: expected {v}, got {got:?}"),
        (Ok(r), Want::Refused) => panic!("{raw:?}: expected a refusal, got {} (a valid-but-wrong guess)", r.value),
    }
}

use RepairStep::*;
use Want::*;

/// Realistic broken arguments, each with the exact value a careful engineer would expect.
/// A refusal is expected wherever any completion would be a guess.
fn table() -> Vec<(&'static str, Want)> {
    vec![
        // Valid input passes unchanged.
        (r#"{"path": "src/main.rs"}"#, Fixed(json!({"path": "src/main.rs"}), None)),
        ("", Fixed(json!({}), None)),
        ("   ", Fixed(json!({}), None)),
        ("{}", Fixed(json!({}), None)),
        (
            r#"{"a": [1, {"b": null}], "c": "x,]}"}"#,
            Fixed(json!({"a": [1, {"b": null}], "c": "x,]}"}), None),
        ),
        // Control characters inside strings: multi-line code keeps its lines.
        (
            "{\"code\": \"fn main() {\n\tprintln!();\n}\"}",
            Fixed(json!({"code": "fn main() {\n\tprintln!();\n}"}), Some(ControlChars)),
        ),
        ("{\"text\": \"a\r\nb\"}", Fixed(json!({"text": "a\r\nb"}), Some(ControlChars))),
        (
            "{\"text\": \"bell\u{7}here\"}",
            Fixed(json!({"text": "bellhere"}), Some(ControlChars)),
        ),
        // Trailing commas.
        (r#"{"a": 1,}"#, Fixed(json!({"a": 1}), Some(TrailingCommas))),
        (r#"{"a": [1, 2, ], }"#, Fixed(json!({"a": [1, 2]}), Some(TrailingCommas))),
        (
            r#"{"old": "f(a,]", "new": "g(b,}",}"#,
            Fixed(json!({"old": "f(a,]", "new": "g(b,}"}), Some(TrailingCommas)),
        ),
        // Close what is open.
        (r#"{"path": "a.txt""#, Fixed(json!({"path": "a.txt"}), Some(CloseBrackets))),
        (r#"{"path": "a.txt"#, Fixed(json!({"path": "a.txt"}), Some(CloseBrackets))),
        (r#"{"old": "f(a,]"#, Fixed(json!({"old": "f(a,]"}), Some(CloseBrackets))),
        (
            r#"{"a": {"b": [{"c": 1"#,
            Fixed(json!({"a": {"b": [{"c": 1}]}}), Some(CloseBrackets)),
        ),
        (
            r#"{"edits": [{"search": "x", "replace": "y"}"#,
            Fixed(json!({"edits": [{"search": "x", "replace": "y"}]}), Some(CloseBrackets)),
        ),
        (r#"{"a": 1, "b": tru"#, Fixed(json!({"a": 1, "b": true}), Some(CloseBrackets))),
        (r#"{"a": 1, "b": nul"#, Fixed(json!({"a": 1, "b": null}), Some(CloseBrackets))),
        (r#"{"a": 1, "b": f"#, Fixed(json!({"a": 1, "b": false}), Some(CloseBrackets))),
        (r#"{"a": 1, "b": -"#, Fixed(json!({"a": 1}), Some(CloseBrackets))),
        (r#"{"a": 1, "b": 1."#, Fixed(json!({"a": 1}), Some(CloseBrackets))),
        (r#"{"a": 1, "b": 2e"#, Fixed(json!({"a": 1}), Some(CloseBrackets))),
        (r#"{"a": 1, "b": 42"#, Fixed(json!({"a": 1, "b": 42}), Some(CloseBrackets))),
        (r#"{"a": 1, "b":"#, Fixed(json!({"a": 1}), Some(CloseBrackets))),
        (r#"{"a": 1, "b""#, Fixed(json!({"a": 1}), Some(CloseBrackets))),
        (r#"{"a": 1, "b"#, Fixed(json!({"a": 1}), Some(CloseBrackets))),
        (r#"{"a": 1,"#, Fixed(json!({"a": 1}), Some(CloseBrackets))),
        (r#"{"a": [1, 2,"#, Fixed(json!({"a": [1, 2]}), Some(CloseBrackets))),
        (r#"{"a"#, Fixed(json!({}), Some(CloseBrackets))),
        ("{", Fixed(json!({}), Some(CloseBrackets))),
        (
            r#"{"s": "ends with backslash \"#,
            Fixed(json!({"s": "ends with backslash "}), Some(CloseBrackets)),
        ),
        (r#"{"s": "cut escape \u00"#, Fixed(json!({"s": "cut escape "}), Some(CloseBrackets))),
        (
            r#"{"s": "quote \" inside"#,
            Fixed(json!({"s": "quote \" inside"}), Some(CloseBrackets)),
        ),
        // A mismatched closer implies the inner closer.
        (r#"{"a": [1, 2}"#, Fixed(json!({"a": [1, 2]}), Some(CloseBrackets))),
        // Strip extra closers.
        (r#"{"a": 1}}"#, Fixed(json!({"a": 1}), Some(ExtraClosers))),
        (r#"{"a": [1]]}"#, Fixed(json!({"a": [1]}), Some(ExtraClosers))),
        (r#"{"a": "}"}]"#, Fixed(json!({"a": "}"}), Some(ExtraClosers))),
        // Combined faults.
        (
            "{\"code\": \"a\nb\", \"n\": [1,2,],",
            Fixed(json!({"code": "a\nb", "n": [1, 2]}), Some(CloseBrackets)),
        ),
        ("{\"a\": 1,}}", Fixed(json!({"a": 1}), Some(ExtraClosers))),
        // Double-encoded arguments.
        (r#""{\"path\": \"a\"}""#, Fixed(json!({"path": "a"}), Some(DecodedString))),
        // Not objects, or not repairable without guessing: refused.
        ("[1, 2]", Refused),
        ("42", Refused),
        ("null", Refused),
        (r#""just text""#, Refused),
        ("path=src/main.rs", Refused),
        (r#"{"a": undefined}"#, Refused),
        (r#"{"a": 'single'}"#, Refused),
        (r#"{a: 1}"#, Refused),
        (r#"{"a": 1} trailing words"#, Refused),
        (r#"{"a": 1 "b": 2}"#, Refused),
    ]
}

#[test]
fn repair_table() {
    for (raw, want) in table() {
        check(raw, want);
    }
}

#[test]
fn no_valid_but_wrong_outcomes() {
    // Every Refused case stays refused: the count of guesses must be zero.
    let guesses: Vec<&str> = table()
        .into_iter()
        .filter(|(_, w)| matches!(w, Refused))
        .filter(|(raw, _)| repair_arguments(raw, LIMIT).is_ok())
        .map(|(raw, _)| raw)
        .collect();
    assert_eq!(guesses, Vec::<&str>::new());
}

#[test]
fn oversized_input_is_refused_untried() {
    let big = format!("{{\"a\": \"{}\"", "x".repeat(100));
    assert_eq!(repair_arguments(&big, 50), Err(RepairError::TooLarge { len: big.len(), limit: 50 }));
}

#[test]
fn stringified_values_are_decoded_once_where_the_schema_wants_structure() {
    let schema = json!({"type": "object", "properties": {
        "edits": {"type": "array", "items": {"type": "object", "properties": {"opts": {"type": "object"}}}},
        "meta": {"type": "object"},
        "note": {"type": "string"}}});
    let mut v = json!({
        "edits": "[{\"search\": \"a\", \"opts\": \"{\\\"x\\\": 1}\"}]",
        "meta": "{\"k\": \"v\"}",
        "note": "{\"stays\": \"a string\"}"});
    let n = decode_stringified(&mut v, &schema, 1);
    assert_eq!(n, 2);
    // The decoded array's own stringified member is not decoded again (bounded to once).
    assert_eq!(v["edits"][0]["opts"], json!("{\"x\": 1}"));
    assert_eq!(v["meta"], json!({"k": "v"}));
    assert_eq!(v["note"], json!("{\"stays\": \"a string\"}"));
}

proptest::proptest! {
    #[test]
    fn valid_json_objects_pass_unchanged(v in arb_object()) {
        let text = v.to_string();
        let r = repair_arguments(&text, LIMIT).unwrap();
        proptest::prop_assert_eq!(r.value, v);
        proptest::prop_assert_eq!(r.step, None);
    }

    #[test]
    fn never_panics_and_output_is_an_object(s in "\\PC{0,80}") {
        if let Ok(r) = repair_arguments(&s, LIMIT) {
            proptest::prop_assert!(r.value.is_object());
        }
    }

    #[test]
    fn any_prefix_of_a_valid_object_repairs_to_an_object(v in arb_object(), cut in 0usize..200) {
        let text = v.to_string();
        let cut = cut.min(text.len());
        if text.is_char_boundary(cut)
            && let Ok(r) = repair_arguments(&text[..cut], LIMIT)
        {
            proptest::prop_assert!(r.value.is_object());
        }
    }
}

fn arb_object() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        "[a-z ,\\]\\}\\[{\":\\\\\n]{0,12}".prop_map(Value::String),
    ];
    let value = leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z]{1,4}", inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    proptest::collection::btree_map("[a-z]{1,4}", value, 0..4).prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// A string cut mid-way keeps what was written before the cut, white space and line ends
/// included; a cut inside an escape loses that escape alone.
#[test]
fn a_cut_string_is_closed_exactly_where_it_was_cut() {
    let cases: Vec<(&str, Value)> = vec![
        (r#"{"content": "hello   "#, json!({"content": "hello   "})),
        ("{\"content\": \"line one\n", json!({"content": "line one\n"})),
        ("{\"content\": \"a\tb\t", json!({"content": "a\tb\t"})),
        (r#"{"content": "x\n"#, json!({"content": "x\n"})),
        (r#"{"path": "a.txt", "content": "  "#, json!({"path": "a.txt", "content": "  "})),
        (r#"{"s": "caf\u00"#, json!({"s": "caf"})),
        (r#"{"s": "caf\u"#, json!({"s": "caf"})),
        (r#"{"s": "caf\"#, json!({"s": "caf"})),
        (r#"{"s": "ok \ud83d"#, json!({"s": "ok "})),
        (r#"{"s": "ok \ud83d\"#, json!({"s": "ok "})),
        (r#"{"s": "ok \ud83d\u"#, json!({"s": "ok "})),
        (r#"{"s": "ok \ud83d\ude0"#, json!({"s": "ok "})),
        (r#"{"s": "ok \ud83d\ude00"#, json!({"s": "ok 😀"})),
        (r#"{"s": "a\\"#, json!({"s": "a\\"})),
        (r#"{"s": "a\\u00"#, json!({"s": "a\\u00"})),
        (r#"{"s": "tab\t \u00e9 "#, json!({"s": "tab\t é "})),
        ("  {\"s\": \"lead\"", json!({"s": "lead"})),
    ];
    for (raw, want) in cases {
        let got = repair_arguments(raw, LIMIT).unwrap_or_else(|e| panic!("{raw:?}: {e}"));
        assert_eq!(got.value, want, "{raw:?}");
    }
}

proptest::proptest! {
    /// Cutting a valid object's text anywhere inside a string value gives that value's text
    /// up to the cut, less only an escape the cut left incomplete.
    #[test]
    fn a_cut_inside_a_string_keeps_its_prefix(text in "[a-z \\n\\t\"\\\\é😀\u{1}]{0,24}", cut in 0usize..200) {
        let raw = serde_json::to_string(&json!({"k": text})).unwrap();
        let start = 6; // after `{"k":"`
        let end = raw.len() - 2; // before the closing quote and brace
        let at = start + cut % (end - start + 1);
        proptest::prop_assume!(raw.is_char_boundary(at));
        let got = repair_arguments(&raw[..at], LIMIT).unwrap();
        let value = got.value["k"].as_str().unwrap().to_string();
        proptest::prop_assert!(text.starts_with(&value), "{:?} gave {value:?}", &raw[..at]);
        // Only an incomplete escape is lost: at most five bytes of `\u0001`.
        let kept = serde_json::to_string(&value).unwrap().len() - 2;
        proptest::prop_assert!(kept + 5 >= at - start, "{:?} gave {value:?}", &raw[..at]);
    }
}
