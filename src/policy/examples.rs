//! A rule's examples, checked when its policy loads: a rule that does not do what its author
//! showed it doing is refused before it decides anything.

use std::path::Path;

use serde_json::{Value, json};

use super::rule::{Call, Match, Rule};
use super::{PolicyError, covering_allow};
use crate::config::RuleDecision;

/// Checks every example of `rule` (written at `place`) in `workspace`.
///
/// # Errors
/// [`PolicyError::Example`] naming the first example that misbehaves.
pub(super) fn check(rule: &Rule, place: &str, workspace: &Path) -> Result<(), PolicyError> {
    let Some(examples) = &rule.written().examples else {
        return Ok(());
    };
    let cases = examples
        .matches
        .iter()
        .map(|e| (e, true))
        .chain(examples.not_match.iter().map(|e| (e, false)));
    for (example, should) in cases {
        let fail = |problem: &str| PolicyError::Example {
            place: place.to_string(),
            index: rule.reference().index,
            tool: rule.written().tool.clone(),
            example: example.to_string(),
            problem: problem.to_string(),
        };
        let input = input_of(rule, example).ok_or_else(|| {
            fail("cannot be read: a string example needs a rule with command, path or input; give a table (the whole input) instead")
        })?;
        let tool = tool_of(rule);
        let no_key = String::new;
        let call = Call::new(&tool, &input, workspace, &no_key);
        let got = if rule.decision() == RuleDecision::Allow {
            if covering_allow(&[rule], &call).is_some() {
                Match::Yes
            } else {
                Match::No
            }
        } else {
            rule.restricts(&call)
        };
        match (should, got) {
            (true, Match::Yes) | (false, Match::No) => {}
            (true, _) => return Err(fail("should match but does not")),
            (false, Match::Yes) => return Err(fail("should not match but does")),
            (false, Match::Maybe) => {
                return Err(fail(
                    "should not match, but may (its words are not sure to be what runs, so it would be asked)",
                ));
            }
        }
    }
    Ok(())
}

/// The input an example stands for: a table is the whole input; a string is the command, the
/// path or the value at the pointer, whichever the rule reads.
fn input_of(rule: &Rule, example: &Value) -> Option<Value> {
    let text = match example {
        Value::Object(_) => return Some(example.clone()),
        Value::String(s) => s,
        _ => return None,
    };
    let w = rule.written();
    if w.command.is_some() {
        return Some(json!({"command": text}));
    }
    if w.path.is_some() {
        return Some(json!({"path": text}));
    }
    let pointer = &w.input.as_ref()?.pointer;
    let mut input = json!({});
    let mut at = &mut input;
    for token in pointer.split('/').skip(1) {
        let key = token.replace("~1", "/").replace("~0", "~");
        at = at.as_object_mut()?.entry(key).or_insert_with(|| json!({}));
    }
    *at = Value::String(text.clone());
    Some(input)
}

/// The tool an example is a call of: the rule's tool when it names one, else the shell for a
/// rule about commands.
fn tool_of(rule: &Rule) -> String {
    let w = rule.written();
    if !w.tool.contains(['*', '?', '[', '{']) {
        w.tool.clone()
    } else if w.command.is_some() {
        "exec_shell".into()
    } else {
        w.tool.clone()
    }
}
