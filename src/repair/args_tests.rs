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
        // A number cut after `.` or its exponent keeps the digits written (none is made up).
        (r#"{"a": 1, "b": 1."#, Fixed(json!({"a": 1, "b": 1}), Some(CloseBrackets))),
        (r#"{"a": 1, "b": 2e"#, Fixed(json!({"a": 1, "b": 2}), Some(CloseBrackets))),
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
        (r#"{"a": 'it"s'}"#, Fixed(json!({"a": "it\"s"}), Some(SingleQuotes))),
        (r#"{a: 1}"#, Fixed(json!({"a": 1}), Some(UnquotedKeys))),
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
            // Whatever was not valid as sent was repaired by a step that is named.
            let valid = s.trim().is_empty() || serde_json::from_str::<Value>(s.trim_start()).is_ok();
            proptest::prop_assert_eq!(r.steps.is_empty(), valid, "{:?}", s);
        }
    }

    #[test]
    fn json_like_text_never_panics_and_every_repair_is_named(
        s in "[{}\\[\\]\"',:a-c1-3 \n\\\\/*#.`TNe-]{0,60}"
    ) {
        if let Ok(r) = repair_arguments(&s, LIMIT) {
            proptest::prop_assert!(r.value.is_object());
            let valid = s.trim().is_empty() || serde_json::from_str::<Value>(s.trim_start()).is_ok();
            proptest::prop_assert_eq!(r.steps.is_empty(), valid, "{:?}", s);
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

/// Held-out-style cases (tests/data/repair_cases.json): each class of fault the ladder repairs,
/// in several variants, with the value a careful reader expects; and the cases that must stay
/// refused because no reading is the only one.
#[test]
fn repair_cases_file() {
    let cases: Vec<Value> = serde_json::from_str(include_str!("../../tests/data/repair_cases.json")).unwrap();
    let mut misses = Vec::new();
    for case in &cases {
        let input = case["input"].as_str().unwrap();
        let got = repair_arguments(input, LIMIT);
        let class = case["class"].as_str().unwrap();
        let ok = match (&got, case.get("value")) {
            // The value, and the class's own step among those the notice names.
            (Ok(r), Some(want)) => &r.value == want && (class == "promise" || r.steps.iter().any(|s| s.as_str() == class)),
            (Err(_), None) => true,
            _ => false,
        };
        if !ok {
            misses.push(format!("{class}: {input:?} gave {got:?}"));
        }
    }
    eprintln!("repair cases: {} of {} as expected", cases.len() - misses.len(), cases.len());
    assert!(misses.is_empty(), "{}", misses.join("\n"));
}

#[test]
fn the_ladder_order_and_the_step_set_agree() {
    for (place, step) in LADDER.into_iter().enumerate() {
        assert_eq!(rank(step) as usize, place, "{step:?}");
    }
    let mut set = StepSet::default();
    set.add(ExtraClosers);
    set.add(SingleQuotes);
    set.add(ExtraClosers);
    assert_eq!(set.iter().collect::<Vec<_>>(), [SingleQuotes, ExtraClosers]);
    assert_eq!(set.last(), Some(ExtraClosers));
    assert!(set.contains(SingleQuotes) && !set.contains(Comments));
    assert_eq!(StepSet::default().last(), None);
}

/// How a model used to another language writes an object: single quotes, bare keys, Python's
/// literals, members on their own lines without commas, comments, a fence around it all.
#[derive(Debug, Clone, Copy)]
struct Dialect {
    single_quotes: bool,
    bare_keys: bool,
    python: bool,
    lines_without_commas: bool,
    comments: bool,
}

fn render(v: &Value, d: Dialect, out: &mut String) {
    let separator = |out: &mut String, d: Dialect| {
        out.push_str(if d.lines_without_commas { "\n" } else { ",\n" });
        if d.comments {
            out.push_str("/* next */ ");
        }
    };
    match v {
        Value::Object(map) => {
            out.push('{');
            for (n, (k, v)) in map.iter().enumerate() {
                if n > 0 {
                    separator(out, d);
                }
                if d.bare_keys {
                    out.push_str(k);
                } else {
                    render(&Value::String(k.clone()), d, out);
                }
                out.push_str(": ");
                render(v, d, out);
                if d.comments {
                    out.push_str(" // end of member");
                    out.push('\n');
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (n, v) in items.iter().enumerate() {
                if n > 0 {
                    separator(out, d);
                }
                render(v, d, out);
            }
            out.push(']');
        }
        Value::String(s) if d.single_quotes => {
            out.push('\'');
            for c in s.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\'' => out.push_str("\\'"),
                    c => out.push(c),
                }
            }
            out.push('\'');
        }
        Value::Bool(b) if d.python => out.push_str(if *b { "True" } else { "False" }),
        Value::Null if d.python => out.push_str("None"),
        v => out.push_str(&v.to_string()),
    }
}

proptest::proptest! {
    /// Whatever dialect an object is written in, it reads as that object, and each dialect
    /// feature that made a difference is named.
    #[test]
    fn an_object_in_another_dialect_reads_as_itself(
        v in arb_object(),
        flags in proptest::array::uniform6(proptest::bool::ANY),
    ) {
        let [single_quotes, bare_keys, python, lines_without_commas, comments, fenced] = flags;
        let d = Dialect { single_quotes, bare_keys, python, lines_without_commas, comments };
        let mut text = String::new();
        render(&v, d, &mut text);
        if fenced {
            text = format!("Here are the arguments:\n```json\n{text}\n```");
        }
        let r = repair_arguments(&text, LIMIT);
        proptest::prop_assert!(r.is_ok(), "{text}\n{r:?}");
        let r = r.unwrap();
        proptest::prop_assert_eq!(&r.value, &v, "{}", text);
        if fenced {
            proptest::prop_assert!(r.steps.contains(SurroundingText));
        }
        if r.step.is_none() {
            proptest::prop_assert_eq!(serde_json::from_str::<Value>(&text).ok(), Some(v));
        }
    }
}

/// The examples docs/CONTRACT.md gives for each step, as sent and as run.
#[test]
fn the_contract_examples_hold() {
    let fixed = [
        ("```json\n{\"q\": \"x\"}\n```", json!({"q": "x"}), SurroundingText),
        ("{\"a\": 1, // count\n\"b\": 2}", json!({"a": 1, "b": 2}), Comments),
        ("{'path': 'src/main.rs'}", json!({"path": "src/main.rs"}), SingleQuotes),
        (
            r#"{"force": True, "mode": None}"#,
            json!({"force": true, "mode": null}),
            PythonLiterals,
        ),
        (r#"{path: "a.txt", limit: 20}"#, json!({"path": "a.txt", "limit": 20}), UnquotedKeys),
        (r#"{"path" "a.txt"}"#, json!({"path": "a.txt"}), MissingColons),
        ("{\"a\": 1\n\"b\": 2}", json!({"a": 1, "b": 2}), MissingCommas),
        (r#"{, "a": 1},"#, json!({"a": 1}), StrayCommas),
        (r#"{"title": "a 24" screen"}"#, json!({"title": "a 24\" screen"}), EmbeddedQuotes),
        (r#"{"url": "https://x.org/}"#, json!({"url": "https://x.org/"}), MissingQuote),
        (r#"{"n": 2."#, json!({"n": 2}), IncompleteNumber),
        (
            r#"{"tags": ["a", "b"}, "n": 1}"#,
            json!({"tags": ["a", "b"], "n": 1}),
            MismatchedClosers,
        ),
    ];
    for (raw, want, step) in fixed {
        let r = repair_arguments(raw, LIMIT).unwrap_or_else(|e| panic!("{raw:?}: {e}"));
        assert_eq!(r.value, want, "{raw:?}");
        assert!(r.steps.contains(step), "{raw:?} named {:?}", r.steps);
    }
    let refused = [
        r#"{"a": , "b": 1}"#,
        r#"{"a": undefined}"#,
        r#"{"name": John}"#,
        r#"{"a": 1 "b": 2}"#,
        r#"{"city": "New York, "zip": "10001"}"#,
        r#"{"a": 1} and more"#,
    ];
    for raw in refused {
        assert!(repair_arguments(raw, LIMIT).is_err(), "{raw:?}");
    }
}
