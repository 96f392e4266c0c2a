//! What a client is told when rmcp could not read its message as the method it names.
//!
//! rmcp reads a request whose params do not fit its method (a `tools/call` whose `arguments`
//! is an array, one without a `name`) as a custom request, and its default answer is "method
//! not found" with the method's name as the whole message: a client would look for a typo in
//! `tools/call`. Over HTTP, a body that is not JSON, or not a JSON-RPC message, was answered
//! `415 Unsupported Media Type` with serde's words. Here each gets the JSON-RPC error that
//! names the problem: invalid params (-32602) saying which field is wrong, method not found
//! (-32601) saying what is served, parse error (-32700) or invalid request (-32600).
//!
//! On stdio (`stdio.rs`) a line that is JSON but not a message rmcp reads gets the same
//! errors, under the id it carries (rmcp answered `Invalid request` without one, which no
//! client can match to its request). Unparsable lines stay unanswered, as rmcp and the other
//! official SDKs leave them: they carry no id to answer, and a peer that echoes errors back
//! would start a storm.

use rmcp::model::ErrorCode;
use rmcp::service::RxJsonRpcMessage;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

/// The methods whose params rmcp reads into a type of its own: one of them reaching the custom
/// handler had params of the wrong shape.
const TYPED: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "subscriptions/listen",
    "tools/list",
    "tools/call",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "resources/directory/read",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "skills/list",
    "skills/get",
];

/// The error for a request rmcp handed over as custom: `method` with `params`.
pub(super) fn custom_request(method: &str, params: Option<&Value>) -> ErrorData {
    if !TYPED.contains(&method) {
        return ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("method not found: `{method}`; toolslot serves tools (tools/list, tools/call) and ping"),
            None,
        );
    }
    let reason = match method {
        "tools/call" => call_params(params),
        _ => format!("the params of `{method}` do not have the shape the protocol defines for it"),
    };
    ErrorData::new(ErrorCode::INVALID_PARAMS, reason, None)
}

/// Why `tools/call` params could not be read, naming the field.
fn call_params(params: Option<&Value>) -> String {
    let Some(Value::Object(params)) = params else {
        return format!(
            "`tools/call` needs params: an object with the tool's `name` and its `arguments` (got {})",
            kind(params)
        );
    };
    match params.get("name") {
        Some(Value::String(_)) => {}
        None => return "`tools/call` params have no `name` (the tool to call)".into(),
        other => return format!("`name` in `tools/call` params must be a string (got {})", kind(other)),
    }
    for (field, what) in [("arguments", "the tool's arguments by name"), ("_meta", "metadata")] {
        match params.get(field) {
            None | Some(Value::Null) | Some(Value::Object(_)) => {}
            other => return format!("`{field}` in `tools/call` params must be an object of {what} (got {})", kind(other)),
        }
    }
    match serde_json::from_value::<rmcp::model::CallToolRequestParams>(Value::Object(params.clone())) {
        Err(e) => format!("`tools/call` params cannot be read: {e}"),
        // Read here but not by rmcp: the message as a whole did not fit.
        Ok(_) => "`tools/call` could not be read as a request (check `jsonrpc`, `id` and `params`)".into(),
    }
}

/// A JSON value's kind, as a message names it.
fn kind(value: Option<&Value>) -> &'static str {
    match value {
        None => "none",
        Some(Value::Null) => "null",
        Some(Value::Bool(_)) => "a boolean",
        Some(Value::Number(_)) => "a number",
        Some(Value::String(_)) => "a string",
        Some(Value::Array(_)) => "an array",
        Some(Value::Object(_)) => "an object",
    }
}

/// The JSON-RPC error answering an HTTP body rmcp could not read as one client message; for a
/// batch that holds requests, one error under each request's id (a batch's answer is an array).
pub(super) fn unreadable_body(body: &[u8]) -> Value {
    let (code, message) = match serde_json::from_slice::<Value>(body) {
        Err(e) => (ErrorCode::PARSE_ERROR, format!("parse error: the body is not JSON ({e})")),
        Ok(Value::Array(batch)) => {
            let errors: Vec<Value> = request_ids(&batch)
                .into_iter()
                .map(|id| json!({"jsonrpc": "2.0", "id": id, "error": {"code": ErrorCode::INVALID_REQUEST.0, "message": BATCH_REFUSED}}))
                .collect();
            if !errors.is_empty() {
                return Value::Array(errors);
            }
            (ErrorCode::INVALID_REQUEST, BATCH_REFUSED.to_string())
        }
        Ok(_) => (
            ErrorCode::INVALID_REQUEST,
            "invalid request: the body is not a JSON-RPC 2.0 message (`\"jsonrpc\": \"2.0\"`, and a `method` with an `id` for a request, without one for a notification)"
                .to_string(),
        ),
    };
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": code.0, "message": message}})
}

/// What one line from a client on stdio is.
pub(super) enum Line {
    /// A message for rmcp.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Nothing to pass on or answer: blank, not JSON, or a notification or answer that cannot
    /// be read (nobody waits for a word about it).
    Skip,
    /// A request that cannot be read: its id and the error that answers it.
    Refused {
        /// The request's id, as it came.
        id: Value,
        /// The JSON-RPC error code.
        code: i32,
        /// What is wrong, in words.
        message: String,
    },
    /// A batch (a JSON array), which the protocol no longer has: the ids of the requests in
    /// it, each to be told so (a client that sent one waits for each of its requests).
    Batch(Vec<Value>),
}

/// What each request of a batch is told.
pub(super) const BATCH_REFUSED: &str = "invalid request: a batch (a JSON array) is not accepted; send each message on its own";

/// The ids of a batch's requests (its members with a `method` and an id).
fn request_ids(batch: &[Value]) -> Vec<Value> {
    batch
        .iter()
        .filter(|m| m.get("method").is_some())
        .filter_map(|m| m.get("id").filter(|id| !id.is_null()).cloned())
        .collect()
}

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Reads one line a client sent (its newline included).
pub(super) fn read_line(line: &[u8]) -> Line {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(UTF8_BOM).unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Line::Skip;
    }
    let error = match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
        Ok(m) => return Line::Message(Box::new(m)),
        Err(e) => e,
    };
    let message = match serde_json::from_slice::<Value>(line) {
        Ok(Value::Object(message)) => message,
        Ok(Value::Array(batch)) => {
            let ids = request_ids(&batch);
            tracing::debug!(requests = ids.len(), "a batch from the MCP client was refused");
            return if ids.is_empty() { Line::Skip } else { Line::Batch(ids) };
        }
        _ => {
            tracing::debug!(%error, "a line from the MCP client that is not a JSON object was skipped");
            return Line::Skip;
        }
    };
    let Some(id) = message.get("id").filter(|id| !id.is_null()).cloned() else {
        tracing::debug!(%error, "a notification or answer from the MCP client that cannot be read was skipped");
        return Line::Skip;
    };
    let Some(method) = message.get("method") else {
        tracing::debug!(%error, "an answer from the MCP client that cannot be read was skipped");
        return Line::Skip;
    };
    let invalid = |why: String| Line::Refused {
        id: id.clone(),
        code: ErrorCode::INVALID_REQUEST.0,
        message: format!("invalid request: {why}"),
    };
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid("not a JSON-RPC 2.0 message (`\"jsonrpc\": \"2.0\"`, and a `method` with an `id` for a request)".into());
    }
    let Some(method) = method.as_str() else {
        return invalid(format!("`method` must be a string (got {})", kind(Some(method))));
    };
    if !(id.is_string() || id.is_i64() || id.is_u64()) {
        return invalid(format!("`id` must be a string or an integer (got {})", kind(Some(&id))));
    }
    if TYPED.contains(&method) {
        let e = custom_request(method, message.get("params"));
        return Line::Refused {
            id,
            code: e.code.0,
            message: e.message.into_owned(),
        };
    }
    invalid(format!("the message cannot be read: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(method: &str, params: Value) -> (i32, String) {
        let e = custom_request(method, Some(&params));
        (e.code.0, e.message.to_string())
    }

    #[test]
    fn a_call_with_params_of_the_wrong_shape_is_told_which_field() {
        for (params, says) in [
            (
                json!({"name": "read_file", "arguments": [1, 2]}),
                "`arguments` in `tools/call` params must be an object of the tool's arguments by name (got an array)",
            ),
            (json!({"arguments": {}}), "`tools/call` params have no `name` (the tool to call)"),
            (json!({"name": 7}), "`name` in `tools/call` params must be a string (got a number)"),
            (
                json!([]),
                "`tools/call` needs params: an object with the tool's `name` and its `arguments` (got an array)",
            ),
            (
                json!({"name": "x", "_meta": "m"}),
                "`_meta` in `tools/call` params must be an object of metadata (got a string)",
            ),
            (json!({"name": "x", "requestState": 5}), "`tools/call` params cannot be read: "),
        ] {
            let (code, text) = message("tools/call", params.clone());
            assert_eq!(code, -32602, "{params}");
            assert!(text.starts_with(says), "{params}: {text}");
        }
        let e = custom_request("tools/call", None);
        assert_eq!(
            (e.code.0, e.message.as_ref()),
            (
                -32602,
                "`tools/call` needs params: an object with the tool's `name` and its `arguments` (got none)"
            )
        );
    }

    #[test]
    fn other_methods_say_what_is_wrong() {
        let (code, text) = message("initialize", json!({}));
        assert_eq!(code, -32602);
        assert!(text.contains("`initialize`"), "{text}");
        let (code, text) = message("tools/cal", json!({}));
        assert_eq!(code, -32601);
        assert!(text.contains("`tools/cal`") && text.contains("tools/call"), "{text}");
    }

    #[test]
    fn an_unreadable_body_gets_a_json_rpc_error() {
        for (body, code, says) in [
            (&b"garbage"[..], -32700, "parse error: the body is not JSON"),
            (
                b"[{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}]",
                -32600,
                "a batch",
            ),
            (b"{\"id\":1,\"method\":\"ping\"}", -32600, "not a JSON-RPC 2.0 message"),
        ] {
            let answer = unreadable_body(body);
            assert_eq!(answer["error"]["code"], code, "{answer}");
            assert!(answer["error"]["message"].as_str().unwrap().contains(says), "{answer}");
            assert_eq!(answer["id"], Value::Null);
        }
        // A batch of requests: each is told under its own id.
        let answer = unreadable_body(
            b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"},{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"tools/list\"}]",
        );
        let answers = answer.as_array().expect("an array of answers");
        assert_eq!(answers.len(), 2, "{answer}");
        for (a, id) in answers.iter().zip([json!(1), json!("x")]) {
            assert_eq!((a["id"].clone(), a["error"]["code"].clone()), (id, json!(-32600)), "{answer}");
            assert!(a["error"]["message"].as_str().unwrap().contains("a batch"), "{answer}");
        }
    }
}
