//! Answers to a server's questions (elicitation): what a host's answer must be before it goes
//! back to the server.

use serde_json::Value;

/// Checks the content of an accepted answer against the schema the server requested: an
/// object, matching the schema (its types, formats, enums, required properties).
///
/// # Errors
/// A one-line reason naming the property that is wrong.
pub fn check_answer(schema: &Value, content: &Value) -> Result<(), String> {
    if !content.is_object() {
        return Err("`content` must be an object with the requested properties".into());
    }
    // A server's schema that does not compile cannot be checked; the server checks its answer.
    let Ok(validator) = jsonschema::options().should_validate_formats(true).build(schema) else {
        return Ok(());
    };
    match validator.validate(content) {
        Ok(()) => Ok(()),
        Err(e) => {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { String::new() } else { format!(" at `{at}`") };
            Err(format!("the answer does not match the requested schema{at}: {e}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_must_match_the_requested_schema() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer", "minimum": 0},
            "email": {"type": "string", "format": "email"},
            "color": {"type": "string", "enum": ["red", "blue"]}
        }, "required": ["name"]});
        assert!(
            check_answer(
                &schema,
                &json!({"name": "Ada", "age": 36, "email": "ada@example.org", "color": "red"})
            )
            .is_ok()
        );
        for (content, says) in [
            (json!({"age": 3}), "\"name\" is a required property"),
            (json!({"name": "Ada", "age": -1}), "at `/age`"),
            (json!({"name": "Ada", "email": "not an address"}), "at `/email`"),
            (json!({"name": "Ada", "color": "green"}), "at `/color`"),
            (json!("Ada"), "must be an object"),
        ] {
            let e = check_answer(&schema, &content).unwrap_err();
            assert!(e.contains(says), "{content}: {e}");
        }
    }
}
