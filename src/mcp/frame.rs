//! Reading a server's JSON-RPC lines without trusting their size or shape: the id of a line
//! too long to hold, and a line nested too deep to parse.
//!
//! Both work on bytes in one pass. A hand-written scanner rather than a JSON parser, because
//! the point is not to parse: a 50 MB answer is skimmed for its top-level `"id"` (so its
//! request can be ended at once) without being held, and a 10,000-level nesting is flattened
//! before serde_json, whose recursion limit would otherwise reject the whole line (and with
//! it every tool of a listing).

use std::borrow::Cow;

use serde_json::Value;

/// What replaces a value nested deeper than allowed: admission sees it in a tool's schema and
/// fails that tool closed.
pub const TOO_DEEP: &str = "[toolslot: nested deeper than mcp.max_json_depth]";

/// Finds the top-level `"id"` of a JSON object fed in pieces, holding at most a few hundred
/// bytes whatever the line's length.
#[derive(Debug, Default)]
pub struct IdScanner {
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// At depth 1, before a key (after `{` or `,`).
    expect_key: bool,
    reading_key: bool,
    key: Vec<u8>,
    /// The last key read at depth 1 was `id`, and its value comes next.
    id_next: bool,
    reading_value: bool,
    value: Vec<u8>,
    found: Option<Value>,
    gave_up: bool,
    /// Read on past the id until a top-level `"method"` key is seen (a request's).
    watch_method: bool,
    saw_method: bool,
}

/// Longest id kept (bytes); a longer one is not an id any client sent.
const MAX_ID_BYTES: usize = 256;

impl IdScanner {
    /// The id, once seen.
    pub fn id(&self) -> Option<&Value> {
        self.found.as_ref()
    }

    /// A scanner that also tells whether the line is a request (has a top-level `"method"`),
    /// reading on past the id for it.
    pub fn for_requests() -> Self {
        Self {
            watch_method: true,
            ..Self::default()
        }
    }

    /// Whether a top-level `"method"` key was seen (with [`IdScanner::for_requests`]).
    pub fn saw_method(&self) -> bool {
        self.saw_method
    }

    /// Takes the next bytes of the line.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.gave_up || (self.found.is_some() && (self.saw_method || !self.watch_method)) {
                return;
            }
            self.step(b);
        }
    }

    fn step(&mut self, b: u8) {
        if self.reading_value && (self.value.len() < MAX_ID_BYTES) {
            self.value.push(b);
        }
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if self.reading_key {
                    self.reading_key = false;
                    self.id_next = self.key == b"id" && self.found.is_none();
                    self.saw_method |= self.key == b"method";
                } else if self.reading_value {
                    self.end_value();
                }
            } else if self.reading_key && self.key.len() < 8 {
                self.key.push(b);
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.expect_key {
                    self.reading_key = true;
                    self.expect_key = false;
                    self.key.clear();
                } else if self.depth == 1 && self.id_next && !self.reading_value {
                    self.reading_value = true;
                    self.value = vec![b'"'];
                }
            }
            b'{' | b'[' => {
                if self.reading_value || (self.depth == 1 && self.id_next) {
                    // An object or array is no id.
                    self.gave_up = true;
                    return;
                }
                self.depth += 1;
                self.expect_key = self.depth == 1 && b == b'{';
            }
            b'}' | b']' => {
                if self.reading_value && self.depth == 1 {
                    self.value.pop();
                    self.end_value();
                }
                self.depth = self.depth.saturating_sub(1);
            }
            b',' if self.depth == 1 => {
                if self.reading_value {
                    self.value.pop();
                    self.end_value();
                }
                self.expect_key = true;
                self.id_next = false;
            }
            b':' if self.depth == 1 => {}
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => {
                if self.depth == 1 && self.id_next && !self.reading_value {
                    self.reading_value = true;
                    self.value = vec![b];
                }
            }
        }
    }

    fn end_value(&mut self) {
        self.reading_value = false;
        self.id_next = false;
        let text = String::from_utf8_lossy(&self.value);
        match serde_json::from_str::<Value>(text.trim()) {
            Ok(v @ (Value::Number(_) | Value::String(_))) => self.found = Some(v),
            _ => self.gave_up = true,
        }
    }
}

/// `line` with every value nested deeper than `max` levels replaced by the string
/// [`TOO_DEEP`]; borrowed when nothing is that deep. The top-level value is level 1.
pub fn flatten_deep(line: &[u8], max: usize) -> Cow<'_, [u8]> {
    if deepest(line) <= max {
        return Cow::Borrowed(line);
    }
    let mut out = Vec::with_capacity(line.len());
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    // While inside a dropped subtree: the depth at which it opened.
    let mut dropping: Option<usize> = None;
    for &b in line {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            if dropping.is_none() {
                out.push(b);
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if dropping.is_none() && depth > max {
                    dropping = Some(depth);
                    out.extend_from_slice(format!("\"{TOO_DEEP}\"").as_bytes());
                }
            }
            b'}' | b']' => {
                let closing = depth;
                depth = depth.saturating_sub(1);
                if dropping == Some(closing) {
                    dropping = None;
                    continue;
                }
            }
            _ => {}
        }
        if dropping.is_none() {
            out.push(b);
        }
    }
    Cow::Owned(out)
}

/// The deepest nesting of `line` (strings skipped).
fn deepest(line: &[u8]) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &b in line {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id_of(line: &str, chunk: usize) -> Option<Value> {
        let mut s = IdScanner::default();
        for part in line.as_bytes().chunks(chunk) {
            s.feed(part);
        }
        s.id().cloned()
    }

    #[test]
    fn the_top_level_id_is_found_wherever_it_is() {
        let big = "x".repeat(10_000);
        for (line, want) in [
            (format!(r#"{{"jsonrpc":"2.0","id":7,"result":{{"text":"{big}"}}}}"#), json!(7)),
            (
                format!(r#"{{"result":{{"id":99,"text":"{big}","a":["id",1]}},"id":"abc"}}"#),
                json!("abc"),
            ),
            (r#"{ "result" : {"x":"\"id\": 5"}, "id" : -3 }"#.to_string(), json!(-3)),
            (r#"{"jsonrpc":"2.0","id":"a\"b","result":{}}"#.to_string(), json!("a\"b")),
        ] {
            for chunk in [1, 3, 4096] {
                assert_eq!(id_of(&line, chunk), Some(want.clone()), "{chunk}: {}", &line[..60.min(line.len())]);
            }
        }
        assert_eq!(id_of(r#"{"result":{"id":1}}"#, 1), None, "a nested id is not the id");
        assert_eq!(id_of(r#"{"id":{"x":1}}"#, 1), None);
    }

    #[test]
    fn deep_values_are_flattened_and_the_rest_kept() {
        let deep = format!("{}1{}", "[".repeat(500), "]".repeat(500));
        let line = format!(r#"{{"id":1,"result":{{"tools":[{{"name":"ok"}},{{"name":"deep","inputSchema":{deep}}}]}}}}"#);
        let flat = flatten_deep(line.as_bytes(), 64);
        let v: Value = serde_json::from_slice(&flat).unwrap();
        assert_eq!(v["result"]["tools"][0]["name"], "ok");
        let schema = v["result"]["tools"][1]["inputSchema"].to_string();
        assert!(schema.contains(TOO_DEEP), "{schema}");
        let shallow = r#"{"id":1,"result":{"a":"[[[[[[[[["}}"#;
        assert!(matches!(flatten_deep(shallow.as_bytes(), 3), Cow::Borrowed(_)));
    }
}
