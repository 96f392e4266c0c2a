//! What a hook's exit status and output mean.

use serde_json::Value;

use crate::config::{HookEvent, RuleDecision};

/// A hook's answer, read from how it ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Exit 0: go on, with what its JSON said.
    Continue {
        /// `allow`, `ask` or `deny`.
        decision: Option<RuleDecision>,
        /// The input the call should run with instead (pre only).
        updated_input: Option<Value>,
        /// Text appended to the result (post only).
        additional_context: Option<String>,
        /// Why (shown to the model on a deny).
        reason: Option<String>,
    },
    /// Exit 2: block; its stderr is the reason the model reads.
    Block(String),
    /// It crashed, timed out, or answered something that is not an answer: its `on_error`
    /// decides.
    Failed(String),
}

/// How a hook's process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// It exited with this code.
    Exited(i32),
    /// A signal ended it.
    Signalled,
}

/// Reads a hook's answer from its ending and its output.
pub fn read(event: HookEvent, ending: Ending, stdout: &[u8], stderr: &[u8]) -> Answer {
    let stderr = String::from_utf8_lossy(stderr).trim().to_string();
    match ending {
        Ending::Exited(0) => {}
        Ending::Exited(2) => {
            return Answer::Block(if stderr.is_empty() {
                "blocked by a hook (it gave no reason)".into()
            } else {
                stderr
            });
        }
        Ending::Exited(code) => return Answer::Failed(with_stderr(format!("it exited with status {code}"), &stderr)),
        Ending::Signalled => return Answer::Failed(with_stderr("a signal ended it".into(), &stderr)),
    }
    let Ok(stdout) = std::str::from_utf8(stdout) else {
        return Answer::Failed("its output is not UTF-8".into());
    };
    if stdout.trim().is_empty() {
        return Answer::Continue {
            decision: None,
            updated_input: None,
            additional_context: None,
            reason: None,
        };
    }
    let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(stdout.trim()) else {
        return Answer::Failed(format!("its output is not a JSON object: {}", cut(stdout.trim(), 120)));
    };
    let decision = match obj.get("decision") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) => match d.as_str() {
            "allow" => Some(RuleDecision::Allow),
            "ask" => Some(RuleDecision::Ask),
            "deny" => Some(RuleDecision::Deny),
            other => return Answer::Failed(format!("its decision `{}` is not allow, ask or deny", cut(other, 40))),
        },
        Some(_) => return Answer::Failed("its decision is not a string".into()),
    };
    let updated_input = match obj.get("updated_input") {
        None | Some(Value::Null) => None,
        Some(v @ Value::Object(_)) if event == HookEvent::PreToolUse => Some(v.clone()),
        Some(Value::Object(_)) => return Answer::Failed("updated_input is only for pre_tool_use hooks".into()),
        Some(_) => return Answer::Failed("its updated_input is not a JSON object".into()),
    };
    let additional_context = match obj.get("additional_context") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if event == HookEvent::PostToolUse => Some(s.clone()),
        Some(Value::String(_)) => return Answer::Failed("additional_context is only for post_tool_use hooks".into()),
        Some(_) => return Answer::Failed("its additional_context is not a string".into()),
    };
    let reason = match obj.get("reason") {
        Some(Value::String(s)) => Some(s.clone()),
        _ => (!stderr.is_empty()).then_some(stderr),
    };
    Answer::Continue {
        decision,
        updated_input,
        additional_context,
        reason,
    }
}

fn with_stderr(what: String, stderr: &str) -> String {
    if stderr.is_empty() {
        what
    } else {
        format!("{what}: {}", cut(stderr, 200))
    }
}

/// The first line of `s`, at most `max` characters.
pub(super) fn cut(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    let mut out: String = line.chars().take(max).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PRE: HookEvent = HookEvent::PreToolUse;
    const POST: HookEvent = HookEvent::PostToolUse;

    #[test]
    fn exit_codes() {
        assert!(matches!(
            read(PRE, Ending::Exited(0), b"", b""),
            Answer::Continue { decision: None, .. }
        ));
        assert_eq!(read(PRE, Ending::Exited(2), b"", b"no pushes\n"), Answer::Block("no pushes".into()));
        assert!(matches!(read(PRE, Ending::Exited(1), b"", b"boom"), Answer::Failed(r) if r.contains("status 1") && r.contains("boom")));
        assert!(matches!(read(PRE, Ending::Signalled, b"", b""), Answer::Failed(_)));
    }

    #[test]
    fn json_answers() {
        let out = json!({"decision": "ask", "updated_input": {"command": "ls"}, "reason": "r"}).to_string();
        assert_eq!(
            read(PRE, Ending::Exited(0), out.as_bytes(), b""),
            Answer::Continue {
                decision: Some(RuleDecision::Ask),
                updated_input: Some(json!({"command": "ls"})),
                additional_context: None,
                reason: Some("r".into()),
            }
        );
        let out = json!({"additional_context": "note"}).to_string();
        assert!(
            matches!(read(POST, Ending::Exited(0), out.as_bytes(), b""), Answer::Continue { additional_context: Some(c), .. } if c == "note")
        );
    }

    #[test]
    fn garbage_is_a_failure() {
        for out in [
            "not json",
            "[1,2]",
            "{\"decision\": \"yes\"}",
            "{\"decision\": 1}",
            "{\"updated_input\": \"ls\"}",
            "{\"additional_context\": \"x\"}",
        ] {
            assert!(
                matches!(read(PRE, Ending::Exited(0), out.as_bytes(), b""), Answer::Failed(_)),
                "{out}"
            );
        }
        assert!(matches!(
            read(POST, Ending::Exited(0), b"{\"updated_input\": {}}", b""),
            Answer::Failed(_)
        ));
        assert!(matches!(read(PRE, Ending::Exited(0), &[0xff, 0xfe], b""), Answer::Failed(_)));
    }
}
