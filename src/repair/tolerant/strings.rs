//! Strings: the quotes they may be written in, where a string value ends (a quote inside it
//! may be text), and how its text is written as JSON.

use memchr::{memchr, memchr2, memmem};

use super::around::closing_fence_at;
use super::words::is_scalar_token;
use super::{Expect, Kind, Reader, comment_end, is_comment, is_word_byte, starts_value};
use crate::repair::args::RepairStep;

/// The quotes a string can be written in; only `"` is JSON's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Quote {
    /// `"…"`
    Double,
    /// `'…'`
    Single,
    /// `“…”`
    CurlyDouble,
    /// `‘…’`
    CurlySingle,
}

impl Quote {
    /// The quote that opens a string at `i`, if one does.
    pub(super) fn opening_at(b: &[u8], i: usize) -> Option<Quote> {
        match b.get(i)? {
            b'"' => Some(Quote::Double),
            b'\'' => Some(Quote::Single),
            _ if b[i..].starts_with(LEFT_DOUBLE) => Some(Quote::CurlyDouble),
            _ if b[i..].starts_with(LEFT_SINGLE) => Some(Quote::CurlySingle),
            _ => None,
        }
    }

    fn open_len(self) -> usize {
        match self {
            Quote::Double | Quote::Single => 1,
            Quote::CurlyDouble => LEFT_DOUBLE.len(),
            Quote::CurlySingle => LEFT_SINGLE.len(),
        }
    }

    fn closer(self) -> &'static [u8] {
        match self {
            Quote::Double => b"\"",
            Quote::Single => b"'",
            Quote::CurlyDouble => RIGHT_DOUBLE,
            Quote::CurlySingle => RIGHT_SINGLE,
        }
    }

    /// The next backslash or possible closing quote at or after `from`.
    fn next_stop(self, b: &[u8], from: usize) -> Option<usize> {
        let first = self.closer()[0];
        memchr2(b'\\', first, b.get(from..)?).map(|p| from + p)
    }

    fn closes_at(self, b: &[u8], j: usize) -> bool {
        b[j..].starts_with(self.closer())
    }
}

const LEFT_DOUBLE: &[u8] = "“".as_bytes();
const RIGHT_DOUBLE: &[u8] = "”".as_bytes();
const LEFT_SINGLE: &[u8] = "‘".as_bytes();
const RIGHT_SINGLE: &[u8] = "’".as_bytes();

/// What a quote inside a string value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// It closes the string.
    Close,
    /// It belongs to the string.
    Content,
    /// It could be either: refuse.
    Ambiguous,
}

impl Reader<'_> {
    /// A key in quotes: it ends at its first closing quote (quotes inside keys are not read
    /// as text).
    pub(super) fn string_key(&mut self, quote: Quote) -> Result<(), String> {
        if quote != Quote::Double {
            self.steps.add(RepairStep::SingleQuotes);
        }
        let start = self.i + quote.open_len();
        let mut j = start;
        while let Some(stop) = quote.next_stop(self.b, j) {
            if self.b[stop] == b'\\' {
                j = stop + 2;
                continue;
            }
            if quote.closes_at(self.b, stop) {
                self.emit_string(start, stop);
                self.i = stop + quote.closer().len();
                self.expect = Expect::Colon;
                return Ok(());
            }
            j = stop + 1;
        }
        // Cut inside the key: a dangling key, dropped at the end. A key that runs on past a
        // colon, a comma, a bracket or a line end lost its closing quote instead.
        if self.b[start..]
            .iter()
            .any(|c| matches!(c, b':' | b',' | b'{' | b'}' | b'[' | b']' | b'\n'))
        {
            return Err(format!("the key at byte {} has no closing quote", self.i));
        }
        self.i = self.b.len();
        Ok(())
    }

    /// A string value: each quote that could close it is judged by what follows it
    /// ([`Reader::verdict`]); one still open at the end lacked its quote before the closers, or
    /// was cut.
    pub(super) fn string_value(&mut self, quote: Quote) -> Result<(), String> {
        if quote != Quote::Double {
            self.steps.add(RepairStep::SingleQuotes);
        }
        let start = self.i + quote.open_len();
        let mut j = start;
        while let Some(stop) = quote.next_stop(self.b, j) {
            if self.b[stop] == b'\\' {
                j = stop + 2;
                continue;
            }
            if !quote.closes_at(self.b, stop) {
                j = stop + 1;
                continue;
            }
            let after = stop + quote.closer().len();
            match self.verdict(after, quote) {
                Verdict::Close => {
                    self.emit_string(start, stop);
                    self.i = after;
                    self.complete_value();
                    return Ok(());
                }
                // `""value"`: a doubled opening quote, or a value that starts with a quote.
                Verdict::Content if stop == start => {
                    return Err(format!("the string at byte {} opens with two quotes", self.i));
                }
                // `["a,⏎"b"]`: a line that ends in a comma and one that starts with a quote; the
                // first string may have lost its closing quote before the comma.
                Verdict::Content if opens_a_line_after_a_comma(&self.b[start..stop]) => {
                    return Err(format!("the quote at byte {stop} may open a string of its own"));
                }
                Verdict::Content => {
                    self.steps.add(RepairStep::EmbeddedQuotes);
                    j = after;
                }
                Verdict::Ambiguous => {
                    return Err(format!("the quote at byte {stop} could close its string or belong to it"));
                }
            }
        }
        if let Some(cut) = self.closing_tail(start) {
            // `{"url": "https://x.org/}`: the closers at the end close what is open, and the
            // string opens nothing of its own, so they are not its text.
            self.steps.add(RepairStep::MissingQuote);
            self.emit_string(start, cut);
            self.i = cut;
            self.complete_value();
            return Ok(());
        }
        // Cut mid-way: closed where it was cut, less an escape the cut left incomplete.
        let kept = trim_partial_escape(&self.s[start..]).len();
        self.steps.add(RepairStep::CloseBrackets);
        self.emit_string(start, start + kept);
        self.i = self.b.len();
        self.complete_value();
        Ok(())
    }

    /// Whether the quote that ended just before `after` closes its string value.
    fn verdict(&self, after: usize, quote: Quote) -> Verdict {
        let b = self.b;
        let (k, newline) = skip_blank(b, after);
        let Some(&c) = b.get(k) else { return Verdict::Close };
        let spaced = k > after;
        match c {
            b',' | b'}' | b']' => Verdict::Close,
            b':' => Verdict::Ambiguous,
            b'#' | b'/' if is_comment(b, k) => self.after_comment(k, quote, newline),
            // A closing fence at the very end closes the string; anywhere else it is text.
            b'`' if closing_fence_at(b, k) => Verdict::Close,
            _ if newline && self.member_starts_at(k) => Verdict::Close,
            // Two quotes side by side: the second closes the string (`"say "hi""`) only when what
            // follows it could follow a value; before text they could be two strings (`"a""b"`).
            _ if !spaced && quote.closes_at(b, k) => {
                if self.ends_value_at(k + quote.closer().len()) {
                    Verdict::Content
                } else {
                    Verdict::Ambiguous
                }
            }
            // Another value after a space (a string, a bracket, a number, a literal): a comma
            // missing on one line, or quotes inside one string; no reading is the only one.
            _ if spaced && (starts_string(b, k) || matches!(c, b'{' | b'[') || is_scalar_token(b, k)) => Verdict::Ambiguous,
            _ => Verdict::Content,
        }
    }

    /// Whether what follows `k` (past white space) can follow a value: a comma, a closer, the
    /// end, a member on the next line.
    fn ends_value_at(&self, k: usize) -> bool {
        let b = self.b;
        let (j, newline) = skip_blank(b, k);
        match b.get(j) {
            None | Some(b',' | b'}' | b']') => true,
            Some(_) => newline && self.member_starts_at(j),
        }
    }

    /// A comment right after a quote: the quote closes its string only when the comments after
    /// it hold no quote of its kind and a closer, comma or member follows them (or, after a
    /// `//` or `/*` comment, the end: `#` is too common inside text to end one there).
    fn after_comment(&self, k: usize, quote: Quote, mut newline: bool) -> Verdict {
        let b = self.b;
        let mut j = k;
        let mut last_comment = k;
        while let Some(&c) = b.get(j) {
            match c {
                b' ' | b'\t' | b'\r' => j += 1,
                b'\n' => {
                    newline = true;
                    j += 1;
                }
                b'#' | b'/' if is_comment(b, j) => {
                    let end = comment_end(b, j);
                    if memchr(quote.closer()[0], &b[j..end]).is_some() {
                        return Verdict::Ambiguous;
                    }
                    last_comment = j;
                    j = end;
                }
                _ => break,
            }
        }
        match b.get(j) {
            None if b[last_comment] == b'/' => Verdict::Close,
            Some(b',' | b'}' | b']') => Verdict::Close,
            Some(_) if newline && self.member_starts_at(j) => Verdict::Close,
            _ => Verdict::Ambiguous,
        }
    }

    /// Whether a member of the open container starts at `k`: a key and its colon in an object
    /// (on one line), any value in an array.
    pub(super) fn member_starts_at(&self, k: usize) -> bool {
        let b = self.b;
        match self.stack.top() {
            None => false,
            Some(Kind::Array) => starts_value(b, k),
            Some(Kind::Object) => {
                let end = match Quote::opening_at(b, k) {
                    Some(quote) => {
                        let start = k + quote.open_len();
                        let line_end = memchr(b'\n', &b[start..]).map_or(b.len(), |p| start + p);
                        let line = &b[start..line_end];
                        match memmem::find(line, quote.closer()) {
                            Some(p) => start + p + quote.closer().len(),
                            None => return false,
                        }
                    }
                    None => {
                        let mut j = k;
                        while is_word_byte(b, j) {
                            j += 1;
                        }
                        if j == k {
                            return false;
                        }
                        j
                    }
                };
                let mut j = end;
                while matches!(b.get(j), Some(b' ' | b'\t')) {
                    j += 1;
                }
                b.get(j) == Some(&b':')
            }
        }
    }

    /// Where the closers at the end of an open string value begin, when they close (from the
    /// top) what is open, and the string's text before them opens no bracket of its own; white
    /// space around them, and a closing fence after them, go with them.
    fn closing_tail(&self, start: usize) -> Option<usize> {
        let b = self.b;
        let mut end = b.len();
        while end > start && b[end - 1].is_ascii_whitespace() {
            end -= 1;
        }
        let ticks = b[start..end].iter().rev().take_while(|c| **c == b'`').count();
        if ticks >= 3 {
            end -= ticks;
        }
        let mut cut = end;
        while cut > start && matches!(b[cut - 1], b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n') {
            cut -= 1;
        }
        let closers = b[cut..end].iter().filter(|c| matches!(c, b'}' | b']'));
        let mut open = self.stack.kinds.iter().rev();
        let mut count = 0;
        for &c in closers {
            if open.next() != Some(&Kind::of(c)) {
                return None;
            }
            count += 1;
        }
        if count == 0 {
            return None;
        }
        let mut depth = 0usize;
        for &c in &b[start..cut] {
            match c {
                b'{' | b'[' => depth += 1,
                b'}' | b']' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        (depth == 0).then_some(cut)
    }

    /// Writes `b[start..end]` as a JSON string: quotes inside escaped, raw line ends and tabs
    /// escaped, other control characters dropped, escapes kept as written.
    fn emit_string(&mut self, start: usize, end: usize) {
        let raw = &self.b[start..end];
        self.out.push(b'"');
        let mut k = 0;
        while k < raw.len() {
            let c = raw[k];
            match c {
                b'\\' => {
                    match raw.get(k + 1) {
                        // `\'` is JavaScript's: the quote alone.
                        Some(b'\'') => {
                            self.out.push(b'\'');
                            self.steps.add(RepairStep::SingleQuotes);
                        }
                        Some(&n) => self.out.extend_from_slice(&[b'\\', n]),
                        None => {}
                    }
                    k += 2;
                    continue;
                }
                b'"' => self.out.extend_from_slice(b"\\\""),
                b'\n' => self.out.extend_from_slice(b"\\n"),
                b'\r' => self.out.extend_from_slice(b"\\r"),
                b'\t' => self.out.extend_from_slice(b"\\t"),
                c if c < 0x20 => {}
                c => self.out.push(c),
            }
            if c < 0x20 {
                self.steps.add(RepairStep::ControlChars);
            }
            k += 1;
        }
        self.out.push(b'"');
    }
}

/// Whether the end of `text` is a line start (white space only since a line break) after a
/// line that ends in a comma.
fn opens_a_line_after_a_comma(text: &[u8]) -> bool {
    let indent = text.iter().rev().take_while(|c| matches!(c, b' ' | b'\t')).count();
    let before = &text[..text.len() - indent];
    let Some(line) = before.strip_suffix(b"\n").map(|l| l.strip_suffix(b"\r").unwrap_or(l)) else {
        return false;
    };
    line.iter().rev().find(|c| !matches!(c, b' ' | b'\t')) == Some(&b',')
}

/// Removes from an unterminated string the escape the cut left incomplete, and only that: a
/// lone backslash, a `\u` with fewer than four hex digits, and a high surrogate (`\ud83d`)
/// whose low half was cut (with or without the start of that half).
fn trim_partial_escape(s: &str) -> &str {
    let s = trim_incomplete_escape(s);
    match last_unicode_escape(s) {
        Some((pos, unit)) if (0xD800..0xDC00).contains(&unit) && pos + 6 == s.len() => &s[..pos],
        _ => s,
    }
}

/// `s` without a trailing lone backslash or a `\u` escape cut before its fourth hex digit.
fn trim_incomplete_escape(s: &str) -> &str {
    let bytes = s.as_bytes();
    if let Some(pos) = s.rfind("\\u")
        && escapes_at(bytes, pos)
    {
        let hex = &s[pos + 2..];
        if hex.len() < 4 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return &s[..pos];
        }
    }
    let trailing = bytes.iter().rev().take_while(|b| **b == b'\\').count();
    if trailing % 2 == 1 { &s[..s.len() - 1] } else { s }
}

/// The last `\uXXXX` escape of `s` that is complete: its offset and its code unit.
fn last_unicode_escape(s: &str) -> Option<(usize, u32)> {
    let pos = s.rfind("\\u")?;
    let hex = s.get(pos + 2..pos + 6)?;
    let unit = u32::from_str_radix(hex, 16).ok()?;
    escapes_at(s.as_bytes(), pos).then_some((pos, unit))
}

/// Whether the backslash at `pos` starts an escape (an even number of backslashes before it),
/// rather than being the second half of an escaped backslash.
fn escapes_at(bytes: &[u8], pos: usize) -> bool {
    bytes[..pos].iter().rev().take_while(|b| **b == b'\\').count() % 2 == 0
}

pub(super) fn is_right_quote(b: &[u8], j: usize) -> bool {
    b[j..].starts_with(RIGHT_DOUBLE) || b[j..].starts_with(RIGHT_SINGLE)
}

pub(super) fn starts_string(b: &[u8], k: usize) -> bool {
    Quote::opening_at(b, k).is_some()
}

/// The first byte at or after `k` that is not white space, and whether a line ended before it.
fn skip_blank(b: &[u8], mut k: usize) -> (usize, bool) {
    let mut newline = false;
    while let Some(&c) = b.get(k) {
        match c {
            b' ' | b'\t' | b'\r' => k += 1,
            b'\n' => {
                newline = true;
                k += 1;
            }
            _ => break,
        }
    }
    (k, newline)
}
