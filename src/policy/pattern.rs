//! A glob in a shell argument is a set of paths, not a name: `cat secret?/prod.key` reads
//! `secrets/prod.key`.
//!
//! A path rule matches such an argument as the paths it can expand to: those it expands to now
//! ([`expand`], read from the folders its command may run in, so a rule sees `secrets/prod.key`
//! and matches with certainty), and, since the line may make others before it runs, every path
//! it *could* name: when the argument's pattern and the rule's glob can both match one path, or
//! the pattern can name a folder holding what the glob names ([`may_name`]), the rule may
//! match (a doubt, so the call is asked).
//!
//! Both are decided on the patterns' own characters (`*`, `?`, `[…]`, and the rule's `**` and
//! `{a,b}`), by walking the two patterns together: no path is guessed.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::glob::Glob;

/// The most folder entries one argument's expansion reads: past it, what was found is kept and
/// the doubt ([`may_name`]) still applies.
const MAX_ENTRIES: usize = 4096;

/// The most alternatives a rule's braces expand into before the rest is taken as matching.
const MAX_ALTERNATIVES: usize = 64;

/// One position of a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    /// This character.
    Lit(char),
    /// Any one character but `/`.
    Any,
    /// Any characters but `/`, none included.
    Star,
    /// Any characters, `/` included (a rule's `**`; bash's with `globstar`).
    GlobStar,
    /// One character of (or, negated, not of) these ranges, never `/`.
    Class(Vec<(char, char)>, bool),
}

/// Whether `text` holds a glob character a shell expands: `*`, `?`, or `[` with a `]` after
/// (read as the shell's judgement reads a program word).
pub(super) fn is_pattern(text: &str) -> bool {
    crate::shell::has_glob(text)
}

/// Whether the shell pattern `pattern` (an argument, spelled as the rule's paths are) can name
/// a path `glob` matches, or a folder holding what it names (`secret?` for `secrets/**`).
pub(super) fn may_name(glob: &Glob, pattern: &str) -> bool {
    let p = tokens(pattern);
    let alternatives = alternatives(glob.text());
    let Some(alternatives) = alternatives else {
        return true;
    };
    if alternatives.iter().any(|g| intersects(&p, &tokens(g))) {
        return true;
    }
    // A folder that holds the glob's fixed start (`secrets` for `secrets/**`).
    let fixed = glob.fixed();
    (1..=fixed.len()).any(|k| {
        let start: Vec<Tok> = fixed[..k].join("/").chars().map(Tok::Lit).collect();
        intersects(&p, &start)
    })
}

/// The paths a shell pattern expands to now, from `base` (the folder its command runs in) when
/// it is relative: absolute paths, at most what [`MAX_ENTRIES`] entries read can find.
pub(super) fn expand(base: &Path, pattern: &str) -> Vec<PathBuf> {
    let (mut found, rest) = match pattern.strip_prefix('/') {
        Some(rest) => (vec![PathBuf::from("/")], rest),
        None => (vec![base.to_path_buf()], pattern),
    };
    let mut budget = MAX_ENTRIES;
    for part in rest.split('/').filter(|p| !p.is_empty()) {
        if !is_pattern(part) {
            let literal = unescape(part);
            found = found.into_iter().map(|f| f.join(&literal)).collect();
            continue;
        }
        let want = tokens(part);
        let mut next = Vec::new();
        for dir in &found {
            let Ok(entries) = std::fs::read_dir(dir) else { continue };
            for entry in entries.flatten() {
                if budget == 0 {
                    break;
                }
                budget -= 1;
                let name = entry.file_name().to_string_lossy().into_owned();
                let named: Vec<Tok> = name.chars().map(Tok::Lit).collect();
                if intersects(&want, &named) {
                    next.push(dir.join(&name));
                }
            }
        }
        found = next;
    }
    found.retain(|f| f.symlink_metadata().is_ok());
    found
}

/// A pattern's backslash escapes removed.
fn unescape(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        out.push(if c == '\\' { chars.next().unwrap_or('\\') } else { c });
    }
    out
}

/// A rule's glob with its braces expanded (`{a,b}/x` → `a/x`, `b/x`); `None` past
/// [`MAX_ALTERNATIVES`] or for braces that do not close (then anything may match).
fn alternatives(glob: &str) -> Option<Vec<String>> {
    let mut out = vec![String::new()];
    let chars: Vec<char> = glob.chars().collect();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        if c == '\\' {
            let next = chars.get(i + 1).copied().unwrap_or('\\');
            out.iter_mut().for_each(|o| {
                o.push('\\');
                o.push(next);
            });
            i += 2;
            continue;
        }
        if c != '{' {
            out.iter_mut().for_each(|o| o.push(c));
            i += 1;
            continue;
        }
        let close = chars[i..].iter().position(|&c| c == '}')? + i;
        let inner: String = chars[i + 1..close].iter().collect();
        let options: Vec<&str> = inner.split(',').collect();
        let mut next = Vec::new();
        for o in &out {
            for opt in &options {
                next.push(format!("{o}{opt}"));
            }
        }
        if next.len() > MAX_ALTERNATIVES {
            return None;
        }
        out = next;
        i = close + 1;
    }
    Some(out)
}

/// A pattern as positions. `**` is any characters across folders, in a rule's glob and in an
/// argument too (bash's `globstar`: taking it so only widens what may match).
fn tokens(pattern: &str) -> Vec<Tok> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        i += 1;
        match c {
            '\\' => {
                out.push(Tok::Lit(chars.get(i).copied().unwrap_or('\\')));
                i += 1;
            }
            '*' => {
                if chars.get(i) == Some(&'*') {
                    while chars.get(i) == Some(&'*') {
                        i += 1;
                    }
                    out.push(Tok::GlobStar);
                } else {
                    out.push(Tok::Star);
                }
            }
            '?' => out.push(Tok::Any),
            '[' => match class(&chars, i) {
                Some((tok, next)) => {
                    out.push(tok);
                    i = next;
                }
                None => out.push(Tok::Lit('[')),
            },
            c => out.push(Tok::Lit(c)),
        }
    }
    out
}

/// A bracket expression starting just after its `[`: the class and the index after its `]`.
fn class(chars: &[char], mut i: usize) -> Option<(Tok, usize)> {
    let negated = matches!(chars.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    let mut first = true;
    loop {
        let c = *chars.get(i)?;
        if c == ']' && !first {
            return Some((Tok::Class(ranges, negated), i + 1));
        }
        first = false;
        let c = if c == '\\' {
            i += 1;
            *chars.get(i)?
        } else {
            c
        };
        if let (Some('-'), Some(&end)) = (chars.get(i + 1), chars.get(i + 2))
            && end != ']'
        {
            ranges.push((c, end));
            i += 3;
        } else {
            ranges.push((c, c));
            i += 1;
        }
    }
}

/// Whether some path matches both patterns: their positions walked together.
fn intersects(p: &[Tok], g: &[Tok]) -> bool {
    let mut seen = HashSet::new();
    let mut todo = vec![(0usize, 0usize)];
    while let Some((i, j)) = todo.pop() {
        if !seen.insert((i, j)) {
            continue;
        }
        if i == p.len() && j == g.len() {
            return true;
        }
        let repeats = |t: Option<&Tok>| matches!(t, Some(Tok::Star | Tok::GlobStar));
        if repeats(p.get(i)) {
            todo.push((i + 1, j));
        }
        if repeats(g.get(j)) {
            todo.push((i, j + 1));
        }
        if let (Some(a), Some(b)) = (p.get(i), g.get(j))
            && compatible(a, b)
        {
            let ni = if repeats(Some(a)) { i } else { i + 1 };
            let nj = if repeats(Some(b)) { j } else { j + 1 };
            todo.push((ni, nj));
        }
    }
    false
}

/// Whether one character can stand at both positions.
fn compatible(a: &Tok, b: &Tok) -> bool {
    let mut candidates: Vec<char> = vec!['\u{e000}', 'a', '0', '.', '/'];
    for t in [a, b] {
        match t {
            Tok::Lit(c) => candidates.push(*c),
            Tok::Class(ranges, _) => {
                for &(lo, hi) in ranges {
                    let span = (hi as u32).saturating_sub(lo as u32);
                    if span > 256 {
                        // Too wide to list: take it as meeting anything it may.
                        return true;
                    }
                    candidates.extend((lo as u32..=hi as u32).filter_map(char::from_u32));
                }
            }
            Tok::Any | Tok::Star | Tok::GlobStar => {}
        }
    }
    candidates.iter().any(|&c| accepts(a, c) && accepts(b, c))
}

/// Whether position `t` takes the character `c`.
fn accepts(t: &Tok, c: char) -> bool {
    match t {
        Tok::Lit(l) => *l == c,
        Tok::Any | Tok::Star => c != '/',
        Tok::GlobStar => true,
        Tok::Class(ranges, negated) => c != '/' && (ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated),
    }
}

#[cfg(test)]
mod tests {
    use super::super::glob::Kind;
    use super::*;

    fn glob(text: &str) -> Glob {
        Glob::new(text, Kind::Path).unwrap()
    }

    #[test]
    fn a_pattern_may_name_what_a_glob_names() {
        let secrets = glob("secrets/**");
        for p in [
            "secret?/prod.key",
            "*/prod.key",
            "s*/*",
            "[s]ecrets/x",
            "secrets/*",
            "secret?",
            "*",
            "[!x]ecrets",
            "se[a-z]rets/k",
            "**/x",
        ] {
            assert!(may_name(&secrets, p), "{p}");
        }
        for p in ["src/*.rs", "*.md", "secret?x/k", "[!s]ecrets/x", "docs/*/x", "secrets?", "s?"] {
            assert!(!may_name(&secrets, p), "{p}");
        }
        let env = glob("**/.env");
        assert!(may_name(&env, "config/.e?v"));
        assert!(may_name(&env, "*/.env"));
        assert!(!may_name(&env, "*.rs"));
        let braces = glob("{secrets,keys}/*.pem");
        assert!(may_name(&braces, "k*/a.pem"));
        assert!(!may_name(&braces, "k*/a.txt"));
        let absolute = glob("/etc/**");
        assert!(may_name(&absolute, "/e?c/passwd"));
        assert!(!may_name(&absolute, "e?c/passwd"));
    }

    #[test]
    fn patterns_expand_to_the_files_there_are() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join("secrets")).unwrap();
        std::fs::write(ws.path().join("secrets/prod.key"), "k").unwrap();
        std::fs::write(ws.path().join("README.md"), "r").unwrap();
        let names = |p: &str| {
            let mut v: Vec<String> = expand(ws.path(), p)
                .into_iter()
                .map(|f| f.strip_prefix(ws.path()).unwrap().display().to_string())
                .collect();
            v.sort();
            v
        };
        assert_eq!(names("secret?/prod.key"), vec!["secrets/prod.key"]);
        assert_eq!(names("*/prod.key"), vec!["secrets/prod.key"]);
        assert_eq!(names("[s]ecrets/*"), vec!["secrets/prod.key"]);
        assert_eq!(names("*"), vec!["README.md", "secrets"]);
        assert_eq!(names("nothing*"), Vec::<String>::new());
        assert_eq!(names("*.md"), vec!["README.md"]);
    }

    #[test]
    fn only_unescaped_wildcards_make_a_pattern() {
        for t in ["a*", "?", "x[ab]"] {
            assert!(is_pattern(t), "{t}");
        }
        for t in ["a", "a\\*", "[", "a[b"] {
            assert!(!is_pattern(t), "{t}");
        }
    }
}
