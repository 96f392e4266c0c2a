//! The environment of a process the model drives (exec_shell commands, extension programs):
//! the host's, less its secrets.
//!
//! Hosts run with API keys and tokens in their environment, and a command the model wrote
//! can print them (`env`, `echo $OPENAI_API_KEY`) straight into the conversation. Variables
//! whose names match `shell.env_exclude` are therefore not passed on; an extension that needs
//! one names it in its `env_passthrough`. MCP servers are programs the user configured, not
//! commands the model wrote: they keep the full environment.

/// The variables of `vars` a child may see: those whose names match none of `exclude`
/// (case-insensitive globs, `*` for any run of characters), plus those named in `keep`.
pub fn filtered(vars: impl IntoIterator<Item = (String, String)>, exclude: &[String], keep: &[String]) -> Vec<(String, String)> {
    let exclude: Vec<String> = exclude.iter().map(|p| p.to_ascii_uppercase()).collect();
    vars.into_iter()
        .filter(|(name, _)| {
            let upper = name.to_ascii_uppercase();
            keep.iter().any(|k| k == name) || !exclude.iter().any(|p| glob(p, &upper))
        })
        .collect()
}

/// Sets `cmd`'s environment to the host's, filtered (see [`filtered`]).
pub fn apply(cmd: &mut tokio::process::Command, exclude: &[String], keep: &[String]) {
    cmd.env_clear().envs(filtered(std::env::vars(), exclude, keep));
}

/// Whether `text` matches `pattern`, where `*` stands for any run of characters (case-sensitive;
/// callers fold case where they want it folded).
pub fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, rest) = match parts.split_first() {
        Some(p) => p,
        None => return text.is_empty(),
    };
    let Some(mut remaining) = text.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        // No `*`: the whole text must be the pattern.
        return remaining.is_empty();
    };
    for part in middle {
        match remaining.find(part) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    remaining.len() >= last.len() && remaining.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(names: &[&str]) -> Vec<(String, String)> {
        names.iter().map(|n| (n.to_string(), "v".to_string())).collect()
    }

    #[test]
    fn secrets_are_dropped_and_the_rest_kept() {
        let exclude: Vec<String> = ["*KEY*", "*TOKEN*", "*SECRET*", "AWS_*"].iter().map(|s| s.to_string()).collect();
        let kept = filtered(
            vars(&[
                "PATH",
                "HOME",
                "OPENAI_API_KEY",
                "github_token",
                "MY_SECRET_THING",
                "AWS_REGION",
                "KEYBOARD_LAYOUT",
                "LANG",
            ]),
            &exclude,
            &["AWS_REGION".to_string()],
        );
        let names: Vec<&str> = kept.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, vec!["PATH", "HOME", "AWS_REGION", "LANG"]);
    }

    #[test]
    fn globs_match_whole_names() {
        assert!(glob("*KEY*", "API_KEY"));
        assert!(glob("*KEY*", "KEY"));
        assert!(glob("AWS_*", "AWS_X"));
        assert!(!glob("AWS_*", "MY_AWS_X"));
        assert!(glob("A*B*C", "AXXBYYC"));
        assert!(!glob("A*B*C", "AXXBYY"));
        assert!(glob("EXACT", "EXACT"));
        assert!(!glob("EXACT", "EXACTLY"));
        assert!(!glob("A*A", "A"), "the two ends may not overlap");
    }
}
