//! The tool-name ladder: resolving the name a model wrote to a catalog name.
//!
//! exact → lowercase → hyphens and spaces to underscores → CamelCase to snake_case (acronyms
//! kept together: `HTTPGet` → `http_get`) → one `_tool` suffix stripped → prefix match of at
//! least `prefix_min_chars` characters when exactly one name starts with it or is a prefix
//! of it. Catalog names are compared in the same normalized form, so `web_fetch` finds
//! `WebFetch`. Every step looks for exactly one hit: two hits resolve nothing, because a
//! guess between two tools is how a model ends up deleting instead of reading.
//! Deterministic: the catalog is sorted and no hash-map order is involved.

/// What the ladder made of a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameResolution {
    /// The name is a catalog name.
    Exact(String),
    /// The name resolved to `name` at `step`.
    Repaired {
        /// The catalog name.
        name: String,
        /// The ladder step (`lowercase`, `separators`, `snake_case`, `tool_suffix`, `prefix`).
        step: &'static str,
    },
    /// No catalog name; the nearest ones, nearest first.
    Unknown {
        /// Suggestions within the edit distance, at most the configured number.
        suggestions: Vec<String>,
    },
}

/// Limits of the ladder and its suggestions (from `[names]` in the config).
#[derive(Debug, Clone, Copy)]
pub struct NameLimits {
    /// Largest edit distance of a suggestion.
    pub max_distance: usize,
    /// Most suggestions.
    pub max_suggestions: usize,
    /// Shortest prefix resolved.
    pub prefix_min_chars: usize,
}

impl From<&crate::config::NamesConfig> for NameLimits {
    fn from(c: &crate::config::NamesConfig) -> Self {
        Self {
            max_distance: c.suggest_max_distance,
            max_suggestions: c.suggest_max,
            prefix_min_chars: c.prefix_min_chars,
        }
    }
}

/// Resolves `called` against `catalog` (names the model may call, any order).
pub fn resolve_name(called: &str, catalog: &[String], limits: NameLimits) -> NameResolution {
    if catalog.iter().any(|n| n == called) {
        return NameResolution::Exact(called.to_string());
    }
    let mut sorted: Vec<&String> = catalog.iter().collect();
    sorted.sort();
    // Each catalog name is normalized once per call, not once per step: [lowercase,
    // separators, snake_case]. The `_tool` suffix step compares against snake_case.
    let forms: Vec<[String; 3]> = sorted.iter().map(|n| [n.to_lowercase(), separators(n), snake_case(n)]).collect();
    let snake_called = snake_case(called);
    let wants: [(&'static str, String, usize); 4] = [
        ("lowercase", called.to_lowercase(), 0),
        ("separators", separators(called), 1),
        ("snake_case", snake_called.clone(), 2),
        (
            "tool_suffix",
            snake_called.strip_suffix("_tool").unwrap_or(&snake_called).to_string(),
            2,
        ),
    ];
    for (step, want, form) in &wants {
        let mut hits = forms.iter().enumerate().filter(|(_, f)| f[*form] == *want).map(|(i, _)| i);
        match (hits.next(), hits.next()) {
            (Some(one), None) => {
                return NameResolution::Repaired {
                    name: sorted[one].clone(),
                    step,
                };
            }
            (None, _) => {}
            (Some(_), Some(_)) => return unknown(called, &sorted, limits),
        }
    }
    let want = &wants[3].1;
    if want.chars().count() >= limits.prefix_min_chars {
        let mut hits = forms
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                f[2].starts_with(want.as_str()) || (f[2].chars().count() >= limits.prefix_min_chars && want.starts_with(f[2].as_str()))
            })
            .map(|(i, _)| i);
        if let (Some(one), None) = (hits.next(), hits.next()) {
            return NameResolution::Repaired {
                name: sorted[one].clone(),
                step: "prefix",
            };
        }
    }
    unknown(called, &sorted, limits)
}

fn unknown(called: &str, sorted: &[&String], limits: NameLimits) -> NameResolution {
    let lc = called.to_lowercase();
    let len = lc.chars().count();
    let mut near: Vec<(usize, &String)> = sorted
        .iter()
        // Names whose length differs by more than the distance cannot be within it: skipping
        // them keeps a 1,000-tool catalog from costing 1,000 edit distances.
        .filter(|n| n.chars().count().abs_diff(len) <= limits.max_distance)
        .map(|n| (strsim::levenshtein(&lc, &n.to_lowercase()), *n))
        .filter(|(d, _)| *d <= limits.max_distance)
        .collect();
    near.sort();
    NameResolution::Unknown {
        suggestions: near.into_iter().take(limits.max_suggestions).map(|(_, n)| n.clone()).collect(),
    }
}

fn separators(s: &str) -> String {
    let lowered = s.to_lowercase().replace(['-', ' ', '.'], "_");
    collapse_underscores(&lowered)
}

/// CamelCase → snake_case with acronyms kept together, separators unified.
pub fn snake_case(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c == '-' || c == ' ' || c == '.' {
            out.push('_');
            continue;
        }
        if c.is_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower) {
                out.push('_');
            }
        }
        out.extend(c.to_lowercase());
    }
    collapse_underscores(&out)
}

fn collapse_underscores(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '_' && out.ends_with('_') {
            continue;
        }
        out.push(c);
    }
    out.trim_matches('_').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: NameLimits = NameLimits {
        max_distance: 3,
        max_suggestions: 3,
        prefix_min_chars: 3,
    };

    fn catalog() -> Vec<String> {
        [
            "read_file",
            "read_mcp_resource",
            "write_file",
            "WebFetch",
            "http_get",
            "list_dir",
            "exec_shell",
            "grep_files",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    #[track_caller]
    fn check(called: &str, expected: NameResolution) {
        assert_eq!(resolve_name(called, &catalog(), LIMITS), expected, "{called}");
    }

    fn fixed(name: &str, step: &'static str) -> NameResolution {
        NameResolution::Repaired { name: name.into(), step }
    }

    #[test]
    fn ladder_cases() {
        check("read_file", NameResolution::Exact("read_file".into()));
        check("READ_FILE", fixed("read_file", "lowercase"));
        check("read-file", fixed("read_file", "separators"));
        check("read file", fixed("read_file", "separators"));
        check("ReadFile", fixed("read_file", "snake_case"));
        check("HTTPGet", fixed("http_get", "snake_case"));
        check("web_fetch", fixed("WebFetch", "snake_case"));
        check("read_file_tool", fixed("read_file", "tool_suffix"));
        check("ListDirTool", fixed("list_dir", "tool_suffix"));
        check("exec", fixed("exec_shell", "prefix"));
        check("grep", fixed("grep_files", "prefix"));
        check("write_file_now", fixed("write_file", "prefix"));
    }

    #[test]
    fn ambiguous_prefix_resolves_nothing() {
        match resolve_name("read", &catalog(), LIMITS) {
            NameResolution::Unknown { .. } => {}
            other => panic!("`read` must not resolve: {other:?}"),
        }
    }

    #[test]
    fn short_prefix_resolves_nothing() {
        assert!(matches!(resolve_name("ex", &catalog(), LIMITS), NameResolution::Unknown { .. }));
    }

    #[test]
    fn unknown_lists_nearest_first_ties_by_name() {
        assert_eq!(
            resolve_name("rite_file", &catalog(), LIMITS),
            NameResolution::Unknown {
                suggestions: vec!["write_file".into(), "read_file".into()]
            }
        );
        assert_eq!(
            resolve_name("zzzzzzzz", &catalog(), LIMITS),
            NameResolution::Unknown { suggestions: vec![] }
        );
    }

    #[test]
    fn deterministic_whatever_the_catalog_order() {
        let mut reversed = catalog();
        reversed.reverse();
        for called in ["read", "rite_file", "HTTPGet", "grep"] {
            assert_eq!(resolve_name(called, &catalog(), LIMITS), resolve_name(called, &reversed, LIMITS));
        }
    }

    #[test]
    fn snake_case_keeps_acronyms() {
        assert_eq!(snake_case("getHTTPResponse"), "get_http_response");
        assert_eq!(snake_case("HTTPGet"), "http_get");
        assert_eq!(snake_case("readFile2Now"), "read_file2_now");
        assert_eq!(snake_case("already_snake"), "already_snake");
    }
}
