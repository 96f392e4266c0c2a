//! The three kinds of glob a rule holds, compiled once by globset (ripgrep's matcher).

use globset::{GlobBuilder, GlobMatcher};

/// How a glob's `*` treats `/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// Tool names and argument values: `*` matches any text, `/` included (`https://x/*`).
    Text,
    /// Paths: `*` stays within one component, `**` crosses any number.
    Path,
}

/// A compiled glob and the text it came from.
#[derive(Debug, Clone)]
pub(super) struct Glob {
    matcher: GlobMatcher,
    /// The components before the first one holding a wildcard (`secrets/**` → `secrets`),
    /// for a path glob: a directory that holds them holds what the glob matches.
    fixed: Vec<String>,
    /// The glob names absolute paths.
    absolute: bool,
}

impl Glob {
    /// Compiles `text`.
    pub(super) fn new(text: &str, kind: Kind) -> Result<Self, String> {
        let matcher = GlobBuilder::new(text)
            .literal_separator(kind == Kind::Path)
            .backslash_escape(true)
            .build()
            .map_err(|e| format!("bad glob `{text}`: {}", e.kind()))?
            .compile_matcher();
        let fixed = if kind == Kind::Path {
            text.split('/')
                .filter(|c| !c.is_empty() && *c != ".")
                .take_while(|c| !c.contains(['*', '?', '[', '{', '\\']))
                .map(str::to_string)
                .collect()
        } else {
            Vec::new()
        };
        Ok(Self {
            matcher,
            fixed,
            absolute: text.starts_with('/'),
        })
    }

    /// Whether `text` matches.
    pub(super) fn is_match(&self, text: &str) -> bool {
        self.matcher.is_match(text)
    }

    /// The components before the first one holding a wildcard (`secrets/**` → `secrets`).
    pub(super) fn fixed(&self) -> &[String] {
        &self.fixed
    }

    /// The glob as written.
    pub(super) fn text(&self) -> &str {
        self.matcher.glob().glob()
    }

    /// Whether it names absolute paths.
    pub(super) fn is_absolute(&self) -> bool {
        self.absolute
    }

    /// Whether the folder `path` (components relative to the workspace, or an absolute path's)
    /// holds what this glob names: `secrets` holds `secrets/**`. The workspace root (no
    /// components) holds everything and is not counted, or every `ls .` would match.
    pub(super) fn is_held_by(&self, path: &str) -> bool {
        let parts: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        let absolute = path.starts_with('/');
        if parts.is_empty() || parts.len() > self.fixed.len() || absolute != self.absolute {
            return false;
        }
        parts.iter().zip(&self.fixed).all(|(a, b)| a == b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_globs_keep_to_components_and_text_globs_do_not() {
        let p = Glob::new("secrets/*", Kind::Path).unwrap();
        assert!(p.is_match("secrets/a"));
        assert!(!p.is_match("secrets/a/b"));
        let p = Glob::new("**/.env", Kind::Path).unwrap();
        assert!(p.is_match(".env") && p.is_match("a/b/.env"));
        let t = Glob::new("https://example.com/*", Kind::Text).unwrap();
        assert!(t.is_match("https://example.com/a/b"));
        assert!(Glob::new("a[", Kind::Text).is_err());
    }

    #[test]
    fn a_folder_holds_the_fixed_start_of_a_glob() {
        let p = Glob::new("secrets/keys/**", Kind::Path).unwrap();
        assert!(p.is_held_by("secrets") && p.is_held_by("secrets/keys"));
        assert!(!p.is_held_by("") && !p.is_held_by("src") && !p.is_held_by("secrets/other"));
        assert!(!Glob::new("**/.env", Kind::Path).unwrap().is_held_by("src"));
        let abs = Glob::new("/etc/ssl/**", Kind::Path).unwrap();
        assert!(abs.is_held_by("/etc") && !abs.is_held_by("etc"));
    }
}
