//! Reading a query as an agent writes it: its words, what they imply, and what it names.

use std::collections::HashMap;

use super::arguments::{
    ARITHMETIC_MEANS, HOST_MEANS, IDENTIFIER_MEANS, KIND_MEANS, MEDIA_EXTENSIONS, NAME_MEANS, PATH_MEANS, QUOTE_MEANS, RANGE_MEANS,
    REGEX_MEANS, looks_like_arithmetic, looks_like_file_name, looks_like_host, looks_like_identifier, looks_like_path,
    looks_like_proper_name, looks_like_regex, looks_like_revision, quoted_text,
};
use super::vocabulary::{
    ABBREVIATIONS, CHANGES_MADE, CODE_SYMBOLS, PHRASES, QUESTION_WORDS, REQUEST_WORDS, SPLIT_PHRASES, STOP_WORDS, VERSION_CONTROL, synonyms,
};
use super::words::{raw_tokens, stem, tokenize};

// A synonym is evidence, but weaker than the word the agent actually wrote.
const SYNONYM_WEIGHT: f64 = 0.6;

/// A query's terms: each with its weight and the words of the query it stands for.
#[derive(Debug, Default)]
pub(super) struct Expanded {
    pub(super) terms: HashMap<String, (f64, Vec<usize>)>,
    /// How many words of the query count for coverage.
    pub(super) words: usize,
}

impl Expanded {
    pub(super) fn add(&mut self, term: String, weight: f64, source: Option<usize>) {
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
    pub(super) fn add_word_forms<'a>(&mut self, vocabulary: impl Iterator<Item = &'a String>) {
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
pub(super) fn expand(query: &str, known: impl Fn(&str) -> bool, correct: impl Fn(&str) -> Option<String>) -> Expanded {
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
                && !looks_like_file_name(w)
                && !terms.is_empty()
                && !terms
                    .iter()
                    .any(|t| known(t) || synonyms(t).next().is_some() || ABBREVIATIONS.iter().any(|(a, _)| a == t))
        })
        .map(|w| w.to_lowercase())
        .collect();
    // A git revision as written (`HEAD~3`, `v1.2`): a commit the tool is given. Read from the
    // query as typed: "the head of the file" is a word, `HEAD` a revision.
    let revisions: Vec<String> = query
        .split_whitespace()
        .map(trim)
        .filter(|w| looks_like_revision(w))
        .map(|w| w.to_lowercase())
        .collect();
    let argument = |w: &String| {
        looks_like_file_name(w)
            || looks_like_identifier(w)
            || looks_like_path(w)
            || looks_like_regex(w)
            || looks_like_host(w)
            || names.contains(w)
            || revisions.contains(w)
    };
    let version_control = !revisions.is_empty() || raw.iter().any(|w| VERSION_CONTROL.contains(&w.as_str()));
    let raw = reword(&raw, version_control);
    let kept: Vec<&str> = raw.iter().filter(|w| !argument(w)).map(String::as_str).collect();
    let mut add = |term: String, weight: f64, source: Option<usize>| q.add(term, weight, source);
    // Version control named, or edits read as uncommitted changes: a git tool's request.
    if version_control || raw.iter().any(|w| VERSION_CONTROL.contains(&w.as_str())) {
        add("git".into(), SYNONYM_WEIGHT, None);
    }
    let words = raw_tokens(&kept.join(" "));
    for (i, word) in words.iter().enumerate() {
        let mut t = stem(word);
        let mut weight = 1.0;
        if let Some((_, implied)) = ABBREVIATIONS.iter().find(|(a, _)| a == word) {
            // A command's name, written as it is typed, says exactly what it does (`touch`,
            // not "touched", which is a change).
            for w in *implied {
                add(stem(w), 1.0, Some(i));
            }
        } else if t.chars().count() >= TYPO_MIN_CHARS && !known(&t) && synonyms(&t).next().is_none() {
            // A word nothing knows is most likely a known one mistyped ("serch", "lsit"), but
            // it may be a real word the tools lack ("crate" is one slip from "create"): the
            // guess weighs as a synonym.
            if let Some(fixed) = correct(&t) {
                add(t, 1.0, Some(i));
                t = fixed;
                weight = SYNONYM_WEIGHT;
            }
        }
        for syn in synonyms(&t) {
            add(stem(syn), SYNONYM_WEIGHT, Some(i));
        }
        add(t, weight, Some(i));
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
    // "where is docker-compose.yml", "locate every Makefile": a file named in a request to find
    // is found by its name, a path pattern, not by its text.
    let finding = raw.first().is_some_and(|w| w == "where")
        || raw
            .iter()
            .any(|w| matches!(stem(w).as_str(), "find" | "locat" | "locate" | "search"));
    if finding && !files.is_empty() {
        for w in ["glob", "path"] {
            add(stem(w), 1.0, None);
        }
    }
    // "into notes.txt", "to a file called out.json": the file is where something goes.
    for (i, w) in raw.iter().enumerate() {
        let ahead: Vec<&String> = raw.iter().skip(i + 1).take(4).collect();
        let at = ahead.iter().position(|w| looks_like_file_name(w));
        // "listen to the recording.wav", "look into the errors in app.log" read a file: only the
        // file itself or "a file called …" is a destination.
        let destination = match (w.as_str(), at) {
            ("into" | "to", Some(0)) => true,
            ("into" | "to", Some(n)) => ahead[..n].iter().any(|w| stem(w) == "file"),
            _ => false,
        };
        if destination {
            add(stem("write"), SYNONYM_WEIGHT, None);
            break;
        }
    }
    // `docs.rs`, `github.com`: a site, read over the web.
    for _ in raw.iter().filter(|w| looks_like_host(w)) {
        for w in HOST_MEANS {
            add(stem(w), 1.0, Some(slot));
        }
        slot += 1;
    }
    // 'connection refused' in quotes: words to find as they are written, in text; a quoted
    // file or revision (`config.yaml`) is only that argument, set off as agents write it.
    let quoted = quoted_text(query).filter(|inner| {
        let one = inner.trim();
        one.contains(char::is_whitespace)
            || !(looks_like_file_name(one)
                || looks_like_path(one)
                || looks_like_identifier(one)
                || looks_like_revision(one)
                || looks_like_host(one))
    });
    if quoted.is_some() {
        for w in QUOTE_MEANS {
            add(stem(w), SYNONYM_WEIGHT, Some(slot));
        }
        slot += 1;
    }
    // "17 + 25": a sum to work out.
    if raw.iter().any(|w| looks_like_arithmetic(w)) {
        for w in ARITHMETIC_MEANS {
            add(stem(w), 1.0, Some(slot));
        }
        slot += 1;
    }
    for arg in raw.iter().filter(|w| looks_like_identifier(w) || revisions.contains(w)) {
        for term in IDENTIFIER_MEANS {
            add(stem(term), SYNONYM_WEIGHT, Some(slot));
        }
        // `main..feature/auth`: two revisions, to compare.
        if arg.contains("..") {
            for term in RANGE_MEANS {
                add(stem(term), SYNONYM_WEIGHT, Some(slot));
            }
        }
        slot += 1;
    }
    // "is logs/ a directory or a file": which kind of thing a path is, its metadata.
    let kind = |w: &str| matches!(stem(w).as_str(), "directory" | "folder" | "dir" | "file" | "symlink" | "link");
    let either = raw
        .iter()
        .enumerate()
        .any(|(i, w)| w == "or" && raw[i.saturating_sub(2)..i].iter().any(|w| kind(w)) && raw[i + 1..].iter().take(3).any(|w| kind(w)));
    if either {
        for w in KIND_MEANS {
            add(stem(w), 1.0, Some(slot));
        }
        slot += 1;
    }
    // `fn\s+main`, `TODO.*fix`: a regular expression, to search text with.
    for _ in raw.iter().filter(|w| looks_like_regex(w)) {
        for w in REGEX_MEANS {
            add(stem(w), SYNONYM_WEIGHT, Some(slot));
        }
        slot += 1;
    }
    // `src/utils` or `logs/`: a place in the file tree, usually a folder.
    for _ in raw
        .iter()
        .filter(|w| looks_like_path(w) && !looks_like_file_name(w) && !revisions.contains(w))
    {
        for w in PATH_MEANS {
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
        // Told to remember ("remember that the API key rotates"), not asked what is
        // remembered (a question opens with its own word): the request is to store.
        Some(w) if STORE_WORDS.contains(&w) => {
            for w in ["add", "create", "save", "store"] {
                add(stem(w), STORE_WEIGHT, Some(slot));
            }
        }
        _ => {}
    }
    q
}

/// Imperatives of keeping something for later; opening a request, they ask to store it.
const STORE_WORDS: &[&str] = &["remember", "memorize", "memorise"];

// As much as a question's reading: it says what the request does, not which tool does it.
const STORE_WEIGHT: f64 = 0.3;

/// Words whose meaning their neighbours decide, read as what they mean here (one pass, each
/// word judged among the words as written):
/// - "my uncommitted edits", "what have I changed": beside version control, or asked about as
///   done by the one asking, edits are the changes made, to be seen, not an edit to make;
/// - "change a file's name" is a rename;
/// - "rename the variable": a name in code changes by an edit of the text, not a file move.
fn reword(raw: &[String], version_control: bool) -> Vec<String> {
    let question = raw.first().is_some_and(|w| QUESTION_WORDS.contains(&w.as_str()));
    let code_symbol = raw.iter().any(|w| CODE_SYMBOLS.contains(&w.as_str()));
    let rename = if code_symbol { "replace" } else { "rename" };
    let mut out = Vec::with_capacity(raw.len());
    for (i, w) in raw.iter().enumerate() {
        let before = &raw[i.saturating_sub(3)..i];
        let told = question && before.last().is_some_and(|p| matches!(p.as_str(), "i" | "we" | "i've" | "we've"));
        let changing = before.iter().any(|p| matches!(p.as_str(), "change" | "changing" | "alter"));
        let meant = match w.as_str() {
            // "what have I modified" asks for the state of the working tree.
            w if CHANGES_MADE.contains(&w) && told => "uncommitted changes status",
            // "what changed in the last commit" may be committed: changes, not their state.
            w if CHANGES_MADE.contains(&w) && version_control => "changes",
            "name" if changing => rename,
            "rename" => rename,
            _ => {
                out.push(w.clone());
                continue;
            }
        };
        out.extend(meant.split_whitespace().map(str::to_string));
    }
    out
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

/// The most words between a phrasal verb and its particle ("turn the debug logging on").
const MAX_PARTICLE_GAP: usize = 4;

/// The shortest word that is checked for a typo: shorter ones are too often another word.
pub(super) const TYPO_MIN_CHARS: usize = 4;

// A question asks to read, look up or list something; that says little about which tool, so
// it weighs little.
const QUESTION_WEIGHT: f64 = 0.3;

// "where" asks for a place: finding is exactly what it wants.
const WHERE_WEIGHT: f64 = 1.0;
