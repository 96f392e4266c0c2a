//! Tool names every provider accepts: the check admission applies, and the cleaning that
//! makes any string (an MCP server's name, a session id used as a folder name) one.
//!
//! Pure helpers on the ground floor, so the registry, the MCP adapter and the built-ins can
//! all stand on them without importing each other.

/// Checks a tool name against `^[a-zA-Z0-9_-]{1,64}$`, the rule every provider accepts.
pub fn is_valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Turns any string into a valid tool name (invalid characters become `_`, cut to 64).
pub fn sanitize_tool_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if out.is_empty() {
        out.push_str("unnamed_tool");
    }
    out
}
