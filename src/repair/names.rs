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

/// Resolves `called` against `catalog` (names the model may call, any order). Anything but an
/// exact name builds a [`NameIndex`]: for a catalog that is asked more than once, keep one
/// (the pipeline uses `Registry::name_index`).
pub fn resolve_name(called: &str, catalog: &[String], limits: NameLimits) -> NameResolution {
    if catalog.iter().any(|n| n == called) {
        return NameResolution::Exact(called.to_string());
    }
    NameIndex::new(catalog.iter().cloned()).resolve(called, limits, &|_| true)
}

type Forms = rustc_hash::FxHashMap<String, Vec<u32>>;

/// Catalog names with their normalized forms computed once, so each ladder step is a hash
/// lookup and suggestions compare only names of a near length. A registry generation keeps
/// one (`Registry::name_index`): a repaired or unknown name in a 1,000-tool catalog would
/// otherwise normalize every name on every call.
#[derive(Debug, Default)]
pub struct NameIndex {
    /// Sorted, deduplicated: every tie is broken by name order.
    names: Vec<String>,
    lower: Vec<Vec<char>>,
    /// Exact name, lowercase, separators, snake_case → indices into `names`, ascending.
    forms: [Forms; 4],
    /// snake_case forms, sorted, for the prefix step's range search.
    snake_sorted: Vec<(String, u32)>,
    /// Indices by the char count of their lowercase form.
    by_len: Vec<Vec<u32>>,
    /// The longest snake_case form, in bytes: no longer prefix of a called name can be one.
    longest_snake: usize,
}

impl NameIndex {
    /// An index of `names`.
    pub fn new(names: impl IntoIterator<Item = String>) -> Self {
        let mut names: Vec<String> = names.into_iter().collect();
        names.sort();
        names.dedup();
        let mut index = NameIndex::default();
        for (i, name) in names.iter().enumerate() {
            let i = i as u32;
            let lower = name.to_lowercase();
            let forms = [name.clone(), lower.clone(), separators(name), snake_case(name)];
            for (map, form) in index.forms.iter_mut().zip(forms) {
                map.entry(form).or_default().push(i);
            }
            let snake = snake_case(name);
            index.longest_snake = index.longest_snake.max(snake.len());
            index.snake_sorted.push((snake, i));
            let chars: Vec<char> = lower.chars().collect();
            if index.by_len.len() <= chars.len() {
                index.by_len.resize(chars.len() + 1, Vec::new());
            }
            index.by_len[chars.len()].push(i);
            index.lower.push(chars);
        }
        index.snake_sorted.sort();
        index.names = names;
        index
    }

    /// The ladder over the indexed names that `allowed` admits (the visible ones, say, or the
    /// deferred ones), with exactly the semantics of [`resolve_name`] over that subset.
    pub fn resolve(&self, called: &str, limits: NameLimits, allowed: &dyn Fn(&str) -> bool) -> NameResolution {
        let admitted = |ids: Option<&Vec<u32>>| -> Vec<u32> {
            ids.map(|v| v.iter().copied().filter(|i| allowed(&self.names[*i as usize])).collect())
                .unwrap_or_default()
        };
        if !admitted(self.forms[0].get(called)).is_empty() {
            return NameResolution::Exact(called.to_string());
        }
        let snake_called = snake_case(called);
        let suffixless = snake_called.strip_suffix("_tool").unwrap_or(&snake_called).to_string();
        let wants: [(&'static str, String, usize); 4] = [
            ("lowercase", called.to_lowercase(), 1),
            ("separators", separators(called), 2),
            ("snake_case", snake_called.clone(), 3),
            ("tool_suffix", suffixless, 3),
        ];
        for (step, want, form) in &wants {
            match admitted(self.forms[*form].get(want)).as_slice() {
                [] => {}
                [one] => {
                    return NameResolution::Repaired {
                        name: self.names[*one as usize].clone(),
                        step,
                    };
                }
                _ => return self.unknown(called, limits, allowed),
            }
        }
        let want = wants[3].1.as_str();
        if want.chars().count() >= limits.prefix_min_chars {
            let mut hits: Vec<u32> = Vec::new();
            // Names that start with what was written: a contiguous run of the sorted forms.
            let from = self.snake_sorted.partition_point(|(f, _)| f.as_str() < want);
            hits.extend(
                self.snake_sorted[from..]
                    .iter()
                    .take_while(|(f, _)| f.starts_with(want))
                    .map(|(_, i)| *i),
            );
            // Names that what was written starts with (long enough to mean something). Only
            // prefixes as long as an indexed name can be one: a megabyte of name costs no more
            // than a short one here.
            for (k, _) in want
                .char_indices()
                .skip(limits.prefix_min_chars)
                .take_while(|(k, _)| *k <= self.longest_snake)
            {
                if let Some(ids) = self.forms[3].get(&want[..k]) {
                    hits.extend(ids);
                }
            }
            hits.retain(|i| allowed(&self.names[*i as usize]));
            hits.sort_unstable();
            hits.dedup();
            if let [one] = hits.as_slice() {
                return NameResolution::Repaired {
                    name: self.names[*one as usize].clone(),
                    step: "prefix",
                };
            }
        }
        self.unknown(called, limits, allowed)
    }

    fn unknown(&self, called: &str, limits: NameLimits, allowed: &dyn Fn(&str) -> bool) -> NameResolution {
        let lc: Vec<char> = called.to_lowercase().chars().collect();
        let max = limits.max_distance;
        // Names whose length differs by more than the distance cannot be within it.
        let lens = lc.len().saturating_sub(max)..=lc.len() + max;
        let mut near: Vec<(usize, u32)> = lens
            .filter_map(|len| self.by_len.get(len))
            .flatten()
            .filter(|i| allowed(&self.names[**i as usize]))
            .filter_map(|i| bounded_levenshtein(&lc, &self.lower[*i as usize], max).map(|d| (d, *i)))
            .collect();
        // Indices follow name order, so ties go to the earlier name.
        near.sort_unstable();
        NameResolution::Unknown {
            suggestions: near
                .into_iter()
                .take(limits.max_suggestions)
                .map(|(_, i)| self.names[i as usize].clone())
                .collect(),
        }
    }
}

/// The edit distance of `a` and `b` if it is at most `max`. Stops as soon as every entry of
/// a row exceeds `max`: suggestions only care about near names, and most names are far.
fn bounded_levenshtein(a: &[char], b: &[char], max: usize) -> Option<usize> {
    if a.len().abs_diff(b.len()) > max {
        return None;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut row = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        row[0] = i + 1;
        let mut best = row[0];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            row[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(row[j] + 1);
            best = best.min(row[j + 1]);
        }
        if best > max {
            return None;
        }
        std::mem::swap(&mut prev, &mut row);
    }
    (prev[b.len()] <= max).then_some(prev[b.len()])
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
    fn bounded_distance_agrees_with_the_plain_one() {
        let words = [
            "read_file",
            "rite_file",
            "write_file",
            "",
            "a",
            "kitten",
            "sitting",
            "grep_files",
            "zzzzzzzz",
        ];
        for a in words {
            for b in words {
                let (ca, cb): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
                let plain = strsim::levenshtein(a, b);
                for max in 0..5 {
                    let expected = (plain <= max).then_some(plain);
                    assert_eq!(bounded_levenshtein(&ca, &cb, max), expected, "{a} / {b} within {max}");
                }
            }
        }
    }

    #[test]
    fn an_index_resolves_within_the_allowed_subset_only() {
        let index = NameIndex::new(catalog());
        let only_writes = |n: &str| n.starts_with("write");
        // `read_file` exists but is not allowed: unknown here, with allowed suggestions only.
        assert_eq!(
            index.resolve("rite_file", LIMITS, &only_writes),
            NameResolution::Unknown {
                suggestions: vec!["write_file".into()]
            }
        );
        // `read` is ambiguous over the whole catalog but unique among the allowed names.
        let reads = |n: &str| n == "read_file";
        assert_eq!(index.resolve("read", LIMITS, &reads), fixed("read_file", "prefix"));
        assert!(matches!(
            index.resolve("read_file", LIMITS, &only_writes),
            NameResolution::Unknown { .. }
        ));
    }

    #[test]
    fn snake_case_keeps_acronyms() {
        assert_eq!(snake_case("getHTTPResponse"), "get_http_response");
        assert_eq!(snake_case("HTTPGet"), "http_get");
        assert_eq!(snake_case("readFile2Now"), "read_file2_now");
        assert_eq!(snake_case("already_snake"), "already_snake");
    }
}
