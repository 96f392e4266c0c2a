//! What a query names rather than asks for: a file, a path, a revision, a site, a person, quoted
//! text, a regular expression, a sum. Each is a word the tool is given, and says which tools take it.

/// What a name (a capitalized word no tool mentions) stands for: a named thing, usually a
/// person, an organization or a project: a named entity, which tools take by name.
pub(super) const NAME_MEANS: &[&str] = &["name", "entity"];

/// What an identifier (a hash or an id of letters and digits) stands for.
pub(super) const IDENTIFIER_MEANS: &[&str] = &["revision", "id", "hash", "reference"];

/// Whether a query word is a proper name: capitalized, the rest lowercase letters (`API` and
/// `JSON` are acronyms, `readFile` is an identifier).
pub(super) fn looks_like_proper_name(word: &str) -> bool {
    // "Ivan's": the possessive belongs to the sentence.
    let word = word.strip_suffix("'s").or_else(|| word.strip_suffix("’s")).unwrap_or(word);
    let mut chars = word.chars();
    chars.next().is_some_and(char::is_uppercase) && word.chars().count() > 1 && chars.all(char::is_lowercase)
}

/// Whether a query word is an identifier: letters and digits mixed, six or more, as a commit
/// hash or a ticket id is written (not a version number, a year or a plain word).
pub(super) fn looks_like_identifier(word: &str) -> bool {
    // A short commit hash (`9f2e1`): git abbreviates to a few hex digits; a word and a number
    // run together (`dec25`, `add12`) start with three letters, which a hash rarely does.
    let letters_first = word.chars().take(3).all(|c| c.is_ascii_alphabetic());
    let short_hash = word.len() >= 5 && word.chars().all(|c| c.is_ascii_hexdigit()) && !letters_first;
    (word.len() >= 6 || short_hash)
        && word.chars().all(|c| c.is_ascii_alphanumeric())
        && word.chars().any(|c| c.is_ascii_digit())
        && word.chars().any(|c| c.is_ascii_alphabetic())
}

/// Top-level domains that say a word is a site (`github.com`), not a file; `.rs` and `.py`
/// are files even where a site uses them, so only these count.
const SITE_DOMAINS: &[&str] = &["com", "org", "net", "io", "dev", "ai", "app", "edu", "gov", "info", "co"];

/// What a site named in a request stands for.
pub(super) const HOST_MEANS: &[&str] = &["web", "url", "fetch"];

/// Whether a query word names a site: `host.tld` with a known domain, alone or with a path
/// (`github.com/org/repo`).
pub(super) fn looks_like_host(word: &str) -> bool {
    let host = word.split('/').next().unwrap_or(word);
    let host = host.strip_prefix("www.").unwrap_or(host);
    host.rsplit_once('.').is_some_and(|(name, tld)| {
        !name.is_empty() && SITE_DOMAINS.contains(&tld) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
    })
}

/// What quoted words in a request stand for: text to find as written.
pub(super) const QUOTE_MEANS: &[&str] = &["text", "search", "grep"];

/// The words the query quotes ('connection refused', "TODO"), if it quotes any: a quote mark
/// that opens after a space and closes before one; an apostrophe ("don't", "the users' list")
/// opens or closes nothing. One pass: each mark remembers where it last opened.
pub(super) fn quoted_text(query: &str) -> Option<String> {
    let chars: Vec<char> = query.chars().collect();
    let opens =
        |i: usize| (i == 0 || chars[i - 1].is_whitespace() || chars[i - 1] == '(') && chars.get(i + 1).is_some_and(|c| !c.is_whitespace());
    let closes =
        |i: usize| i > 0 && !chars[i - 1].is_whitespace() && chars.get(i + 1).is_none_or(|c| c.is_whitespace() || ",.;:!?)".contains(*c));
    const MARKS: [char; 3] = ['\'', '"', '`'];
    let mut open: [Option<usize>; 3] = [None; 3];
    for (i, c) in chars.iter().enumerate() {
        let Some(m) = MARKS.iter().position(|q| q == c) else {
            continue;
        };
        match open[m] {
            Some(start) if closes(i) => return Some(chars[start + 1..i].iter().collect()),
            None if opens(i) => open[m] = Some(i),
            _ => {}
        }
    }
    None
}

/// What an arithmetic expression stands for.
pub(super) const ARITHMETIC_MEANS: &[&str] = &["sum", "add", "calculate"];

/// Whether a query word is arithmetic: an operator alone or between numbers (`+`, `17+25`).
/// A slash is left out: `03/14/2024` is a date and `24/7` a phrase.
pub(super) fn looks_like_arithmetic(word: &str) -> bool {
    matches!(word, "+" | "*" | "×" | "÷")
        || (word.chars().any(|c| "+*".contains(c))
            && word.chars().all(|c| c.is_ascii_digit() || "+-*.".contains(c))
            && word.chars().any(|c| c.is_ascii_digit()))
}

/// What a range of revisions stands for: two points of history to compare.
pub(super) const RANGE_MEANS: &[&str] = &["compare", "difference", "branch", "commit"];

/// What asking whether a path is one kind of thing or another stands for.
pub(super) const KIND_MEANS: &[&str] = &["type", "metadata", "info"];

/// What a regular expression in a request stands for.
pub(super) const REGEX_MEANS: &[&str] = &["regex", "pattern", "search"];

/// Whether a query word is a regular expression: an escape (`\s`, `\d`, `\b`) or a
/// wildcard run (`.*`, `.+`) that prose and file names never hold.
pub(super) fn looks_like_regex(word: &str) -> bool {
    // `C:\Users\bob\src` holds `\U`, `\b` and `\s` as path separators.
    let windows_path = word.as_bytes().get(1..3) == Some(b":\\");
    !windows_path && ["\\s", "\\d", "\\w", "\\b", ".*", ".+", "[^"].iter().any(|m| word.contains(m))
}

/// What a path without a file extension stands for.
pub(super) const PATH_MEANS: &[&str] = &["path", "directory"];

/// Whether a query word is a path: segments joined by `/` (not a URL, not "and/or"-like
/// prose of two short words).
pub(super) fn looks_like_path(word: &str) -> bool {
    // A date (`03/14/2024`) has no letter; `github.com/org` is a site.
    word.contains('/')
        && !word.contains("://")
        && word.chars().any(|c| c.is_alphabetic())
        && !looks_like_host(word)
        && word.chars().all(|c| c.is_alphanumeric() || "/._-~*".contains(c))
        && (word.matches('/').count() > 1 || word.ends_with('/') || word.starts_with(['/', '.', '~']) || word.contains(['.', '_', '-']))
}

/// Whether a word, as typed, names a git revision: `HEAD` and its ancestors (`HEAD~3`,
/// `HEAD^`, `main~2`) or a version tag (`v1.2`, `v2.0.1`).
pub(super) fn looks_like_revision(word: &str) -> bool {
    let base = word.split(['~', '^']).next().unwrap_or("");
    // `2^10` is arithmetic: a revision's name has a letter.
    let ancestry = word.len() > base.len()
        && base.chars().any(|c| c.is_alphabetic())
        && word[base.len()..].chars().all(|c| c == '~' || c == '^' || c.is_ascii_digit());
    let tag = word
        .strip_prefix(['v', 'V'])
        .is_some_and(|v| v.contains('.') && v.split('.').all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())));
    // `main..HEAD`, `v1.2...v1.3`: a range between two revisions.
    // Not `../src` or `src/../lib`, which are paths, nor `10..20`, which is numbers.
    let range = word.split_once("..").is_some_and(|(a, b)| {
        let b = b.trim_start_matches('.');
        let named = |s: &str| s.chars().any(|c| c.is_alphabetic());
        named(a) && !a.ends_with('/') && named(b) && !b.starts_with('/')
    });
    (base == "HEAD" && (word.len() == 4 || ancestry)) || (ancestry && !base.is_empty()) || tag || range
}

/// Whether a query word names a file: `name.ext`, with a short alphanumeric extension (not
/// a version number or a sentence's end).
pub(super) fn looks_like_file_name(word: &str) -> bool {
    if WELL_KNOWN_FILES.contains(&word.rsplit('/').next().unwrap_or(word).to_lowercase().as_str()) {
        return true;
    }
    let Some((stem, ext)) = word.rsplit_once('.') else {
        return false;
    };
    // `.tsx` alone names a kind of file.
    let stem = stem.rsplit('/').next().unwrap_or(stem);
    (!stem.is_empty() || word.starts_with('.'))
        && (1..=8).contains(&ext.len())
        && ext.chars().all(|c| c.is_ascii_alphanumeric())
        && ext.chars().any(|c| c.is_ascii_alphabetic())
        && !word.contains("://")
        // `../src/main.rs` is a file; `main..HEAD` is a range of revisions.
        && !word.split('/').any(|s| s.contains("..") && s != "..")
        && !looks_like_host(word)
}

/// Files that projects name without an extension: a word like these is a file, not a name.
const WELL_KNOWN_FILES: &[&str] = &[
    "makefile",
    "dockerfile",
    "containerfile",
    "jenkinsfile",
    "procfile",
    "gemfile",
    "rakefile",
    "vagrantfile",
    "pipfile",
    "justfile",
    "brewfile",
    "readme",
    "license",
    "licence",
    "changelog",
    "codeowners",
];

/// File extensions that say what kind of content a file holds.
pub(super) const MEDIA_EXTENSIONS: &[(&[&str], &str)] = &[
    (&["png", "jpg", "jpeg", "gif", "webp", "bmp", "svg", "ico", "tiff"], "image"),
    (&["mp3", "wav", "ogg", "flac", "m4a", "aac"], "audio"),
    (&["mp4", "mov", "webm", "mkv", "avi"], "video"),
];
