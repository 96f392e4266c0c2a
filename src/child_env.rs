//! The environment of a process the model drives (exec_shell commands, extension programs):
//! a small core of the host's variables, never its secrets.
//!
//! Hosts run with API keys, tokens, database URLs and webhook addresses in their environment,
//! and a command the model wrote can print them (`env`, `echo $DATABASE_URL`) straight into the
//! conversation. A denylist of secret-looking names always misses one, so a child gets only the
//! variables `shell.env_core` names (PATH, HOME, LANG, …) that `shell.env_exclude` does not
//! match, plus those the host passes on purpose (`shell.env_passthrough`, an extension's
//! `env_passthrough`). MCP servers are programs the user configured, not commands the model
//! wrote: they keep the full environment.

/// Which of the host's variables a child gets.
#[derive(Debug, Clone, Copy)]
pub struct EnvPolicy<'a> {
    /// Passed when `exclude` matches none (case-insensitive globs).
    pub core: &'a [String],
    /// Never passed from the core (case-insensitive globs).
    pub exclude: &'a [String],
    /// Passed whatever `exclude` says (case-insensitive globs): the host's explicit choice.
    pub passthrough: &'a [String],
    /// Passed as well: the names one program was given (an extension's `env_passthrough`).
    pub keep: &'a [String],
}

/// The variables of `vars` a child may see under `policy`.
pub fn filtered(vars: impl IntoIterator<Item = (String, String)>, policy: EnvPolicy<'_>) -> Vec<(String, String)> {
    let upper = |globs: &[String]| -> Vec<String> { globs.iter().map(|p| p.to_ascii_uppercase()).collect() };
    let (core, exclude, passthrough) = (upper(policy.core), upper(policy.exclude), upper(policy.passthrough));
    vars.into_iter()
        .filter(|(name, _)| {
            let n = name.to_ascii_uppercase();
            let any = |globs: &[String]| globs.iter().any(|p| glob(p, &n));
            policy.keep.iter().any(|k| k == name) || any(&passthrough) || (any(&core) && !any(&exclude))
        })
        .collect()
}

/// The host's variables a child gets under `policy`, its `PATH` holding absolute folders only
/// ([`absolute_path`]).
pub fn for_child(policy: EnvPolicy<'_>) -> Vec<(String, String)> {
    let mut vars = filtered(std::env::vars(), policy);
    for (name, value) in &mut vars {
        if name == "PATH" {
            *value = absolute_path(value);
        }
    }
    vars
}

/// `path` (a `PATH` value) without its empty and relative entries.
///
/// An empty entry means the current folder and a relative one (`node_modules/.bin`) is looked
/// up from it: where toolslot or a command runs in the checkout, a program of that name in the
/// repository would run in place of the one the host meant (toolslot's own `bwrap`; the `sh`
/// or `git` of a command the user approved by its words).
///
/// None left gives the system's folders: an empty `PATH` means the current folder to `execvp`.
pub fn absolute_path(path: &str) -> String {
    let kept = path.split(':').filter(|d| d.starts_with('/')).collect::<Vec<_>>().join(":");
    if kept.is_empty() { "/usr/bin:/bin".to_string() } else { kept }
}

/// The absolute folders of the host's `PATH`, in order: where toolslot itself looks for a
/// program (see [`absolute_path`] for why the others are passed over).
pub fn host_path_dirs() -> Vec<std::path::PathBuf> {
    std::env::var_os("PATH").map(|p| path_dirs(&p)).unwrap_or_default()
}

/// The first executable file named `name` in an absolute folder of the host's PATH (the
/// folders a command's `PATH` keeps).
pub fn on_host_path(name: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    host_path_dirs()
        .into_iter()
        .map(|d| d.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// The absolute folders of the `PATH` value `path`, in order (see [`absolute_path`] for why
/// the others are passed over).
pub fn path_dirs(path: &std::ffi::OsStr) -> Vec<std::path::PathBuf> {
    std::env::split_paths(path).filter(|d| d.is_absolute()).collect()
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

    fn strings(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_the_core_less_secrets_and_the_chosen_pass() {
        let core = strings(&["PATH", "HOME", "LANG", "LC_*"]);
        let exclude = strings(&["*KEY*", "*TOKEN*"]);
        let passthrough = strings(&["SSH_AUTH_SOCK", "MY_*"]);
        let kept = filtered(
            vars(&[
                "PATH",
                "HOME",
                "LC_ALL",
                "OPENAI_API_KEY",
                "DATABASE_URL",
                "MYSQL_PWD",
                "SENTRY_DSN",
                "SSH_AUTH_SOCK",
                "MY_TOKEN",
                "EXT_ONLY",
                "lang",
            ]),
            EnvPolicy {
                core: &core,
                exclude: &exclude,
                passthrough: &passthrough,
                keep: &strings(&["EXT_ONLY"]),
            },
        );
        let names: Vec<&str> = kept.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            vec!["PATH", "HOME", "LC_ALL", "SSH_AUTH_SOCK", "MY_TOKEN", "EXT_ONLY", "lang"]
        );
    }

    #[test]
    fn the_built_in_core_lets_no_secret_through() {
        let cfg = crate::config::Config::builtin();
        let s = &cfg.shell;
        let kept = filtered(
            vars(&[
                "PATH",
                "DATABASE_URL",
                "MYSQL_PWD",
                "GITHUB_AUTH",
                "AUTHORIZATION",
                "SENTRY_DSN",
                "TLS_PEM",
                "SLACK_WEBHOOK_URL",
                "AWS_SECRET_ACCESS_KEY",
                "LC_PASSWORD",
            ]),
            EnvPolicy {
                core: &s.env_core,
                exclude: &s.env_exclude,
                passthrough: &s.env_passthrough,
                keep: &[],
            },
        );
        assert_eq!(kept, vec![("PATH".to_string(), "v".to_string())]);
    }

    #[test]
    fn a_childs_path_holds_absolute_folders_only() {
        assert_eq!(absolute_path("node_modules/.bin::/usr/bin:.:bin:/bin:"), "/usr/bin:/bin");
        assert_eq!(absolute_path(""), "/usr/bin:/bin");
        assert_eq!(absolute_path("::node_modules/.bin"), "/usr/bin:/bin");
        assert_eq!(absolute_path("/opt/tool/bin"), "/opt/tool/bin");
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
