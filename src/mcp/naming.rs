//! `<prefix>__<tool>` names, valid for every provider, deterministic, and one server's only.
//!
//! A server's prefix is its name, sanitized. Two servers could still name one tool (`a` +
//! `b__c` and `a__b` + `c`; `my.srv` and `my_srv`), so prefixes are settled from the
//! configuration, in its order, before any server starts: a prefix that would let one name
//! belong to two servers (one is the other's, up to a `__`) is given to the server listed
//! first, and the later one gets its name with `__` runs made single and `_2` (or the next
//! free number) appended. Names then depend on
//! the configuration alone, never on which server lists first.

use crate::config::McpServerConfig;
use crate::tool_name::sanitize_tool_name;

/// The catalog name of `tool` under `prefix`: `<prefix>__<tool>`, sanitized to
/// `^[a-zA-Z0-9_-]{1,64}$`; a name that would be longer is cut and given a short hash of the
/// full name, so the same tool always gets the same name and two long names do not collide.
pub fn tool_name(prefix: &str, tool: &str) -> String {
    let full = format!("{prefix}__{tool}");
    let clean = clean(&full);
    if clean.len() <= 64 && !clean.is_empty() {
        return clean;
    }
    hashed_name(prefix, tool)
}

/// The cut-and-hashed form of `<prefix>__<tool>` (what a long name gets), also what a tool
/// gets when its plain name is taken by another tool of the same server.
pub fn hashed_name(prefix: &str, tool: &str) -> String {
    let full = format!("{prefix}__{tool}");
    let hash = fnv1a(full.as_bytes());
    let keep: String = clean(&full).chars().take(64 - 9).collect();
    sanitize_tool_name(&format!("{keep}_{hash:08x}"))
}

fn clean(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The prefix of each server, in configuration order, and for a server that could not have
/// its plain name, why.
pub fn server_prefixes(servers: &[McpServerConfig]) -> Vec<(String, Option<String>)> {
    let mut taken: Vec<(String, &str)> = Vec::new();
    let mut out = Vec::with_capacity(servers.len());
    for s in servers {
        let base = {
            let c = clean(&s.name);
            if c.is_empty() { "server".to_string() } else { c }
        };
        let clash = |p: &str, taken: &[(String, &str)]| -> Option<String> {
            let mine = format!("{p}__");
            taken
                .iter()
                .find(|(other, _)| {
                    let theirs = format!("{other}__");
                    mine.starts_with(&theirs) || theirs.starts_with(&mine)
                })
                .map(|(_, name)| name.to_string())
        };
        let (prefix, note) = match clash(&base, &taken) {
            None => (base, None),
            Some(first) => {
                // Without a `__` of its own, the new prefix can only clash by equality or by
                // being the start of another's; a number settles that.
                let mut collapsed = String::with_capacity(base.len());
                for c in base.chars() {
                    if !(c == '_' && collapsed.ends_with('_')) {
                        collapsed.push(c);
                    }
                }
                let mut n = 2;
                let free = loop {
                    let candidate = format!("{collapsed}_{n}");
                    if clash(&candidate, &taken).is_none() {
                        break candidate;
                    }
                    n += 1;
                };
                let note = format!(
                    "MCP server `{}` has its tools named `{free}__…`: `{base}__…` could also name tools of server `{first}`, listed before it in the configuration",
                    s.name
                );
                (free, Some(note))
            }
        };
        taken.push((prefix.clone(), s.name.as_str()));
        out.push((prefix, note));
    }
    out
}

/// FNV-1a, 32 bits: tiny, stable across versions and platforms (a std hasher is not).
pub(crate) fn fnv1a(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_and_deterministic() {
        assert_eq!(tool_name("git", "git_status"), "git__git_status");
        assert_eq!(tool_name("my_server", "do.thing"), "my_server__do_thing");
        let long = tool_name("a-very-long-server-name-indeed", "and_an_even_longer_tool_name_that_goes_on_and_on");
        assert_eq!(long.len(), 64);
        assert_eq!(
            long,
            tool_name("a-very-long-server-name-indeed", "and_an_even_longer_tool_name_that_goes_on_and_on")
        );
        let other = tool_name("a-very-long-server-name-indeed", "and_an_even_longer_tool_name_that_goes_on_and_ox");
        assert_ne!(long, other, "a one-letter difference past the cut still differs");
        assert!(crate::tool_name::is_valid_tool_name(&long));
    }

    fn servers(names: &[&str]) -> Vec<McpServerConfig> {
        names
            .iter()
            .map(|n| serde_json::from_value(serde_json::json!({"name": n, "command": ["x"]})).unwrap())
            .collect()
    }

    #[test]
    fn prefixes_never_let_two_servers_share_a_name() {
        let p = server_prefixes(&servers(&["a", "a__b", "my.srv", "my_srv", "git", "gitx"]));
        let prefixes: Vec<&str> = p.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(prefixes, vec!["a", "a_b_2", "my_srv", "my_srv_2", "git", "gitx"]);
        assert!(p[1].1.as_deref().unwrap().contains("server `a`"));
        assert!(p[4].1.is_none() && p[5].1.is_none());
        // The order of the configuration decides, whichever order the servers start in.
        let p = server_prefixes(&servers(&["a__b", "a"]));
        assert_eq!(p[0].0, "a__b");
        assert_eq!(p[1].0, "a_2");
        assert_ne!(tool_name(&p[0].0, "c"), tool_name(&p[1].0, "b__c"));
    }
}
