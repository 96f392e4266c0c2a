//! The argument repair ladder.
//!
//! [`repair_arguments`] tries, in order, stopping at the first that parses:
//! 1. strict parse;
//! 2. control characters inside strings escaped (LF, CR, TAB) or dropped;
//! 3. trailing commas before `}` / `]` removed;
//! 4. what is open closed: an unterminated string value, a literal cut mid-way (`tru`,
//!    `nul`), then the open brackets in reverse order; a dangling key or a number cut in its
//!    middle (`-`, `1.`) is dropped with its key, never guessed into another value;
//! 5. closing symbols that match nothing stripped.
//!
//! The steps are applied cumulatively, so combined faults are fixed, and every step is
//! string-aware: a comma or bracket inside a string is never touched. When the round was cut
//! by the output limit the ladder is closed (see [`crate::plan::finalize::finalize_call`]): completing a cut
//! call would run something the model never finished saying.
//!
//! # Example
//! ```
//! use toolslot::repair::args::{repair_arguments, RepairStep};
//! let r = repair_arguments(r#"{"path": "a.txt", "lines": [1, 2,],"#, 1 << 20).unwrap();
//! assert_eq!(r.value, serde_json::json!({"path": "a.txt", "lines": [1, 2]}));
//! assert_eq!(r.step, Some(RepairStep::CloseBrackets));
//! ```

pub use crate::event::RepairStep;
use serde_json::{Map, Value};

/// Arguments that parse, and the step that made them parse (`None`: they were valid).
#[derive(Debug, Clone, PartialEq)]
pub struct Repaired {
    /// The arguments, always a JSON object.
    pub value: Value,
    /// The ladder step used, if any.
    pub step: Option<RepairStep>,
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
    /// No step made them parse.
    #[error("arguments are not valid JSON and could not be repaired: {0}")]
    Unrepairable(String),
    /// They parse, but to something other than an object.
    #[error("arguments must be a JSON object, got {0}")]
    NotAnObject(&'static str),
}

/// One rung of the ladder: the rewritten text, or `None` when it changed nothing.
type Step = fn(&str) -> Option<String>;

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
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Ok(Repaired {
            value: Value::Object(Map::new()),
            step: None,
        });
    }
    if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
        return as_object(v, None);
    }
    let mut text: std::borrow::Cow<str> = trimmed.into();
    let mut last_step;
    let steps: [(RepairStep, Step); 4] = [
        (RepairStep::ControlChars, fix_control_chars),
        (RepairStep::TrailingCommas, remove_trailing_commas),
        (RepairStep::CloseBrackets, close_open),
        (RepairStep::ExtraClosers, strip_extra_closers),
    ];
    let mut last_error = String::new();
    for (step, apply) in steps {
        let Some(next) = apply(&text) else { continue };
        text = next.into();
        last_step = Some(step);
        match serde_json::from_str::<Value>(&text) {
            Ok(v) => return as_object(v, last_step),
            Err(e) => last_error = e.to_string(),
        }
    }
    if last_error.is_empty()
        && let Err(e) = serde_json::from_str::<Value>(&text)
    {
        last_error = e.to_string();
    }
    Err(RepairError::Unrepairable(last_error))
}

fn as_object(v: Value, step: Option<RepairStep>) -> Result<Repaired, RepairError> {
    match v {
        Value::Object(_) => Ok(Repaired { value: v, step }),
        // Some models send the whole arguments double-encoded; decode once, no further.
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(inner @ Value::Object(_)) => Ok(Repaired {
                value: inner,
                step: Some(RepairStep::DecodedString),
            }),
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

/// Step 2: raw control characters inside strings become escapes (LF, CR, TAB) or go; outside
/// strings, control characters other than JSON whitespace go.
fn fix_control_chars(s: &str) -> Option<String> {
    if !s.bytes().any(|b| b < 0x20 && !matches!(b, b' ' | b'\n' | b'\r' | b'\t')) && !has_control_in_string(s) {
        return None;
    }
    let mut out = String::with_capacity(s.len() + 8);
    let mut in_string = false;
    let mut escaped = false;
    for c in s.chars() {
        if in_string {
            if escaped {
                escaped = false;
                out.push(c);
                continue;
            }
            match c {
                '\\' => {
                    escaped = true;
                    out.push(c);
                }
                '"' => {
                    in_string = false;
                    out.push(c);
                }
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 => {}
                c => out.push(c),
            }
        } else {
            match c {
                '"' => {
                    in_string = true;
                    out.push(c);
                }
                '\n' | '\r' | '\t' => out.push(c),
                c if (c as u32) < 0x20 => {}
                c => out.push(c),
            }
        }
    }
    (out != s).then_some(out)
}

fn has_control_in_string(s: &str) -> bool {
    scan(s.as_bytes()).any(|(_, b, place)| place == Place::InString && b < 0x20)
}

/// Where a byte of JSON text stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Structure: outside every string literal.
    Structure,
    /// A quote opening or closing a string.
    Quote,
    /// Inside a string, not escaped.
    InString,
    /// Inside a string, right after a backslash.
    Escaped,
}

/// Every byte of `bytes` with its offset and place, tracking string literals and their
/// escapes. The one string-aware scanner the ladder's steps share.
fn scan(bytes: &[u8]) -> impl Iterator<Item = (usize, u8, Place)> + '_ {
    let mut in_string = false;
    let mut escaped = false;
    bytes.iter().enumerate().map(move |(i, &b)| {
        let place = if !in_string {
            if b == b'"' {
                in_string = true;
                Place::Quote
            } else {
                Place::Structure
            }
        } else if escaped {
            escaped = false;
            Place::Escaped
        } else if b == b'\\' {
            escaped = true;
            Place::InString
        } else if b == b'"' {
            in_string = false;
            Place::Quote
        } else {
            Place::InString
        };
        (i, b, place)
    })
}

/// The bytes of JSON structure in `bytes`, with their offsets: everything outside string
/// literals (the quotes excluded). The steps that edit structure walk only these, which is
/// what keeps a comma or bracket inside a string from ever being touched.
fn structural(bytes: &[u8]) -> impl Iterator<Item = (usize, u8)> + '_ {
    scan(bytes)
        .filter(|(_, _, place)| *place == Place::Structure)
        .map(|(i, b, _)| (i, b))
}

/// `s` without the single-byte characters at the (ascending) offsets `drop`; `None` when
/// there is nothing to drop.
fn without(s: &str, drop: &[usize]) -> Option<String> {
    if drop.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    for &i in drop {
        out.push_str(&s[last..i]);
        last = i + 1;
    }
    out.push_str(&s[last..]);
    Some(out)
}

/// Step 3: commas followed (past white space) by `}` or `]`, outside strings, go.
fn remove_trailing_commas(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let drop: Vec<usize> = structural(bytes)
        .filter(|&(i, b)| b == b',' && matches!(bytes[i + 1..].iter().find(|c| !c.is_ascii_whitespace()), Some(b'}') | Some(b']')))
        .map(|(i, _)| i)
        .collect();
    without(s, &drop)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Object,
    Array,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// After `{` or `,` in an object: a key (or `}` right after `{`).
    Key,
    /// After a key: `:`.
    Colon,
    /// After `:` or `[` or `,` in an array: a value.
    Value,
    /// After a complete value: `,` or a closer.
    AfterValue,
}

/// Step 4: closes what is open. See the module docs for what is completed and what is
/// dropped. Also inserts closers that a mismatched closer implies (`[1, 2}` inside an
/// object closes the array first).
fn close_open(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len() + 8);
    let mut stack: Vec<Kind> = Vec::new();
    let mut expect = Expect::Value;
    // The last point where the output, plus closers for `safe_stack`, is valid JSON.
    let mut safe_len = 0usize;
    let mut safe_stack: Vec<Kind> = Vec::new();
    let mut root_done = false;
    let mut i = 0;
    let mut changed = false;
    macro_rules! mark_safe {
        () => {{
            safe_len = out.len();
            safe_stack.clone_from(&stack);
        }};
    }
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_whitespace() {
            out.push(b as char);
            i += 1;
            continue;
        }
        if root_done {
            // After the root value: leave the rest to the extra-closers step.
            out.push_str(&s[i..]);
            break;
        }
        match b {
            b'{' | b'[' if matches!(expect, Expect::Value) => {
                stack.push(if b == b'{' { Kind::Object } else { Kind::Array });
                expect = if b == b'{' { Expect::Key } else { Expect::Value };
                out.push(b as char);
                mark_safe!();
                i += 1;
            }
            b'}' | b']' => {
                let kind = if b == b'}' { Kind::Object } else { Kind::Array };
                if !stack.contains(&kind) {
                    // Matches nothing: kept, for the extra-closers step to remove and name.
                    out.push(b as char);
                    mark_safe!();
                    i += 1;
                    continue;
                }
                // A dangling key, colon or comma before the closer is dropped.
                if out.trim_end().len() != safe_len {
                    out.truncate(safe_len);
                    stack.clone_from(&safe_stack);
                    changed = true;
                }
                let Some(depth) = stack.iter().rposition(|k| *k == kind) else {
                    out.push(b as char);
                    i += 1;
                    continue;
                };
                while stack.len() > depth + 1 {
                    let inner = stack.pop();
                    out.push(if inner == Some(Kind::Object) { '}' } else { ']' });
                    changed = true;
                }
                stack.pop();
                out.push(b as char);
                expect = Expect::AfterValue;
                root_done = stack.is_empty();
                mark_safe!();
                i += 1;
            }
            b',' if matches!(expect, Expect::AfterValue) => {
                out.push(',');
                expect = if stack.last() == Some(&Kind::Object) {
                    Expect::Key
                } else {
                    Expect::Value
                };
                i += 1;
            }
            b':' if matches!(expect, Expect::Colon) => {
                out.push(':');
                expect = Expect::Value;
                i += 1;
            }
            b'"' => {
                let is_key = matches!(expect, Expect::Key);
                let (end, closed) = scan_string(bytes, i);
                if closed {
                    out.push_str(&s[i..end]);
                    i = end;
                    if is_key {
                        expect = Expect::Colon;
                    } else {
                        expect = Expect::AfterValue;
                        root_done = stack.is_empty();
                        mark_safe!();
                    }
                    continue;
                }
                // Unterminated at end of input.
                changed = true;
                if is_key || !matches!(expect, Expect::Value) {
                    out.truncate(safe_len);
                    stack.clone_from(&safe_stack);
                } else {
                    out.push_str(trim_partial_escape(&s[i..]));
                    out.push('"');
                    mark_safe!();
                }
                i = bytes.len();
            }
            b't' | b'f' | b'n' if matches!(expect, Expect::Value) => {
                let word: &str = match b {
                    b't' => "true",
                    b'f' => "false",
                    _ => "null",
                };
                let end = bytes[i..]
                    .iter()
                    .position(|c| !c.is_ascii_alphabetic())
                    .map_or(bytes.len(), |p| i + p);
                let got = &s[i..end];
                if got == word {
                    out.push_str(got);
                } else if end == bytes.len() && word.starts_with(got) {
                    // Cut mid-literal at the end: there is only one way to finish it.
                    out.push_str(word);
                    changed = true;
                } else {
                    // Not a literal: leave it for the parser to refuse.
                    out.push_str(&s[i..]);
                    return changed.then_some(out);
                }
                expect = Expect::AfterValue;
                root_done = stack.is_empty();
                mark_safe!();
                i = end;
            }
            b'-' | b'0'..=b'9' if matches!(expect, Expect::Value) => {
                let end = bytes[i..]
                    .iter()
                    .position(|c| !(c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E')))
                    .map_or(bytes.len(), |p| i + p);
                let num = &s[i..end];
                let complete = num.ends_with(|c: char| c.is_ascii_digit());
                if !complete && end == bytes.len() {
                    // `-`, `1.`, `1e`: cut in its middle; the value is dropped with its key.
                    out.truncate(safe_len);
                    stack.clone_from(&safe_stack);
                    changed = true;
                    i = end;
                    continue;
                }
                out.push_str(num);
                expect = Expect::AfterValue;
                root_done = stack.is_empty();
                mark_safe!();
                i = end;
            }
            _ => {
                // Something the grammar does not allow here: stop, and let the parser refuse
                // the result rather than guess what was meant.
                out.push_str(&s[i..]);
                return changed.then_some(out);
            }
        }
    }
    if !root_done {
        // A dangling key, colon or comma: back to the last complete value.
        if out.trim_end().len() != safe_len {
            out.truncate(safe_len);
            stack.clone_from(&safe_stack);
            changed = true;
        }
        while let Some(kind) = stack.pop() {
            out.push(if kind == Kind::Object { '}' } else { ']' });
            changed = true;
        }
    }
    changed.then_some(out)
}

/// Scans a string starting at the quote at `start`; returns (end after the closing quote,
/// whether it was closed).
fn scan_string(bytes: &[u8], start: usize) -> (usize, bool) {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return (i + 1, true),
            _ => i += 1,
        }
    }
    (bytes.len(), false)
}

/// Removes a trailing lone backslash or an unfinished `\uXXXX` from an unterminated string.
fn trim_partial_escape(s: &str) -> &str {
    let bytes = s.as_bytes();
    // Count the backslashes that end the string, and look for a `\u` cut short.
    if let Some(pos) = s.rfind("\\u") {
        let preceding = bytes[..pos].iter().rev().take_while(|b| **b == b'\\').count();
        let hex = &s[pos + 2..];
        if preceding % 2 == 0 && hex.len() < 4 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return &s[..pos];
        }
    }
    let trailing = bytes.iter().rev().take_while(|b| **b == b'\\').count();
    if trailing % 2 == 1 { &s[..s.len() - 1] } else { s }
}

/// Step 5: closers that match no open bracket are removed (outside strings).
fn strip_extra_closers(s: &str) -> Option<String> {
    let mut stack: Vec<u8> = Vec::new();
    let mut drop = Vec::new();
    for (i, b) in structural(s.as_bytes()) {
        match b {
            b'{' | b'[' => stack.push(b),
            b'}' | b']' => {
                let opener = if b == b'}' { b'{' } else { b'[' };
                if stack.last() == Some(&opener) {
                    stack.pop();
                } else {
                    drop.push(i);
                }
            }
            _ => {}
        }
    }
    without(s, &drop)
}

#[cfg(test)]
#[path = "args_tests.rs"]
mod tests;
