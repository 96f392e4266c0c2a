//! `<server>__<tool>` names, valid for every provider, deterministic.

use crate::tool_name::sanitize_tool_name;

/// The catalog name of `tool` on `server`: `<server>__<tool>`, sanitized to
/// `^[a-zA-Z0-9_-]{1,64}$`; a name that would be longer is cut and given a short hash of the
/// full name, so the same tool always gets the same name and two long names do not collide.
pub fn tool_name(server: &str, tool: &str) -> String {
    let full = format!("{server}__{tool}");
    let clean: String = full
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.len() <= 64 && !clean.is_empty() {
        return clean;
    }
    let hash = fnv1a(full.as_bytes());
    let keep: String = clean.chars().take(64 - 9).collect();
    sanitize_tool_name(&format!("{keep}_{hash:08x}"))
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
        assert_eq!(tool_name("my server", "do.thing"), "my_server__do_thing");
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
}
