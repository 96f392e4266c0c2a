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
//! its other forms in the index's vocabulary (`subscribe`, `subscriber`). What an agent writes
//! beyond prose is read for what it is: a revision (`HEAD~3`, `main..HEAD`, a short hash), a
//! path, a regular expression, a site (`docs.rs` is a file, `github.com` a site), quoted text
//! to find, a sum; a word nothing knows is read as the known word it is one slip from ("serch");
//! and edits told of as done, or beside version control, are changes to see, not edits to
//! make. Hand-written rather than a BM25 crate because the expansion and field weights are
//! the part that matters and the index is a few hundred documents at most.
//!
//! Those rules know the words of coding tools. For tools of every other kind (finance, travel,
//! housing), a small sentence model ([`semantic`]) reads what a request means, and its cosine
//! is fused with the lexical score, each weighted by what it is good at ([`fusion`]); without
//! the model's weights, or with `search.semantic = false`, the lexical ranker ranks alone.

use std::collections::HashMap;
use std::sync::Arc;

pub use crate::tool::SearchHit;
use crate::tool::ToolFinder;

mod arguments;
mod fusion;
mod query;
pub mod semantic;
mod vocabulary;
mod words;

pub use fusion::Scores;
use query::{Expanded, TYPO_MIN_CHARS, expand};
use semantic::SentenceModel;
use vocabulary::SYNONYM_GROUPS;
use words::{one_slip_from, plain_tokens, stem, tokenize};

struct Doc {
    name: String,
    /// What the sentence model reads of the tool: its name's words, title and description.
    text: String,
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
    /// The sentence model and each tool's vector, in `docs` order, when it ranks too.
    semantic: Option<Semantic>,
}

/// The sentence model and each tool's vector, in the index's order.
struct Semantic {
    model: Arc<SentenceModel>,
    vectors: Vec<Arc<[f32]>>,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("docs", &self.docs.len())
            .field("semantic", &self.semantic.is_some())
            .finish()
    }
}

// BM25's usual constants: k1 saturates repeated terms, b normalizes by length.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// The least a tool's length counts for, as a share of the average (BM25's length
/// normalization otherwise lifts a three-word description above every fuller one).
const SHORT_DOC_FLOOR: f64 = 0.5;

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

/// A query longer than `max_chars` characters (`search.max_query_chars`): why it is refused,
/// in one line that names its length and the limit, or `None` when it may be searched.
pub fn query_too_long(query: &str, max_chars: usize) -> Option<String> {
    let chars = query.chars().count();
    (chars > max_chars).then(|| {
        format!(
            "the query is {chars} characters; a search reads at most {max_chars} (search.max_query_chars): say what you want to do in a few words"
        )
    })
}

impl SearchIndex {
    /// Indexes `(name, description)` pairs.
    pub fn new(tools: Vec<(String, String)>) -> Self {
        Self::from_docs(tools.into_iter().map(|(n, d)| SearchDoc::new(n, d)).collect())
    }

    /// Indexes what each tool declares (see [`SearchDoc`]).
    pub fn from_docs(docs: Vec<SearchDoc>) -> Self {
        Self::build(docs, false)
    }

    /// Indexes what each tool declares, ranked by the words and by `model`'s reading of them
    /// together (see [`semantic`]); the words alone when `model` is `None`.
    pub fn with_model(docs: Vec<SearchDoc>, model: Option<Arc<SentenceModel>>) -> Self {
        let mut index = Self::build(docs, false);
        if let Some(model) = model {
            let texts: Vec<String> = index.docs.iter().map(|d| d.text.clone()).collect();
            let vectors = model.embed_all(&texts);
            index.semantic = Some(Semantic { model, vectors });
        }
        index
    }

    /// Indexes what each tool declares, with the sentence model `config` names when
    /// `search.semantic` is on and its weights are installed.
    pub fn configured(docs: Vec<SearchDoc>, config: &crate::config::SearchConfig) -> Self {
        Self::with_model(docs, semantic::shared_model(config))
    }

    /// Whether the sentence model ranks beside the words.
    pub fn is_semantic(&self) -> bool {
        self.semantic.is_some()
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
            let title_text = title.clone();
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
                text: model_text(&name, title_text.as_deref(), &description),
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
        Self {
            plain,
            docs,
            df,
            avg_len,
            semantic: None,
        }
    }

    /// The index's word (or the synonym tables') that `term` is one typing slip away from;
    /// the one most tools use when several are.
    fn correct(&self, term: &str) -> Option<String> {
        let mut best: Option<(usize, &str)> = None;
        let table = SYNONYM_GROUPS.iter().flat_map(|g| g.iter().copied());
        for candidate in self.df.keys().map(String::as_str).chain(table) {
            if candidate.chars().count() < TYPO_MIN_CHARS || !one_slip_from(term, candidate) {
                continue;
            }
            let used = self.df.get(candidate).copied().unwrap_or(0);
            if best.is_none_or(|(n, c)| used > n || (used == n && candidate < c)) {
                best = Some((used, candidate));
            }
        }
        best.map(|(_, c)| stem(c))
    }

    /// The indexed tools' names, in index order.
    #[doc(hidden)]
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.docs.iter().map(|d| d.name.as_str())
    }

    /// How many tools are indexed.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether the index is empty.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Each tool's lexical score for `query` and, when the model ranks too, its cosine with the
    /// query, in index order: what [`SearchIndex::search`] fuses (exposed for evaluation).
    #[doc(hidden)]
    pub fn scores(&self, query: &str) -> Scores {
        let raw_query = query;
        let query = if self.plain {
            let mut q = Expanded::default();
            for (i, t) in plain_tokens(query).into_iter().enumerate() {
                q.add(t, 1.0, Some(i));
            }
            q
        } else {
            let mut q = expand(query, |t| self.df.contains_key(t), |t| self.correct(t));
            q.add_word_forms(self.df.keys());
            q
        };
        let n = self.docs.len() as f64;
        let mut coverage = Vec::with_capacity(self.docs.len());
        let lexical: Vec<f64> = self
            .docs
            .iter()
            .map(|doc| {
                let mut score = 0.0;
                let mut covered = vec![false; query.words];
                for (term, (qw, sources)) in &query.terms {
                    let Some(tf) = doc.terms.get(term) else {
                        continue;
                    };
                    let df = *self.df.get(term).unwrap_or(&0) as f64;
                    let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                    // A short description is not a better match for being short: its length
                    // counts as at least half the average, so "Search for things." does not
                    // outrank a tool that says what it searches for matching the same word.
                    let ratio = if self.plain {
                        doc.len / self.avg_len
                    } else {
                        (doc.len / self.avg_len).max(SHORT_DOC_FLOOR)
                    };
                    score += qw * idf * (tf * (K1 + 1.0)) / (tf + K1 * (1.0 - B + B * ratio));
                    for i in sources {
                        covered[*i] = true;
                    }
                }
                let share = covered.iter().filter(|c| **c).count() as f64 / query.words.max(1) as f64;
                coverage.push(share);
                if !self.plain && query.words > 1 {
                    // A tool that answers more of the words the agent wrote (directly or
                    // through what they imply) beats one that matches a single word strongly:
                    // `fetch` in a name must not outrank "specific entities by name".
                    score *= share.powf(COVERAGE_EXPONENT);
                }
                score
            })
            .collect();
        let cosines = self.semantic.as_ref().map(|Semantic { model, vectors }| {
            // A closing mark says how the request was typed, not what it asks for; the
            // model would read it as one more token (and the case is folded already).
            let q = model.embed(raw_query.trim().trim_end_matches(['?', '.', '!']));
            vectors
                .iter()
                .map(|v| v.iter().zip(&q).map(|(a, b)| f64::from(a * b)).sum())
                .collect()
        });
        Scores {
            lexical,
            coverage,
            cosines,
            words: query.words,
        }
    }

    /// The best `top` matches for `query`, best first; ties by name, so results are stable.
    pub fn search(&self, query: &str, top: usize) -> Vec<SearchHit> {
        let scores = fusion::fuse(self.scores(query));
        let mut hits: Vec<SearchHit> = self
            .docs
            .iter()
            .zip(scores)
            .filter(|(_, score)| *score > 0.0)
            .map(|(doc, score)| SearchHit {
                name: doc.name.clone(),
                score,
                summary: doc.summary.clone(),
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.name.cmp(&b.name)));
        hits.truncate(top);
        hits
    }
}

/// How strongly a tool's share of the query's words scales its score (1: in proportion).
const COVERAGE_EXPONENT: f64 = 1.0;

/// What the sentence model reads of a tool: its name as words (`get_stock_price` → "get
/// stock price", the server's prefix left out as in the index), its title, its description.
fn model_text(name: &str, title: Option<&str>, description: &str) -> String {
    let local = name.split_once("__").map_or(name, |(_, l)| l);
    // Stop words kept: they are English to the model.
    let mut text = words::split_words(local).join(" ");
    for part in [title.unwrap_or(""), description] {
        let part = part.trim();
        if !part.is_empty() {
            text.push_str(". ");
            text.push_str(part);
        }
    }
    text
}

/// The first sentence of a description (at most 160 characters): what a match shows.
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

impl ToolFinder for SearchIndex {
    fn search(&self, query: &str, top: usize) -> Vec<SearchHit> {
        SearchIndex::search(self, query, top)
    }
}

#[cfg(test)]
mod tests;
