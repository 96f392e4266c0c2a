//! BERT's uncased tokenizer: the basic tokenizer (clean, lowercase, strip accents, split off
//! punctuation and CJK characters), then WordPiece against the model's vocab.txt.
//!
//! Hand-written rather than the `tokenizers` crate: that one brings regex engines, rayon and
//! a JSON configuration machinery for every tokenizer family, where this model needs the one
//! algorithm below, a few dozen lines, read from the same vocab.txt.

use std::collections::HashMap;

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// A word longer than this many characters is `[UNK]` (BERT's `max_input_chars_per_word`).
const MAX_WORD_CHARS: usize = 100;

/// The vocabulary and the ids of its special tokens.
pub(super) struct WordPiece {
    ids: HashMap<String, u32>,
    cls: u32,
    sep: u32,
    unk: u32,
}

impl WordPiece {
    /// Reads vocab.txt: one token a line, its id the line's number.
    pub(super) fn new(vocab: &str) -> Option<Self> {
        let ids: HashMap<String, u32> = vocab.lines().enumerate().map(|(i, t)| (t.to_string(), i as u32)).collect();
        Some(Self {
            cls: *ids.get("[CLS]")?,
            sep: *ids.get("[SEP]")?,
            unk: *ids.get("[UNK]")?,
            ids,
        })
    }

    /// How many tokens the vocabulary holds.
    pub(super) fn len(&self) -> usize {
        self.ids.len()
    }

    /// `[CLS] text [SEP]`, at most `max` ids in all (the text's end is cut).
    pub(super) fn encode(&self, text: &str, max: usize) -> Vec<u32> {
        let mut out = vec![self.cls];
        let room = max.saturating_sub(1);
        'words: for word in basic_tokens(text) {
            for id in self.pieces(&word) {
                if out.len() >= room {
                    break 'words;
                }
                out.push(id);
            }
        }
        out.push(self.sep);
        out
    }

    /// Greedy longest-match-first pieces of one word; `[UNK]` when any part has no piece.
    fn pieces(&self, word: &str) -> Vec<u32> {
        let chars: Vec<char> = word.chars().collect();
        if chars.len() > MAX_WORD_CHARS {
            return vec![self.unk];
        }
        let mut out = Vec::new();
        let mut start = 0;
        while start < chars.len() {
            let mut end = chars.len();
            let mut found = None;
            while start < end {
                let piece: String = chars[start..end].iter().collect();
                let key = if start > 0 { format!("##{piece}") } else { piece };
                if let Some(id) = self.ids.get(&key) {
                    found = Some(*id);
                    break;
                }
                end -= 1;
            }
            let Some(id) = found else {
                return vec![self.unk];
            };
            out.push(id);
            start = end;
        }
        out
    }
}

/// The basic tokenizer's words: control characters dropped, lowercased, accents stripped,
/// punctuation and CJK ideographs each a word of their own.
fn basic_tokens(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let flush = |cur: &mut String, words: &mut Vec<String>| {
        if !cur.is_empty() {
            words.push(std::mem::take(cur));
        }
    };
    for c in text.chars() {
        if c == '\0' || c == '\u{fffd}' || (c.is_control() && !c.is_whitespace()) {
            continue;
        }
        if c.is_whitespace() {
            flush(&mut cur, &mut words);
            continue;
        }
        if is_cjk(c) || is_punctuation(c) {
            flush(&mut cur, &mut words);
            words.push(c.to_lowercase().collect());
            continue;
        }
        for l in c.to_lowercase() {
            // NFD, then the combining marks dropped: "café" is "cafe".
            cur.extend(std::iter::once(l).nfd().filter(|m| !is_combining_mark(*m)));
        }
    }
    flush(&mut cur, &mut words);
    words
}

/// BERT's punctuation: every ASCII non-alphanumeric printable, and Unicode's punctuation,
/// here the blocks that hold nearly all of it (general punctuation, CJK and full-width marks,
/// Latin-1's quotes and signs).
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(c as u32,
            0x00A1..=0x00BF | 0x2010..=0x2027 | 0x2030..=0x205E | 0x3001..=0x3003 | 0x3008..=0x3011
            | 0x3014..=0x301F | 0xFF01..=0xFF0F | 0xFF1A..=0xFF20 | 0xFF3B..=0xFF40 | 0xFF5B..=0xFF65)
}

/// The CJK ideograph blocks BERT splits one character at a time.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_like_berts_basic_tokenizer() {
        assert_eq!(basic_tokens("Héllo, World!  it's"), ["hello", ",", "world", "!", "it", "'", "s"]);
        assert_eq!(basic_tokens("read_file(\"a.txt\")")[..3], ["read", "_", "file"]);
    }

    /// Ids as the reference tokenizer (Hugging Face `tokenizers`, from the model's own
    /// tokenizer.json) gives them, over the installed vocab.txt: punctuation, accents, CJK,
    /// a symbol that is not punctuation (→), identifiers and a URL.
    #[test]
    fn ids_match_the_reference_tokenizer() {
        let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/.test-deps/venv").to_string();
        let dir = super::super::locate_model("", &[venv]).expect("the model is installed by scripts/install-test-deps.sh");
        let wp = WordPiece::new(&std::fs::read_to_string(dir.join("vocab.txt")).unwrap()).unwrap();
        let cases: [(&str, &[u32]); 3] = [
            (
                "Convert 1,000 CHF → GBP at today's rate (Café «Zürich»)!",
                &[
                    101, 10463, 1015, 1010, 2199, 10381, 2546, 1585, 16351, 2361, 2012, 2651, 1005, 1055, 3446, 1006, 7668, 1077, 10204,
                    1090, 1007, 999, 102,
                ],
            ),
            (
                "get_stock_price: ExchangeNow.convertCurrency 東京 naïve—résumé",
                &[
                    101, 2131, 1035, 4518, 1035, 3976, 1024, 3863, 19779, 1012, 10463, 10841, 14343, 9407, 1879, 1755, 15743, 1517, 13746,
                    102,
                ],
            ),
            (
                "track 1Z999AA10123456784 via api.example.com/v2?id=42",
                &[
                    101, 2650, 1015, 2480, 2683, 2683, 2683, 11057, 10790, 12521, 22022, 26976, 2581, 2620, 2549, 3081, 17928, 1012, 2742,
                    1012, 4012, 1013, 1058, 2475, 1029, 8909, 1027, 4413, 102,
                ],
            ),
        ];
        for (text, ids) in cases {
            assert_eq!(wp.encode(text, 512), ids, "{text}");
        }
    }

    #[test]
    fn wordpiece_takes_the_longest_piece_first() {
        let vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nun\n##aff\n##able\nrun\n";
        let wp = WordPiece::new(vocab).unwrap();
        assert_eq!(wp.encode("unaffable run", 16), [2, 4, 5, 6, 7, 3]);
        assert_eq!(wp.encode("unknownword", 16), [2, 1, 3], "no piece fits: [UNK]");
        assert_eq!(wp.encode("unaffable run", 4), [2, 4, 5, 3], "cut to fit, [SEP] kept");
    }
}
