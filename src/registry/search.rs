//! Ranking deferred tools for a query: BM25 with name splitting, stemming and synonyms, over
//! everything a tool declares.
//!
//! Plain BM25 over names and descriptions misses the queries agents actually write:
//! paraphrases ("remove a folder" for `delete_directory`) and task-level requests ("what
//! changed in the repo" for `git_diff`). Four additions close most of that gap, each cheap:
//! names are split into words (`git_diff_unstaged` → git, diff, unstaged; `readFile` → read,
//! file) and weighted above description words; what the tool declares beyond its description
//! is indexed too (an MCP title, its parameters' names, descriptions and allowed values:
//! `start_timestamp` answers "since yesterday"); words are reduced to a crude stem so
//! "listing" meets "list"; and query words are expanded through a small table of synonyms
//! common in tool descriptions, at a lower weight than the word itself. The query is read as
//! an agent writes it: what it names (a file, a glob, a person, a commit id) is a word the tool
//! takes rather than words to match, a question asks for a read or a search, and a word meets
//! its other forms in the index's vocabulary (`subscribe`, `subscriber`). Hand-written rather
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
// A word of the name says more about a tool than a word of its description (the server
// prefix of an MCP tool's name counts as a description word).
const NAME_WEIGHT: f64 = 3.0;
// A title restates the name for people, usually in plainer words.
const TITLE_WEIGHT: f64 = 1.0;
// A parameter's name says what the tool works on; its description and allowed values say
// more, but in many more words.
const PARAM_NAME_WEIGHT: f64 = 1.0;
const PARAM_TEXT_WEIGHT: f64 = 0.5;
/// How deep into an input schema's nested properties the index reads: the fields of the
/// objects a tool takes (an entity's `name` and `observations`), not whole data models.
const SCHEMA_DEPTH: usize = 3;

/// What tool_search indexes of one tool.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchDoc {
    /// The tool's name.
    pub name: String,
    /// Its title, when it declares one.
    pub title: Option<String>,
    /// Its description (as the model sees it).
    pub description: String,
    /// The names of its input's properties (nested ones included).
    pub params: Vec<String>,
    /// Their descriptions, titles and allowed values.
    pub param_text: Vec<String>,
}

impl SearchDoc {
    /// A tool known by its name and description alone.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            ..Self::default()
        }
    }

    /// With its title.
    pub fn with_title(mut self, title: Option<&str>) -> Self {
        self.title = title.map(str::to_string);
        self
    }

    /// With what its input schema declares: property names, descriptions, titles and enum
    /// values, through objects and arrays of objects.
    pub fn with_schema(mut self, schema: &serde_json::Value) -> Self {
        self.read_schema(schema, SCHEMA_DEPTH);
        self
    }

    fn read_schema(&mut self, schema: &serde_json::Value, depth: usize) {
        if depth == 0 {
            return;
        }
        if let Some(items) = schema.get("items") {
            self.read_schema(items, depth);
        }
        let Some(props) = schema.get("properties").and_then(serde_json::Value::as_object) else {
            return;
        };
        for (key, prop) in props {
            self.params.push(key.clone());
            for field in ["description", "title"] {
                if let Some(text) = prop.get(field).and_then(serde_json::Value::as_str) {
                    self.param_text.push(text.to_string());
                }
            }
            if let Some(values) = prop.get("enum").and_then(serde_json::Value::as_array) {
                self.param_text
                    .extend(values.iter().filter_map(serde_json::Value::as_str).map(str::to_string));
            }
            self.read_schema(prop, depth - 1);
        }
    }
}
// A synonym is evidence, but weaker than the word the agent actually wrote.
const SYNONYM_WEIGHT: f64 = 0.6;

impl SearchIndex {
    /// Indexes `(name, description)` pairs.
    pub fn new(tools: Vec<(String, String)>) -> Self {
        Self::from_docs(tools.into_iter().map(|(n, d)| SearchDoc::new(n, d)).collect())
    }

    /// Indexes what each tool declares (see [`SearchDoc`]).
    pub fn from_docs(docs: Vec<SearchDoc>) -> Self {
        Self::build(docs, false)
    }

    /// Plain BM25 over names and descriptions (words split on non-alphanumerics, lowercased;
    /// no name weighting, declared fields, stemming or synonyms): the baseline the evaluation
    /// compares against.
    pub fn plain(tools: Vec<(String, String)>) -> Self {
        Self::build(tools.into_iter().map(|(n, d)| SearchDoc::new(n, d)).collect(), true)
    }

    fn build(tools: Vec<SearchDoc>, plain: bool) -> Self {
        let tok = |t: &str| if plain { plain_tokens(t) } else { tokenize(t) };
        let name_weight = if plain { 1.0 } else { NAME_WEIGHT };
        let mut docs = Vec::with_capacity(tools.len());
        let mut df: HashMap<String, usize> = HashMap::new();
        for tool in tools {
            let SearchDoc {
                name,
                title,
                description,
                params,
                param_text,
            } = tool;
            let mut terms: HashMap<String, f64> = HashMap::new();
            // `<server>__<tool>`: the server's name is context, not what the tool does (a
            // server called `everything` must not answer "everything you have stored").
            let (server, local) = match name.split_once("__") {
                Some((server, local)) if !plain => (server, local),
                _ => ("", name.as_str()),
            };
            let named = tok(local);
            let server_terms = tok(server);
            // The title's words that the name does not already give.
            let title: Vec<String> = tok(title.as_deref().unwrap_or(""))
                .into_iter()
                .filter(|t| !named.contains(t))
                .collect();
            let mut add_terms = |words: Vec<String>, weight: f64| {
                for t in words {
                    *terms.entry(t).or_default() += weight;
                }
            };
            add_terms(server_terms, 1.0);
            add_terms(named, name_weight);
            add_terms(tok(&description), 1.0);
            if !plain {
                add_terms(title, TITLE_WEIGHT);
                for p in &params {
                    add_terms(tok(p), PARAM_NAME_WEIGHT);
                }
                for p in &param_text {
                    add_terms(tok(p), PARAM_TEXT_WEIGHT);
                }
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
        let query = if self.plain {
            let mut q = Expanded::default();
            for (i, t) in plain_tokens(query).into_iter().enumerate() {
                q.add(t, 1.0, Some(i));
            }
            q
        } else {
            let mut q = expand(query, |t| self.df.contains_key(t));
            q.add_word_forms(self.df.keys());
            q
        };
        let n = self.docs.len() as f64;
        let mut hits: Vec<SearchHit> = self
            .docs
            .iter()
            .filter_map(|doc| {
                let mut score = 0.0;
                let mut covered = vec![false; query.words];
                for (term, (qw, sources)) in &query.terms {
                    let Some(tf) = doc.terms.get(term) else {
                        continue;
                    };
                    let df = *self.df.get(term).unwrap_or(&0) as f64;
                    let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                    score += qw * idf * (tf * (K1 + 1.0)) / (tf + K1 * (1.0 - B + B * doc.len / self.avg_len));
                    for i in sources {
                        covered[*i] = true;
                    }
                }
                if !self.plain && query.words > 1 {
                    // A tool that answers more of the words the agent wrote (directly or
                    // through what they imply) beats one that matches a single word strongly:
                    // `fetch` in a name must not outrank "specific entities by name".
                    let share = covered.iter().filter(|c| **c).count() as f64 / query.words as f64;
                    score *= share.powf(COVERAGE_EXPONENT);
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

/// A query's terms: each with its weight and the words of the query it stands for.
#[derive(Debug, Default)]
struct Expanded {
    terms: HashMap<String, (f64, Vec<usize>)>,
    /// How many words of the query count for coverage.
    words: usize,
}

impl Expanded {
    fn add(&mut self, term: String, weight: f64, source: Option<usize>) {
        let entry = self.terms.entry(term).or_insert((0.0, Vec::new()));
        entry.0 = entry.0.max(weight);
        if let Some(i) = source {
            if !entry.1.contains(&i) {
                entry.1.push(i);
            }
            self.words = self.words.max(i + 1);
        }
    }

    /// Other forms of the query's own words that the tools use: a word that begins with
    /// another (`subscribe` and `subscriber`, `truncat` and `truncation`, `commit` and
    /// `committed`) is very likely the same word, which a suffix stripper cannot know for
    /// every suffix. Short words are left alone: `read` must not meet `ready`.
    fn add_word_forms<'a>(&mut self, vocabulary: impl Iterator<Item = &'a String>) {
        let words: Vec<(String, Vec<usize>)> = self
            .terms
            .iter()
            .filter(|(t, (w, sources))| *w >= 1.0 && !sources.is_empty() && t.chars().count() >= WORD_FORM_MIN_CHARS)
            .map(|(t, (_, sources))| (t.clone(), sources.clone()))
            .collect();
        if words.is_empty() {
            return;
        }
        for known in vocabulary {
            if known.chars().count() < WORD_FORM_MIN_CHARS {
                continue;
            }
            for (word, sources) in &words {
                if known != word && (known.starts_with(word.as_str()) || word.starts_with(known.as_str())) {
                    for i in sources {
                        self.add(known.clone(), WORD_FORM_WEIGHT, Some(*i));
                    }
                }
            }
        }
    }
}

/// The shortest word whose longer or shorter forms are looked for.
const WORD_FORM_MIN_CHARS: usize = 5;
/// Another form of a word the agent wrote: nearly as good as the word itself.
const WORD_FORM_WEIGHT: f64 = 0.6;

/// The query's terms with their weights: its own words, then what they imply at lower weights
/// (synonyms, spelled-out command names and phrases, `file` for a file name, `un…` for
/// "not …", and a reading or finding intent for a question). `known` says whether a term
/// occurs in any indexed tool: a capitalized word no tool mentions is a name.
fn expand(query: &str, known: impl Fn(&str) -> bool) -> Expanded {
    let mut q = Expanded::default();
    // Punctuation around a word ("logs?", "config.yaml.", "(please)") is the sentence's, not
    // the word's: phrases and file names are read without it.
    let trim = |w: &str| {
        w.trim_matches(|c: char| ",;:!?()\"'`".contains(c))
            .trim_end_matches('.')
            .trim_matches(|c: char| ",;:!?()\"'`".contains(c))
            .to_string()
    };
    let lowered = query.to_lowercase();
    let words: Vec<String> = lowered.split_whitespace().map(trim).filter(|w| !w.is_empty()).collect();
    let mut text = format!(" {} ", words.join(" "));
    for (phrase, words) in PHRASES {
        if text.contains(&format!(" {phrase} ")) {
            text = text.replace(&format!(" {phrase} "), &format!(" {} ", words.join(" ")));
        }
    }
    text = split_particle(&text);
    let raw: Vec<String> = text.split_whitespace().map(str::to_string).collect();
    // Words that stand for what the tool is given, not for what it does: a file name, a
    // person's or a project's name, a commit hash. Their own letters would match tools by
    // accident (`package.json` and JSON); what they are of says which tool takes them.
    // The first word is capitalized because it starts the sentence ("Erase the logs"), so it
    // is never taken for a name.
    let names: Vec<String> = query
        .split_whitespace()
        .skip(1)
        .map(trim)
        .filter(|w| {
            // A word the tools or the tables know ("Git", "Delete", "What") is not a name.
            let terms = tokenize(w);
            looks_like_proper_name(w)
                && !terms.is_empty()
                && !terms
                    .iter()
                    .any(|t| known(t) || synonyms(t).next().is_some() || ABBREVIATIONS.iter().any(|(a, _)| a == t))
        })
        .map(|w| w.to_lowercase())
        .collect();
    let argument = |w: &String| looks_like_file_name(w) || looks_like_identifier(w) || names.contains(w);
    let kept: Vec<&str> = raw.iter().filter(|w| !argument(w)).map(String::as_str).collect();
    let mut add = |term: String, weight: f64, source: Option<usize>| q.add(term, weight, source);
    let words = tokenize(&kept.join(" "));
    for (i, t) in words.iter().enumerate() {
        for syn in synonyms(t) {
            add(stem(syn), SYNONYM_WEIGHT, Some(i));
        }
        if let Some((_, implied)) = ABBREVIATIONS.iter().find(|(a, _)| a == t) {
            // A command's name says exactly what it does.
            for w in *implied {
                add(stem(w), 1.0, Some(i));
            }
        }
        add(t.clone(), 1.0, Some(i));
    }
    // Each argument is one word of the request: a tool that takes it answers that word.
    let mut slot = words.len();
    let files: Vec<&String> = raw.iter().filter(|w| looks_like_file_name(w)).collect();
    for f in &files {
        add("file".into(), 1.0, Some(slot));
        let ext = f.rsplit('.').next().unwrap_or("");
        if let Some((_, kind)) = MEDIA_EXTENSIONS.iter().find(|(exts, _)| exts.contains(&ext)) {
            add(stem(kind), 1.0, Some(slot));
            add("media".into(), SYNONYM_WEIGHT, Some(slot));
        }
        if files.len() > 1 {
            add(stem("multiple"), SYNONYM_WEIGHT, Some(slot));
        }
        // `*.test.js` or `.tsx`: a pattern or a kind names many files, to be found.
        if f.contains(['*', '?']) || f.starts_with('.') {
            for w in ["pattern", "glob", "match"] {
                add(stem(w), SYNONYM_WEIGHT, Some(slot));
            }
        }
        slot += 1;
    }
    // "into notes.txt", "to out.json": the file is where something goes.
    for pair in raw.windows(2) {
        if matches!(pair[0].as_str(), "into" | "to") && looks_like_file_name(&pair[1]) {
            add(stem("write"), SYNONYM_WEIGHT, None);
        }
    }
    for _ in raw.iter().filter(|w| looks_like_identifier(w)) {
        for w in IDENTIFIER_MEANS {
            add(stem(w), SYNONYM_WEIGHT, Some(slot));
        }
        slot += 1;
    }
    let mut seen = Vec::new();
    for name in &names {
        if seen.contains(&name) {
            continue;
        }
        seen.push(name);
        for w in NAME_MEANS {
            add(stem(w), SYNONYM_WEIGHT, Some(slot));
        }
        slot += 1;
    }
    for pair in raw.windows(2) {
        if matches!(pair[0].as_str(), "not" | "non" | "without" | "never") && pair[1].chars().all(char::is_alphabetic) {
            add(stem(&format!("un{}", pair[1])), 1.0, None);
        }
    }
    // A question is one more word of the request: what it asks for. Its word comes first, after
    // any politeness ("can you tell me where…").
    let opening = raw
        .iter()
        .map(String::as_str)
        .find(|w| QUESTION_WORDS.contains(w) || !(STOP_WORDS.contains(w) || REQUEST_WORDS.contains(w)));
    match opening {
        Some("where") => {
            for w in ["search", "find", "locate"] {
                add(stem(w), WHERE_WEIGHT, Some(slot));
            }
        }
        Some(w) if QUESTION_WORDS.contains(&w) => {
            for w in ["read", "get", "show", "list", "search"] {
                add(stem(w), QUESTION_WEIGHT, Some(slot));
            }
        }
        _ => {}
    }
    q
}

/// "turn the logging on": a phrasal verb with its object between, read as the phrase
/// ("turn on", then what it means) so the object stays a word of the request.
fn split_particle(text: &str) -> String {
    for (verb, particle) in SPLIT_PHRASES {
        let Some(at) = text.find(&format!(" {verb} ")) else {
            continue;
        };
        let after = at + verb.len() + 1;
        let Some(rel) = text[after..].find(&format!(" {particle} ")) else {
            continue;
        };
        let end = after + rel;
        // The object of a phrasal verb is a few words ("the debug logging"), not a clause.
        if text[after..end].split_whitespace().count() > MAX_PARTICLE_GAP {
            continue;
        }
        let phrase = format!("{verb} {particle}");
        let Some((_, words)) = PHRASES.iter().find(|(p, _)| *p == phrase) else {
            continue;
        };
        return format!(
            "{} {}{} {}",
            &text[..at],
            words.join(" "),
            &text[after..end],
            &text[end + particle.len() + 1..]
        );
    }
    text.to_string()
}

const MAX_PARTICLE_GAP: usize = 4;

/// Phrasal verbs whose particle may come after the object (each also in [`PHRASES`]).
const SPLIT_PHRASES: &[(&str, &str)] = &[
    ("turn", "on"),
    ("turn", "off"),
    ("switch", "on"),
    ("switch", "off"),
    ("set", "up"),
    ("look", "up"),
    ("pull", "up"),
];

/// What a name (a capitalized word no tool mentions) stands for: a named thing, usually a
/// person, an organization or a project: a named entity, which tools take by name.
const NAME_MEANS: &[&str] = &["name", "entity"];

/// What an identifier (a hash or an id of letters and digits) stands for.
const IDENTIFIER_MEANS: &[&str] = &["revision", "id", "hash", "reference"];

/// Whether a query word is a proper name: capitalized, the rest lowercase letters (`API` and
/// `JSON` are acronyms, `readFile` is an identifier).
fn looks_like_proper_name(word: &str) -> bool {
    // "Ivan's": the possessive belongs to the sentence.
    let word = word.strip_suffix("'s").or_else(|| word.strip_suffix("’s")).unwrap_or(word);
    let mut chars = word.chars();
    chars.next().is_some_and(char::is_uppercase) && word.chars().count() > 1 && chars.all(char::is_lowercase)
}

/// Whether a query word is an identifier: letters and digits mixed, six or more, as a commit
/// hash or a ticket id is written (not a version number, a year or a plain word).
fn looks_like_identifier(word: &str) -> bool {
    word.len() >= 6
        && word.chars().all(|c| c.is_ascii_alphanumeric())
        && word.chars().any(|c| c.is_ascii_digit())
        && word.chars().any(|c| c.is_ascii_alphabetic())
}

/// How strongly a tool's share of the query's words scales its score (1: in proportion).
const COVERAGE_EXPONENT: f64 = 1.0;

/// Phrases that mean one thing, read as the words a tool description would use.
const PHRASES: &[(&str, &[&str])] = &[
    ("new name", &["rename"]),
    ("get rid of", &["delete"]),
    ("throw away", &["discard"]),
    ("look up", &["search"]),
    ("find out", &["search"]),
    ("look at", &["read"]),
    ("go to", &["switch"]),
    ("set up", &["create"]),
    ("turn on", &["toggle", "enable"]),
    ("turn off", &["toggle", "disable"]),
    ("switch on", &["toggle", "enable"]),
    ("switch off", &["toggle", "disable"]),
    ("up to date", &["latest"]),
    ("jot down", &["write"]),
    ("write down", &["write"]),
    ("note down", &["write"]),
    ("keep in mind", &["remember", "add"]),
    ("take back", &["undo"]),
    ("pull up", &["open", "show"]),
    ("go through", &["read"]),
    ("side by side", &["multiple", "compare"]),
    ("no longer", &["delete"]),
    ("take up", &["size"]),
    ("taking up", &["size"]),
    ("kick off", &["run", "start"]),
    ("spin off", &["create", "branch"]),
    ("allowed to", &["allowed"]),
    ("this month", &["history"]),
    ("this week", &["history"]),
    ("what happened", &["history"]),
];

// A question asks to read, look up or list something; that says little about which tool, so
// it weighs little.
const QUESTION_WEIGHT: f64 = 0.3;
// "where" asks for a place: finding is exactly what it wants.
const WHERE_WEIGHT: f64 = 1.0;

/// Words that open a request without saying what it is for ("please", "help me", "quickly").
const REQUEST_WORDS: &[&str] = &["help", "quickly", "kindly", "hey", "ok", "okay", "now", "first", "then", "also"];

const QUESTION_WORDS: &[&str] = &[
    "what", "what's", "whats", "which", "who", "who's", "whose", "where", "when", "how", "is", "are", "was", "were", "do", "does", "did",
    "has", "have", "any",
];

/// Whether a query word names a file: `name.ext`, with a short alphanumeric extension (not
/// a version number or a sentence's end).
fn looks_like_file_name(word: &str) -> bool {
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
}

/// File extensions that say what kind of content a file holds.
const MEDIA_EXTENSIONS: &[(&[&str], &str)] = &[
    (&["png", "jpg", "jpeg", "gif", "webp", "bmp", "svg", "ico", "tiff"], "image"),
    (&["mp3", "wav", "ogg", "flac", "m4a", "aac"], "audio"),
    (&["mp4", "mov", "webm", "mkv", "avi"], "video"),
];

/// Shell commands and short forms agents write for what tools describe in words (one way:
/// "directory" does not mean `mkdir`).
const ABBREVIATIONS: &[(&str, &[&str])] = &[
    ("mkdir", &["create", "directory"]),
    ("rmdir", &["delete", "directory"]),
    ("ls", &["list", "directory"]),
    ("dir", &["directory"]),
    ("cat", &["read", "file"]),
    ("rm", &["delete"]),
    ("mv", &["move"]),
    ("cp", &["copy"]),
    ("pwd", &["current", "directory"]),
    ("touch", &["create", "file"]),
    ("env", &["environment", "variable"]),
    ("vars", &["variable"]),
    ("var", &["variable"]),
    ("cwd", &["current", "directory"]),
    ("tz", &["timezone"]),
    ("grep", &["search"]),
    ("readme", &["file"]),
    ("changelog", &["file"]),
];

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
    "a",
    "an",
    "the",
    "of",
    "to",
    "in",
    "on",
    "for",
    "and",
    "or",
    "is",
    "are",
    "be",
    "with",
    "by",
    "it",
    "this",
    "that",
    "i",
    "me",
    "my",
    "we",
    "you",
    "your",
    "can",
    "how",
    "do",
    "does",
    "what",
    "which",
    // What a question asks for is read from its first word (see `expand`); the word itself
    // matches descriptions' prose ("use this when…").
    "where",
    "when",
    "who",
    "whose",
    "why",
    "some",
    "all",
    "from",
    "at",
    "as",
    "if",
    "into",
    "want",
    "need",
    "please",
    "tool",
    "tools",
    "using",
    "use",
    // What is left of contractions once the apostrophe splits them (what's, don't, I've).
    "s",
    "t",
    "d",
    "m",
    "ve",
    "ll",
    "re",
    "don",
    "doesn",
    "didn",
    "isn",
    "aren",
    "wasn",
    "weren",
    "haven",
    "hasn",
    "won",
    "can't",
    // Filler of requests to an assistant.
    "tell",
    "give",
    "let",
    "would",
    "could",
    "should",
    "will",
    "there",
    "here",
    "them",
    "these",
    "those",
    "its",
    "our",
    "us",
    "about",
    "just",
    "also",
    "one",
    "something",
    "thing",
    "things",
    "way",
    // They introduce an argument ("a file called x"), which says what the tool is given.
    "called",
    "named",
    // Quantifiers, like "all": how many, not what.
    "every",
    "each",
];

/// A crude suffix stripper: enough that "listing", "lists" and "listed" meet "list".
pub(crate) fn stem(word: &str) -> String {
    if let Some((_, base)) = IRREGULAR.iter().find(|(form, _)| *form == word) {
        return (*base).to_string();
    }
    let w = word;
    for (suffix, min_len) in [("ies", 4), ("ing", 5), ("ed", 4), ("es", 4), ("s", 3)] {
        if w.len() > min_len && w.ends_with(suffix) && !w.ends_with("ss") {
            let base = &w[..w.len() - suffix.len()];
            return if suffix == "ies" { format!("{base}y") } else { base.to_string() };
        }
    }
    w.to_string()
}

/// Irregular forms of the verbs tool descriptions use, to their base form.
const IRREGULAR: &[(&str, &str)] = &[
    ("made", "make"),
    ("wrote", "write"),
    ("written", "write"),
    ("ran", "run"),
    ("found", "find"),
    ("got", "get"),
    ("gotten", "get"),
    ("saw", "see"),
    ("seen", "see"),
    ("took", "take"),
    ("taken", "take"),
    ("gave", "give"),
    ("given", "give"),
    ("sent", "send"),
    ("kept", "keep"),
    ("left", "leave"),
    ("began", "begin"),
    ("begun", "begin"),
    ("chose", "choose"),
    ("chosen", "choose"),
    ("did", "do"),
    ("done", "do"),
    ("went", "go"),
    ("gone", "go"),
    ("stole", "steal"),
    ("lost", "lose"),
    ("built", "build"),
];

/// Words agents use for the same thing in tool descriptions. Each group is symmetric.
const SYNONYM_GROUPS: &[&[&str]] = &[
    &[
        "delete", "remove", "erase", "rm", "unlink", "drop", "forget", "purge", "wipe", "trash", "destroy", "discard",
    ],
    &["directory", "folder", "dir", "directories"],
    &["file", "document", "files"],
    &[
        "read", "open", "view", "show", "display", "cat", "content", "contents", "get", "dump", "print", "see", "look", "inspect",
        "examine", "peek", "check",
    ],
    &["write", "save", "create", "store", "put"],
    &[
        "create",
        "make",
        "new",
        "add",
        "record",
        "insert",
        "register",
        "generate",
        "init",
        "initialize",
    ],
    &["multiple", "several", "many", "together", "batch", "simultaneously"],
    &[
        "edit", "modify", "change", "update", "replace", "patch", "rewrite", "tweak", "adjust", "fix", "correct", "bump", "amend", "alter",
        "revise",
    ],
    &["list", "enumerate", "ls", "show"],
    &[
        "search", "find", "grep", "lookup", "query", "locate", "hunt", "seek", "track", "scan",
    ],
    &[
        "fetch", "download", "url", "web", "http", "page", "website", "internet", "browse", "online", "site", "webpage", "article", "blog",
        "html",
    ],
    &[
        "run", "execute", "exec", "shell", "command", "launch", "build", "compile", "install", "deploy", "npm", "pip", "cargo", "yarn",
    ],
    &["move", "rename", "mv", "relocate", "tidy"],
    &["copy", "duplicate", "cp"],
    &["time", "clock", "date", "now", "current", "hour"],
    // Points in time a request names: what a tool's date or timestamp argument takes.
    &[
        "date",
        "timestamp",
        "since",
        "until",
        "ago",
        "yesterday",
        "today",
        "tomorrow",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "january",
        "february",
        "march",
        "april",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ],
    &[
        "timezone", "zone", "tz", "utc", "gmt", "pst", "pdt", "est", "edt", "cet", "cest", "ist", "jst",
    ],
    &["convert", "translate"],
    &["history", "log", "recent", "past", "previous", "earlier", "last", "latest"],
    &["commit", "snapshot", "record"],
    &["git", "version", "repository", "repo"],
    &["diff", "difference", "differ", "changes", "changed", "compare", "pending", "review"],
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
    &[
        "relation",
        "relationship",
        "link",
        "connect",
        "colleague",
        "reports",
        "manages",
        "manager",
        "boss",
        "employee",
        "member",
        "belongs",
    ],
    &["observation", "fact", "detail"],
    &[
        "size",
        "big",
        "biggest",
        "large",
        "largest",
        "huge",
        "heavy",
        "bytes",
        "space",
        "executable",
        "owner",
        "metadata",
        "info",
        "information",
        "stat",
        "details",
        "modified",
        "permissions",
    ],
    &[
        "tree",
        "recursive",
        "structure",
        "hierarchy",
        "layout",
        "organised",
        "organized",
        "organisation",
        "organization",
    ],
    &["entire", "whole", "complete", "full"],
    &["echo", "repeat", "back"],
    &["sum", "add", "total", "plus", "arithmetic", "calculate", "compute", "math"],
    &["image", "picture", "photo", "png", "jpg", "jpeg", "screenshot", "media"],
    &["tiny", "small", "little", "mini", "minimal"],
    &["compress", "zip", "gzip", "archive", "shrink", "pack"],
    &["start", "begin", "trigger", "initiate", "launch"],
    &["long", "slow", "lengthy"],
    &["simulate", "simulated", "fake", "mock", "dummy", "synthetic"],
    &["allowed", "permitted", "access", "accessible", "permission", "may"],
    // Asking which file says something is a search of the files' text.
    &[
        "mention",
        "contain",
        "define",
        "defined",
        "definition",
        "declare",
        "occurrence",
        "grep",
        "regex",
    ],
    &["stop", "kill", "terminate", "abort", "cancel", "halt", "interrupt"],
    &["background", "job", "task", "process", "daemon"],
    &[
        "environment",
        "env",
        "variable",
        "variables",
        "config",
        "configuration",
        "setting",
        "settings",
    ],
    &["remember", "recall", "memorize", "memory"],
    &["resource", "resources"],
    &["prompt", "template"],
    &["status", "state", "working", "uncommitted", "dirty", "pending"],
    &["reset", "unstage", "undo", "revert", "discard"],
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

    fn top(tools: &[(&str, &str)], query: &str) -> Vec<String> {
        SearchIndex::new(tools.iter().map(|(n, d)| (n.to_string(), d.to_string())).collect())
            .search(query, 3)
            .into_iter()
            .map(|h| h.name)
            .collect()
    }

    const FILES_AND_PEOPLE: &[(&str, &str)] = &[
        ("read_media_file", "Read an image or audio file and return it as base64"),
        ("echo", "Echoes back the input string"),
        ("commit", "Records changes to the repository"),
        ("edit_file", "Make line-based edits to a text file. Returns a diff."),
        ("read_many", "Read the contents of multiple files simultaneously"),
        ("open_nodes", "Open specific nodes in the knowledge graph by their names"),
        ("search_nodes", "Search for nodes in the knowledge graph based on a query"),
        ("delete_entities", "Delete multiple entities from the knowledge graph"),
        ("show", "Shows the contents of a commit given as a revision"),
        ("search_files", "Recursively search for files matching a glob pattern"),
        ("list_directory", "Get a detailed listing of all files and directories"),
        ("toggle_logging", "Toggles simulated logging on or off"),
        ("subscriber_updates", "Sends resource subscriber updates"),
    ];

    #[track_caller]
    fn first(query: &str, expected: &str) {
        let hits = top(FILES_AND_PEOPLE, query);
        assert_eq!(hits.first().map(String::as_str), Some(expected), "{query:?}: {hits:?}");
    }

    #[test]
    fn arguments_are_words_the_tool_takes() {
        // A file name, a glob and a commit id are what the tool is given: the media reader
        // answers "song.mp3" though "play back" matches `echo`'s words.
        first("play back the song.mp3", "read_media_file");
        first("find *.test.js", "search_files");
        first("what did a1b2c3 change", "show");
        // A capitalized word that no tool mentions is a name; one that a tool mentions is not.
        assert!(top(FILES_AND_PEOPLE, "anything on Alice").iter().any(|h| h.ends_with("entities")));
        first("Echo hello", "echo");
        // A sentence's first capital and its closing punctuation change nothing.
        first("Play back the song.mp3?", "read_media_file");
        first("Turn the fake logs on.", "toggle_logging");
    }

    #[test]
    fn other_forms_and_split_phrases_are_read() {
        // `subscribe` meets `subscriber`, which no suffix rule joins.
        first("how do I subscribe", "subscriber_updates");
        // "turn the logging on" is "turn on", with its object in between.
        first("turn the fake logs on", "toggle_logging");
    }

    #[test]
    fn odd_queries_rank_without_failing() {
        for q in [
            "",
            " ",
            "turn",
            "turn on",
            "turn  on  ",
            "Ünïcode turn ü on é",
            "turn the ✓ on",
            ".",
            "*",
            ".tsx",
            "**/*",
            "a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2",
            "Élodie and Zoë",
            "\"quoted\" 'words'",
            "set ü up up up",
        ] {
            let hits = top(FILES_AND_PEOPLE, q);
            assert!(hits.len() <= 3, "{q:?}");
        }
    }
}
