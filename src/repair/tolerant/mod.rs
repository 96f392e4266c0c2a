//! The tolerant reader behind the argument ladder: one pass over damaged argument text that
//! writes strict JSON for serde_json, and names each repair it made.
//!
//! A model's arguments break in a few ways: the syntax of another language (single quotes,
//! `True`, unquoted keys, comments), a fence or a line of prose around the object, a token
//! left out (a comma between lines, a colon, a closing quote or bracket), or a token too many
//! or of the wrong kind. [`read`] walks the text once with a stack of open brackets, writes
//! what it reads as strict JSON, and repairs a fault only where the text can be read one way;
//! anywhere else it refuses, since a wrong value that runs is worse than a call that asks again.
//!
//! # How each fault is read
//! - A quote inside a string value closes it when what follows can follow a value (`,`, a
//!   closer, the end, a comment that ends before one, or a member on the next line); before a
//!   letter, a digit or punctuation it is content and is escaped; before a colon, or before
//!   another value after a space, it could be either, and the text is refused.
//! - A string still open at the end whose text ends in closers that close what is open, and
//!   that opens no bracket of its own, lacked its closing quote before them
//!   (`{"url": "https://x.org/}`); any other open string was cut, and keeps all it holds.
//! - A closer of the wrong kind is read the way that needs the fewest edits of the text after
//!   it: as the closer that was open (a typo), or as closing what it matches and all above it
//!   (closers left out). When both readings need as many edits and give different values,
//!   the text is refused.
//! - A missing comma is added only where a line break separates two members or elements, and
//!   a missing colon only where the value follows its key on the same line.
//! - A value is never invented: a key without one is dropped, and a number keeps only the
//!   digits that were written (`2.` is 2, `-` alone is dropped).
//!
//! Every loop advances through the text, and what it looks ahead at is either consumed next
//! or ends the read, so the cost stays linear in the input (a mismatched closer followed by
//! more text is read twice from there, once each way, and only once per text).
//!
//! # Files
//! This file holds the reader's structure (brackets, keys, commas, colons, closers);
//! `strings` where a string ends and how its text is written; `words` literals, numbers and
//! unquoted keys; `around` the fence and prose around the object, and what may follow it.

use memchr::{memchr, memmem};
use serde_json::Value;

use super::args::{RepairStep, StepSet};

mod around;
mod strings;
mod words;

use around::{closing_fence_at, locate};
use strings::{Quote, is_right_quote, starts_string};

/// What the reader made of a text.
#[derive(Debug, Clone)]
pub(super) struct Read {
    /// The value the repaired text parses to.
    pub value: Value,
    /// The repairs made.
    pub steps: StepSet,
    /// How many closers were added, removed or changed: the cost that picks between the two
    /// readings of a mismatched closer.
    edits: usize,
}

/// Reads `text` (already without leading white space) as one JSON value, repairing what can be
/// repaired one way only.
///
/// # Errors
/// Why the text was refused, in words.
pub(super) fn read(text: &str) -> Result<Read, String> {
    let (start, framed) = locate(text)?;
    let mut reader = Reader::new(text, start);
    if framed {
        reader.steps.add(RepairStep::SurroundingText);
    }
    reader.run()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Object,
    Array,
}

impl Kind {
    fn of(closer: u8) -> Kind {
        if closer == b'}' { Kind::Object } else { Kind::Array }
    }

    fn closer(self) -> u8 {
        match self {
            Kind::Object => b'}',
            Kind::Array => b']',
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// After `{` or `,` in an object: a key (or `}`).
    Key,
    /// After a key: `:`.
    Colon,
    /// After `:`, or `[` or `,` in an array: a value.
    Value,
    /// After a complete value: `,` or a closer.
    AfterValue,
}

/// The open brackets, with a count of each kind, so "is an object open anywhere?" costs
/// nothing however deep the nesting.
#[derive(Debug, Clone, Default)]
struct Stack {
    kinds: Vec<Kind>,
    objects: usize,
    arrays: usize,
}

impl Stack {
    fn push(&mut self, kind: Kind) {
        match kind {
            Kind::Object => self.objects += 1,
            Kind::Array => self.arrays += 1,
        }
        self.kinds.push(kind);
    }

    fn pop(&mut self) -> Option<Kind> {
        let kind = self.kinds.pop()?;
        match kind {
            Kind::Object => self.objects -= 1,
            Kind::Array => self.arrays -= 1,
        }
        Some(kind)
    }

    fn top(&self) -> Option<Kind> {
        self.kinds.last().copied()
    }

    fn holds(&self, kind: Kind) -> bool {
        match kind {
            Kind::Object => self.objects > 0,
            Kind::Array => self.arrays > 0,
        }
    }
}

#[derive(Debug, Clone)]
struct Reader<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    out: Vec<u8>,
    stack: Stack,
    expect: Expect,
    /// Right after `[`: a comma here is a stray one.
    fresh: bool,
    /// The last point where the output, plus closers for the stack, is valid JSON. (Every
    /// change of the stack is such a point, so the stack then is the stack now: it needs no
    /// copy, which would cost its depth per value and make deep nesting quadratic.)
    safe_len: usize,
    root_done: bool,
    steps: StepSet,
    edits: usize,
    /// Inside one reading of a mismatched closer: a second one is not read both ways again.
    speculated: bool,
    /// The last run of closers, white space and comments measured: `(from, to)`.
    closer_run: (usize, usize),
    /// The text ends inside a comment.
    comment_to_end: bool,
}

impl<'a> Reader<'a> {
    fn new(s: &'a str, start: usize) -> Self {
        Reader {
            s,
            b: s.as_bytes(),
            i: start,
            out: Vec::with_capacity(s.len() + 8),
            stack: Stack::default(),
            expect: Expect::Value,
            fresh: false,
            safe_len: 0,
            root_done: false,
            steps: StepSet::default(),
            edits: 0,
            speculated: false,
            closer_run: (usize::MAX, 0),
            comment_to_end: false,
        }
    }

    fn run(mut self) -> Result<Read, String> {
        loop {
            let newline = self.skip_space();
            let Some(&c) = self.b.get(self.i) else { break };
            if c == b'`' && closing_fence_at(self.b, self.i) {
                // A closing fence at the very end: the arguments end before it.
                self.steps.add(RepairStep::SurroundingText);
                break;
            }
            if self.root_done {
                if self.after_root(c, newline)? {
                    break;
                }
                continue;
            }
            if matches!(c, b'}' | b']')
                && let Some(top) = self.stack.top()
                && top != Kind::of(c)
                && self.text_follows(self.i + 1)
            {
                return self.mismatched(c);
            }
            match self.expect {
                Expect::Value => self.value(c)?,
                Expect::Key => self.key(c)?,
                Expect::Colon => self.colon(c, newline)?,
                Expect::AfterValue => self.after_value(c, newline)?,
            }
        }
        self.finish()
    }

    /// Closes what is open at the end and parses the output.
    fn finish(mut self) -> Result<Read, String> {
        if !self.root_done {
            if self.comment_to_end && self.out.len() > self.safe_len + 1 {
                // `{"url": //x.org}`: what reads as a comment may be the value, unquoted; a key
                // is dropped only where the text was cut.
                return Err("a key whose value a comment may hold".to_string());
            }
            self.drop_dangling(/*at_closer*/ false);
            while let Some(kind) = self.stack.pop() {
                self.out.push(kind.closer());
                self.steps.add(RepairStep::CloseBrackets);
                self.edits += 1;
            }
        }
        let value = serde_json::from_slice(&self.out).map_err(|e| e.to_string())?;
        Ok(Read {
            value,
            steps: self.steps,
            edits: self.edits,
        })
    }

    /// Skips white space and comments; true when a line ended on the way.
    fn skip_space(&mut self) -> bool {
        let mut newline = false;
        while let Some(&c) = self.b.get(self.i) {
            match c {
                b' ' | b'\t' | b'\r' => self.i += 1,
                b'\n' => {
                    newline = true;
                    self.i += 1;
                }
                b'#' | b'/' if is_comment(self.b, self.i) => {
                    let end = comment_end(self.b, self.i);
                    newline |= memchr(b'\n', &self.b[self.i..end]).is_some();
                    self.comment_to_end = end == self.b.len();
                    self.steps.add(RepairStep::Comments);
                    self.i = end;
                }
                c if c < 0x20 => {
                    self.steps.add(RepairStep::ControlChars);
                    self.i += 1;
                }
                _ => break,
            }
        }
        newline
    }

    fn unexpected(&self) -> String {
        let what = self.s.get(self.i..).and_then(|t| t.chars().next()).unwrap_or('?');
        format!("unexpected {what:?} at byte {}", self.i)
    }

    /// Marks the end of a complete value.
    fn complete_value(&mut self) {
        self.expect = Expect::AfterValue;
        self.root_done = self.stack.kinds.is_empty();
        self.fresh = false;
        self.safe_len = self.out.len();
    }

    /// Drops a key, colon or comma left dangling since the last complete value: at a closer a
    /// lone comma is a trailing comma; anything else, or at the end, was cut.
    fn drop_dangling(&mut self, at_closer: bool) {
        if self.out.len() != self.safe_len {
            let lone_comma = &self.out[self.safe_len..] == b",";
            self.steps.add(if at_closer && lone_comma {
                RepairStep::TrailingCommas
            } else {
                RepairStep::CloseBrackets
            });
            self.out.truncate(self.safe_len);
        }
    }

    fn value(&mut self, c: u8) -> Result<(), String> {
        match c {
            b'{' | b'[' => {
                let kind = if c == b'{' { Kind::Object } else { Kind::Array };
                self.stack.push(kind);
                self.out.push(c);
                self.i += 1;
                self.expect = if kind == Kind::Object { Expect::Key } else { Expect::Value };
                self.safe_len = self.out.len();
                self.fresh = true;
                Ok(())
            }
            b'}' | b']' => self.closer(c),
            b'-' | b'0'..=b'9' => self.number(),
            b',' if self.fresh || self.stack.kinds.is_empty() => {
                // A leading comma: before the first element, or before the root.
                self.steps.add(RepairStep::StrayCommas);
                self.i += 1;
                Ok(())
            }
            c if c.is_ascii_alphabetic() => self.literal(),
            _ => match Quote::opening_at(self.b, self.i) {
                Some(quote) => self.string_value(quote),
                None => Err(self.unexpected()),
            },
        }
    }

    fn key(&mut self, c: u8) -> Result<(), String> {
        match c {
            b'}' | b']' => self.closer(c),
            b',' => {
                // A comma where a key belongs: leading or doubled; nothing stands for it.
                self.steps.add(RepairStep::StrayCommas);
                self.i += 1;
                Ok(())
            }
            _ => match Quote::opening_at(self.b, self.i) {
                Some(quote) => self.string_key(quote),
                None if is_word_byte(self.b, self.i) => self.unquoted_key(),
                None => Err(self.unexpected()),
            },
        }
    }

    fn colon(&mut self, c: u8, newline: bool) -> Result<(), String> {
        match c {
            b':' => {
                self.out.push(b':');
                self.i += 1;
                self.expect = Expect::Value;
                Ok(())
            }
            b'}' | b']' => self.closer(c),
            // On the same line, a value right after its key lacks only the colon; across a
            // line it could as well be a key whose value is missing.
            _ if !newline && starts_value(self.b, self.i) => {
                self.out.push(b':');
                self.steps.add(RepairStep::MissingColons);
                self.expect = Expect::Value;
                Ok(())
            }
            _ => Err(self.unexpected()),
        }
    }

    fn after_value(&mut self, c: u8, newline: bool) -> Result<(), String> {
        match c {
            b',' => {
                self.out.push(b',');
                self.i += 1;
                self.expect_next();
                Ok(())
            }
            b'}' | b']' => self.closer(c),
            // Members on separate lines with no comma between them; on one line, two tokens side
            // by side could be one value that lost its quotes as well.
            _ if newline && self.member_starts_at(self.i) => {
                self.out.push(b',');
                self.steps.add(RepairStep::MissingCommas);
                self.expect_next();
                Ok(())
            }
            _ => Err(self.unexpected()),
        }
    }

    fn expect_next(&mut self) {
        self.expect = if self.stack.top() == Some(Kind::Object) {
            Expect::Key
        } else {
            Expect::Value
        };
        self.fresh = false;
    }

    /// A closer read the default way: it closes what it matches and, first, all that is open
    /// above that; one that matches nothing open is dropped.
    fn closer(&mut self, c: u8) -> Result<(), String> {
        let kind = Kind::of(c);
        if self.stack.top().is_some_and(|top| top != kind) {
            self.steps.add(RepairStep::MismatchedClosers);
        }
        if !self.stack.holds(kind) {
            if matches!(self.expect, Expect::Colon | Expect::Value) && self.out.len() > self.safe_len + 1 {
                // `{"a": "x", "b"]}`: a key, then a closer that closes nothing; dropping both
                // would lose a member the model wrote.
                return Err(format!("a closer that matches nothing after a key, at byte {}", self.i));
            }
            self.i += 1;
            self.steps.add(RepairStep::ExtraClosers);
            self.edits += 1;
            return Ok(());
        }
        self.i += 1;
        self.drop_dangling(/*at_closer*/ true);
        while let Some(top) = self.stack.top()
            && top != kind
        {
            self.stack.pop();
            self.out.push(top.closer());
            self.steps.add(RepairStep::CloseBrackets);
            self.edits += 1;
        }
        self.stack.pop();
        self.out.push(c);
        self.complete_value();
        Ok(())
    }

    /// A closer of the wrong kind with more text after it: read both ways to the end, and
    /// keep the reading that needed fewer edits.
    fn mismatched(mut self, c: u8) -> Result<Read, String> {
        if self.speculated {
            return Err(format!("a second mismatched closer at byte {}", self.i));
        }
        self.speculated = true;
        let mut closed = self.clone();
        let closed = closed.closer(c).and_then(|()| closed.run());
        // The typo reading: the closer of what is open was meant.
        self.i += 1;
        self.drop_dangling(/*at_closer*/ true);
        if let Some(top) = self.stack.pop() {
            self.out.push(top.closer());
        }
        self.steps.add(RepairStep::MismatchedClosers);
        self.edits += 1;
        self.complete_value();
        let typo = self.run();
        match (closed, typo) {
            (Ok(a), Ok(b)) => {
                if a.edits < b.edits || (a.edits == b.edits && a.value == b.value) {
                    Ok(a)
                } else if b.edits < a.edits {
                    Ok(b)
                } else {
                    Err("a mismatched closer can be read two ways".to_string())
                }
            }
            (Ok(a), Err(_)) => Ok(a),
            (Err(_), Ok(b)) => Ok(b),
            (Err(e), Err(_)) => Err(e),
        }
    }

    /// Whether anything but closers, white space and comments follows `from`.
    fn text_follows(&mut self, from: usize) -> bool {
        let (start, end) = self.closer_run;
        if start <= from && from <= end {
            return end < self.b.len();
        }
        let mut j = from;
        while let Some(&c) = self.b.get(j) {
            match c {
                b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n' => j += 1,
                b'#' | b'/' if is_comment(self.b, j) => j = comment_end(self.b, j),
                _ => break,
            }
        }
        self.closer_run = (from, j);
        j < self.b.len()
    }
}

fn is_comment(b: &[u8], i: usize) -> bool {
    match b.get(i) {
        Some(b'#') => true,
        Some(b'/') => matches!(b.get(i + 1), Some(b'/' | b'*')),
        _ => false,
    }
}

/// The end of the comment at `i` (before the line end that ends a line comment; after `*/`;
/// the end of the text when it never ends).
fn comment_end(b: &[u8], i: usize) -> usize {
    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
        return memmem::find(&b[i + 2..], b"*/").map_or(b.len(), |p| i + 2 + p + 2);
    }
    memchr(b'\n', &b[i..]).map_or(b.len(), |p| i + p)
}

/// A byte of an unquoted key: ASCII letters, digits, `_`, `$`, `-`, `.`, and any other
/// character but typographic quotes.
fn is_word_byte(b: &[u8], j: usize) -> bool {
    match b.get(j) {
        Some(c) if c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'-' | b'.') => true,
        Some(c) if *c >= 0x80 => !starts_string(b, j) && !is_right_quote(b, j),
        _ => false,
    }
}

fn starts_value(b: &[u8], k: usize) -> bool {
    match b.get(k) {
        Some(b'{' | b'[' | b'-' | b'0'..=b'9') => true,
        Some(c) if c.is_ascii_alphabetic() => true,
        _ => starts_string(b, k),
    }
}
