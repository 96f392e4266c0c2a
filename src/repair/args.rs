//! The argument repair ladder.
//!
//! [`repair_arguments`] parses arguments strictly and, when that fails, reads them once with
//! a tolerant reader that repairs, each where the text can be read one way only:
//! 1. a markdown fence or lines of prose around the one object (`surrounding_text`);
//! 2. comments: `//`, `/* */`, `#` (`comments`);
//! 3. raw control characters inside strings, escaped (LF, CR, TAB) or dropped (`control_chars`);
//! 4. strings and keys in single or typographic quotes (`single_quotes`);
//! 5. `True`, `False`, `None` and other spellings of the literals (`python_literals`);
//! 6. keys without quotes (`unquoted_keys`);
//! 7. a colon missing between a key and its value on one line (`missing_colons`);
//! 8. a comma missing between members or elements on separate lines (`missing_commas`);
//! 9. a leading or doubled comma, or one after the root (`stray_commas`);
//! 10. commas before `}` or `]` (`trailing_commas`);
//! 11. quotes inside a string value that cannot close it (`embedded_quotes`);
//! 12. the quote missing before the closers at the end (`missing_quote`);
//! 13. a number cut after `.` or its exponent: the digits written stand (`incomplete_number`);
//! 14. a closer of the wrong kind: read as the one that was open, or as closing what it
//!     matches and all that is open above it, whichever needs fewer edits
//!     (`mismatched_closers`);
//! 15. what is open closed: an unterminated string value, a literal cut mid-way (`tru`,
//!     `nul`), then the open brackets in reverse order; a dangling key, or a number cut before
//!     its first digit (`-`), is dropped with its key, never guessed into another value
//!     (`close_brackets`);
//! 16. closing symbols that match nothing, dropped (`extra_closers`).
//!
//! Every repair is string-aware: nothing inside a string is touched but what the string's own
//! repairs name. Where a fault can be read two ways (a quote that could close a string or
//! belong to it, two strings side by side on one line, a value with no key) the arguments are
//! refused: a wrong value that runs is worse than a call sent again. When the round was cut by
//! the output limit the ladder is closed (see [`crate::plan::finalize::finalize_call`]):
//! completing a cut call would run something the model never finished saying.
//!
//! # Example
//! ```
//! use toolslot::repair::args::{repair_arguments, RepairStep};
//! let r = repair_arguments(r#"{"path": "a.txt", "lines": [1, 2,],"#, 1 << 20).unwrap();
//! assert_eq!(r.value, serde_json::json!({"path": "a.txt", "lines": [1, 2]}));
//! assert_eq!(r.step, Some(RepairStep::CloseBrackets));
//! assert_eq!(r.steps.iter().collect::<Vec<_>>(), [RepairStep::TrailingCommas, RepairStep::CloseBrackets]);
//!
//! let r = repair_arguments("{path: 'a.txt', recursive: True}", 1 << 20).unwrap();
//! assert_eq!(r.value, serde_json::json!({"path": "a.txt", "recursive": true}));
//! assert_eq!(r.step, Some(RepairStep::UnquotedKeys));
//! ```

pub use crate::event::RepairStep;
use serde_json::{Map, Value};

use super::tolerant;

/// The ladder's steps in order: when several were applied, `repair` names the last.
pub const LADDER: [RepairStep; 17] = [
    RepairStep::SurroundingText,
    RepairStep::Comments,
    RepairStep::ControlChars,
    RepairStep::SingleQuotes,
    RepairStep::PythonLiterals,
    RepairStep::UnquotedKeys,
    RepairStep::MissingColons,
    RepairStep::MissingCommas,
    RepairStep::StrayCommas,
    RepairStep::TrailingCommas,
    RepairStep::EmbeddedQuotes,
    RepairStep::MissingQuote,
    RepairStep::IncompleteNumber,
    RepairStep::MismatchedClosers,
    RepairStep::CloseBrackets,
    RepairStep::ExtraClosers,
    RepairStep::DecodedString,
];

/// The place of `step` in [`LADDER`].
fn rank(step: RepairStep) -> u32 {
    match step {
        RepairStep::SurroundingText => 0,
        RepairStep::Comments => 1,
        RepairStep::ControlChars => 2,
        RepairStep::SingleQuotes => 3,
        RepairStep::PythonLiterals => 4,
        RepairStep::UnquotedKeys => 5,
        RepairStep::MissingColons => 6,
        RepairStep::MissingCommas => 7,
        RepairStep::StrayCommas => 8,
        RepairStep::TrailingCommas => 9,
        RepairStep::EmbeddedQuotes => 10,
        RepairStep::MissingQuote => 11,
        RepairStep::IncompleteNumber => 12,
        RepairStep::MismatchedClosers => 13,
        RepairStep::CloseBrackets => 14,
        RepairStep::ExtraClosers => 15,
        RepairStep::DecodedString => 16,
    }
}

/// A set of ladder steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepSet(u32);

impl StepSet {
    /// Adds `step`.
    pub fn add(&mut self, step: RepairStep) {
        self.0 |= 1 << rank(step);
    }

    /// Whether `step` is in the set.
    pub fn contains(self, step: RepairStep) -> bool {
        self.0 & (1 << rank(step)) != 0
    }

    /// The last step of the set in ladder order.
    pub fn last(self) -> Option<RepairStep> {
        (self.0 != 0).then(|| LADDER[31 - self.0.leading_zeros() as usize])
    }

    /// Whether no step is in the set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The steps, in ladder order.
    pub fn iter(self) -> impl Iterator<Item = RepairStep> {
        LADDER.into_iter().filter(move |s| self.0 & (1 << rank(*s)) != 0)
    }
}

/// Arguments that parse, and the steps that made them parse (none: they were valid).
#[derive(Debug, Clone, PartialEq)]
pub struct Repaired {
    /// The arguments, always a JSON object.
    pub value: Value,
    /// The last step applied, in ladder order (the `repair` field of `call_assembled`).
    pub step: Option<RepairStep>,
    /// Every step applied (the `args_repaired` notice names them all, in ladder order).
    pub steps: StepSet,
}

/// Why arguments could not be repaired.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RepairError {
    /// Over the size limit; not tried.
    #[error("arguments are {len} bytes, over the {limit}-byte repair limit")]
    TooLarge {
        /// Their size.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// No reading of them is valid, or more than one is.
    #[error("arguments are not valid JSON and could not be repaired: {0}")]
    Unrepairable(String),
    /// They parse, but to something other than an object.
    #[error("arguments must be a JSON object, got {0}")]
    NotAnObject(&'static str),
}

/// Runs the ladder over `raw`.
///
/// # Errors
/// [`RepairError`] when the text is too large, unrepairable, or not an object.
pub fn repair_arguments(raw: &str, max_bytes: usize) -> Result<Repaired, RepairError> {
    if raw.len() > max_bytes {
        return Err(RepairError::TooLarge {
            len: raw.len(),
            limit: max_bytes,
        });
    }
    if raw.trim().is_empty() {
        return Ok(Repaired {
            value: Value::Object(Map::new()),
            step: None,
            steps: StepSet::default(),
        });
    }
    // Only leading white space goes: a string cut mid-way may end in spaces or a line end the
    // model wrote, which belong to the value (white space after a complete value is harmless
    // to every step).
    let trimmed = raw.trim_start();
    if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
        return as_object(v, StepSet::default());
    }
    // One tolerant pass, not one pass per step: each rewrite of the text and parse of the result
    // cost as much as the whole read, and a fault one step cannot see (a quote that is text, a
    // comment holding a bracket) misleads the steps after it.
    let read = tolerant::read(trimmed).map_err(RepairError::Unrepairable)?;
    as_object(read.value, read.steps)
}

fn as_object(v: Value, steps: StepSet) -> Result<Repaired, RepairError> {
    match v {
        Value::Object(_) => Ok(Repaired {
            value: v,
            step: steps.last(),
            steps,
        }),
        // Some models send the whole arguments double-encoded; decode once, no further.
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(inner @ Value::Object(_)) => {
                let mut steps = steps;
                steps.add(RepairStep::DecodedString);
                Ok(Repaired {
                    value: inner,
                    step: Some(RepairStep::DecodedString),
                    steps,
                })
            }
            _ => Err(RepairError::NotAnObject("a string")),
        },
        Value::Null => Err(RepairError::NotAnObject("null")),
        Value::Bool(_) => Err(RepairError::NotAnObject("a boolean")),
        Value::Number(_) => Err(RepairError::NotAnObject("a number")),
        Value::Array(_) => Err(RepairError::NotAnObject("an array")),
    }
}

/// Decodes string values whose schema wants an object or array (a defect of some models:
/// `{"edits": "[{\"a\": 1}]"}`), once, at every level the schema describes.
/// Returns how many values were decoded.
pub fn decode_stringified(value: &mut Value, schema: &Value, depth: usize) -> usize {
    if depth == 0 {
        return 0;
    }
    let mut decoded = 0;
    match value {
        Value::Object(map) => {
            let Some(Value::Object(props)) = schema.get("properties") else {
                return 0;
            };
            for (key, sub_schema) in props {
                let Some(v) = map.get_mut(key) else { continue };
                decoded += decode_one(v, sub_schema, depth);
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for v in items {
                    decoded += decode_one(v, item_schema, depth);
                }
            }
        }
        _ => {}
    }
    decoded
}

fn decode_one(v: &mut Value, schema: &Value, depth: usize) -> usize {
    let wants = |t: &str| match schema.get("type") {
        Some(Value::String(s)) => s == t,
        Some(Value::Array(ts)) => ts.iter().any(|x| x == t) && !ts.iter().any(|x| x == "string"),
        _ => false,
    };
    if let Value::String(s) = v {
        let want_object = wants("object");
        let want_array = wants("array");
        if want_object || want_array {
            match serde_json::from_str::<Value>(s) {
                Ok(inner @ Value::Object(_)) if want_object => {
                    *v = inner;
                    return 1;
                }
                Ok(inner @ Value::Array(_)) if want_array => {
                    *v = inner;
                    return 1;
                }
                _ => return 0,
            }
        }
        return 0;
    }
    decode_stringified(v, schema, depth)
}

#[cfg(test)]
#[path = "args_tests.rs"]
mod tests;
