//! Ranking deferred tools for a query: BM25 with name splitting, stemming and synonyms.
//!
//! Plain BM25 over names and descriptions misses the queries agents actually write:
//! paraphrases ("remove a folder" for `delete_directory`) and task-level requests ("what
//! changed in the repo" for `git_diff`). Three additions close most of that gap, each cheap:
//! names are split into words (`git_diff_unstaged` → git, diff, unstaged; `readFile` → read,
//! file) and weighted above description words; words are reduced to a crude stem so
//! "listing" meets "list"; and query words are expanded through a small table of synonyms
//! common in tool descriptions, at a lower weight than the word itself. Hand-written rather
//! than a BM25 crate because the expansion and field weights are the part that matters and
//! the index is a few hundred documents at most.

use std::collections::HashMap;

pub use crate::tool::SearchHit;
use crate::tool::ToolFinder;

struct Doc {
    name: String,
    summary: String,
    /// Term → weighted frequency (name terms count more than description terms).
    terms: HashMap<String, f64>,
    len: f64,
}

/// An immutable BM25 index over tool names and descriptions.
pub struct SearchIndex {
    plain: bool,
    docs: Vec<Doc>,
    /// Term → number of documents containing it.
    df: HashMap<String, usize>,
    avg_len: f64,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex").field("docs", &self.docs.len()).finish()
    }
}

// BM25's usual constants: k1 saturates repeated terms, b normalizes by length.
const K1: f64 = 1.2;
const B: f64 = 0.75;
// A word of the name says more about a tool than a word of its description.
const NAME_WEIGHT: f64 = 3.0;
// A synonym is evidence, but weaker than the word the agent actually wrote.
const SYNONYM_WEIGHT: f64 = 0.6;

impl SearchIndex {
    /// Indexes `(name, description)` pairs.
    pub fn new(tools: Vec<(String, String)>) -> Self {
        Self::build(tools, false)
    }

    /// Plain BM25 over the same text (words split on non-alphanumerics, lowercased; no name
    /// weighting, stemming or synonyms): the baseline the evaluation compares against.
    pub fn plain(tools: Vec<(String, String)>) -> Self {
        Self::build(tools, true)
    }

    fn build(tools: Vec<(String, String)>, plain: bool) -> Self {
        let tok = |t: &str| if plain { plain_tokens(t) } else { tokenize(t) };
        let name_weight = if plain { 1.0 } else { NAME_WEIGHT };
        let mut docs = Vec::with_capacity(tools.len());
        let mut df: HashMap<String, usize> = HashMap::new();
        for (name, description) in tools {
            let mut terms: HashMap<String, f64> = HashMap::new();
            for t in tok(&name) {
                *terms.entry(t).or_default() += name_weight;
            }
            for t in tok(&description) {
                *terms.entry(t).or_default() += 1.0;
            }
            for t in terms.keys() {
                *df.entry(t.clone()).or_default() += 1;
            }
            let len = terms.values().sum();
            docs.push(Doc {
                summary: summary(&description),
                name,
                terms,
                len,
            });
        }
        let avg_len = if docs.is_empty() {
            1.0
        } else {
            docs.iter().map(|d| d.len).sum::<f64>() / docs.len() as f64
        };
        Self { plain, docs, df, avg_len }
    }

    /// How many tools are indexed.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether the index is empty.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// The best `top` matches for `query`, best first; ties by name, so results are stable.
    pub fn search(&self, query: &str, top: usize) -> Vec<SearchHit> {
        let mut weights: HashMap<String, f64> = HashMap::new();
        if self.plain {
            for t in plain_tokens(query) {
                weights.insert(t, 1.0);
            }
        }
        for t in if self.plain { Vec::new() } else { tokenize(query) } {
            for syn in synonyms(&t) {
                let s = stem(syn);
                let w = weights.entry(s).or_default();
                *w = w.max(SYNONYM_WEIGHT);
            }
            let w = weights.entry(t).or_default();
            *w = w.max(1.0);
        }
        let n = self.docs.len() as f64;
        let mut hits: Vec<SearchHit> = self
            .docs
            .iter()
            .filter_map(|doc| {
                let mut score = 0.0;
                for (term, qw) in &weights {
                    let Some(tf) = doc.terms.get(term) else {
                        continue;
                    };
                    let df = *self.df.get(term).unwrap_or(&0) as f64;
                    let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                    score += qw * idf * (tf * (K1 + 1.0)) / (tf + K1 * (1.0 - B + B * doc.len / self.avg_len));
                }
                (score > 0.0).then(|| SearchHit {
                    name: doc.name.clone(),
                    score,
                    summary: doc.summary.clone(),
                })
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.name.cmp(&b.name)));
        hits.truncate(top);
        hits
    }
}

fn summary(description: &str) -> String {
    let first = description.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    let end = first.find(". ").map(|i| i + 1).unwrap_or(first.len());
    let s = &first[..end];
    if s.chars().count() > 160 {
        let mut cut: String = s.chars().take(159).collect();
        cut.push('…');
        cut
    } else {
        s.to_string()
    }
}

fn plain_tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Splits on non-alphanumerics and camelCase, lowercases, drops stop words, stems.
pub(crate) fn tokenize(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut prev: Option<char> = None;
    for c in text.chars() {
        if c.is_alphanumeric() {
            let boundary = prev.is_some_and(|p| p.is_lowercase() && c.is_uppercase());
            if boundary && !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            cur.extend(c.to_lowercase());
        } else if !cur.is_empty() {
            words.push(std::mem::take(&mut cur));
        }
        prev = Some(c);
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
        .into_iter()
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .map(|w| stem(&w))
        .collect()
}

const STOP_WORDS: &[&str] = &[
    "a", "an", "the", "of", "to", "in", "on", "for", "and", "or", "is", "are", "be", "with", "by", "it", "this", "that", "i", "me", "my",
    "we", "you", "your", "can", "how", "do", "does", "what", "which", "some", "all", "from", "at", "as", "if", "into", "want", "need",
    "please", "tool", "tools", "using", "use",
];

/// A crude suffix stripper: enough that "listing", "lists" and "listed" meet "list".
pub(crate) fn stem(word: &str) -> String {
    let w = word;
    for (suffix, min_len) in [("ies", 4), ("ing", 5), ("ed", 4), ("es", 4), ("s", 3)] {
        if w.len() > min_len && w.ends_with(suffix) && !w.ends_with("ss") {
            let base = &w[..w.len() - suffix.len()];
            return if suffix == "ies" { format!("{base}y") } else { base.to_string() };
        }
    }
    w.to_string()
}

/// Words agents use for the same thing in tool descriptions. Each group is symmetric.
const SYNONYM_GROUPS: &[&[&str]] = &[
    &["delete", "remove", "erase", "rm", "unlink", "drop", "forget"],
    &["directory", "folder", "dir", "directories"],
    &["file", "document", "files"],
    &[
        "read", "open", "view", "show", "display", "cat", "content", "contents", "get", "dump", "print",
    ],
    &["write", "save", "create", "store", "put"],
    &["edit", "modify", "change", "update", "replace", "patch"],
    &["list", "enumerate", "ls", "show"],
    &["search", "find", "grep", "lookup", "query", "locate"],
    &["fetch", "download", "url", "web", "http", "page", "website", "internet", "browse"],
    &["run", "execute", "exec", "shell", "command", "launch"],
    &["move", "rename", "mv", "relocate"],
    &["copy", "duplicate", "cp"],
    &["time", "clock", "date", "now", "current"],
    &[
        "timezone", "zone", "tz", "utc", "gmt", "pst", "pdt", "est", "edt", "cet", "cest", "ist", "jst",
    ],
    &["convert", "translate"],
    &["history", "log"],
    &["commit", "snapshot", "record"],
    &["git", "version", "repository", "repo"],
    &["diff", "difference", "changes", "changed", "compare"],
    &["stage", "add", "staged", "index"],
    &["branch", "checkout", "switch"],
    &[
        "memory",
        "remember",
        "knowledge",
        "graph",
        "entity",
        "entities",
        "note",
        "person",
        "people",
    ],
    &["relation", "relationship", "link", "connect", "colleague"],
    &["observation", "fact", "detail"],
    &[
        "size",
        "metadata",
        "info",
        "information",
        "stat",
        "details",
        "modified",
        "permissions",
    ],
    &["tree", "recursive", "structure", "hierarchy"],
    &["entire", "whole", "complete", "full"],
    &["echo", "repeat", "back"],
    &["sum", "add", "total", "plus", "arithmetic"],
    &["image", "picture", "photo", "png", "jpg", "jpeg", "screenshot", "media"],
    &["compress", "zip", "gzip", "archive"],
    &["resource", "resources"],
    &["prompt", "template"],
    &["status", "state", "working"],
    &["reset", "unstage", "undo"],
];

fn synonyms(term: &str) -> impl Iterator<Item = &'static str> + '_ {
    SYNONYM_GROUPS
        .iter()
        .filter(move |g| g.iter().any(|w| stem(w) == term))
        .flat_map(|g| g.iter().copied())
}

impl ToolFinder for SearchIndex {
    fn search(&self, query: &str, top: usize) -> Vec<SearchHit> {
        SearchIndex::search(self, query, top)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> SearchIndex {
        SearchIndex::new(vec![
            (
                "filesystem__read_text_file".into(),
                "Read the complete contents of a file as text.".into(),
            ),
            (
                "filesystem__list_directory".into(),
                "Get a detailed listing of all files and directories in a specified path.".into(),
            ),
            ("filesystem__move_file".into(), "Move or rename files and directories.".into()),
            (
                "git__git_diff_unstaged".into(),
                "Shows changes in the working directory that are not yet staged".into(),
            ),
            ("git__git_log".into(), "Shows the commit logs".into()),
            ("time__get_current_time".into(), "Get current time in a specific timezones".into()),
            ("time__convert_time".into(), "Convert time between timezones".into()),
        ])
    }

    #[track_caller]
    fn check(query: &str, expected_top: &str) {
        let hits = index().search(query, 3);
        assert!(
            hits.iter().any(|h| h.name == expected_top),
            "{query:?}: expected {expected_top} in the top 3, got {:?}",
            hits.iter().map(|h| &h.name).collect::<Vec<_>>()
        );
    }

    #[test]
    fn paraphrases_find_the_tool() {
        check("show me what's in a folder", "filesystem__list_directory");
        check("rename a file", "filesystem__move_file");
        check("what changed that I haven't staged", "git__git_diff_unstaged");
        check("recent commit history", "git__git_log");
        check("what time is it in Tokyo", "time__get_current_time");
        check("open a file and show its contents", "filesystem__read_text_file");
    }

    #[test]
    fn tokenizer_splits_names() {
        assert_eq!(
            tokenize("readFile git_diff-unstaged"),
            vec!["read", "file", "git", "diff", "unstag"]
        );
    }

    #[test]
    fn results_are_deterministic_and_bounded() {
        let a = index().search("file", 2);
        let b = index().search("file", 2);
        assert_eq!(a, b);
        assert_eq!(a.len(), 2);
        assert!(index().search("zzzz", 5).is_empty());
    }
}
