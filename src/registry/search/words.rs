//! Splitting text into words, stemming them, and telling a typing slip from another word.

use super::vocabulary::{IRREGULAR, STOP_WORDS};

/// Whether `typed` is `word` with one slip of the fingers: a letter left out ("serch",
/// "comit") or two neighbours swapped ("lsit"). Other edits are left alone: a letter changed
/// or added more often makes another real word ("test" and "text", "three" and "tree") or is
/// what the stemmer left ("beginn"), and a first letter is rarely the one mistyped.
pub(super) fn one_slip_from(typed: &str, word: &str) -> bool {
    if !(typed.len() == word.len() || typed.len() + 1 == word.len()) {
        return false;
    }
    let (a, b): (Vec<char>, Vec<char>) = (typed.chars().collect(), word.chars().collect());
    if a.first() != b.first() || a == b {
        return false;
    }
    let head = a.iter().zip(b.iter()).take_while(|(x, y)| x == y).count();
    if a.len() == b.len() {
        head + 1 < a.len() && a[head] == b[head + 1] && a[head + 1] == b[head] && a[head + 2..] == b[head + 2..]
    } else {
        a.len() + 1 == b.len() && a[head..] == b[head + 1..]
    }
}

/// Words split on anything not alphanumeric, lowercased: plain BM25's reading, the baseline.
pub(super) fn plain_tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Splits on non-alphanumerics and camelCase, lowercases, drops stop words, stems.
pub(super) fn tokenize(text: &str) -> Vec<String> {
    raw_tokens(text).iter().map(|w| stem(w)).collect()
}

/// [`tokenize`] without the stemming: the words as written.
pub(super) fn raw_tokens(text: &str) -> Vec<String> {
    split_words(text)
        .into_iter()
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .collect()
}

/// `text` split on non-alphanumerics and camelCase and lowercased, stop words kept.
pub(super) fn split_words(text: &str) -> Vec<String> {
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
}

/// A crude suffix stripper: enough that "listing", "lists" and "listed" meet "list".
pub(super) fn stem(word: &str) -> String {
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
