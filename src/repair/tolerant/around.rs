//! What may stand around the arguments: a markdown fence, lines of prose, and, after the root
//! value, a stray comma, extra closers, the closing fence.

use memchr::memchr2;

use super::{Reader, is_word_byte};
use crate::repair::args::RepairStep;

impl Reader<'_> {
    /// After the root value: returns true when the rest of the text is read.
    pub(super) fn after_root(&mut self, c: u8, newline: bool) -> Result<bool, String> {
        match c {
            b',' => {
                self.steps.add(RepairStep::StrayCommas);
                self.i += 1;
                Ok(false)
            }
            b'}' | b']' => {
                self.steps.add(RepairStep::ExtraClosers);
                self.edits += 1;
                self.i += 1;
                Ok(false)
            }
            b'`' if self.b[self.i..].starts_with(b"```") => {
                // The closing fence, and what follows it.
                let rest = &self.s[self.i + backtick_run(self.b, self.i)..];
                if rest.trim().is_empty() || is_prose(rest) {
                    self.steps.add(RepairStep::SurroundingText);
                    Ok(true)
                } else {
                    Err("text after the closing fence".to_string())
                }
            }
            _ if newline && is_prose(&self.s[self.i..]) => {
                self.steps.add(RepairStep::SurroundingText);
                Ok(true)
            }
            _ => Err(format!("{} after the arguments", self.unexpected())),
        }
    }
}

/// Where the object starts, and whether a fence or prose stood before it: a markdown fence
/// around one object (with prose before it, on its line or above), or lines of prose above an
/// object that starts a line. Anything else is read from the start.
pub(super) fn locate(text: &str) -> Result<(usize, bool), String> {
    let b = text.as_bytes();
    if b.starts_with(b"```") {
        return fenced(b, 0);
    }
    if !starts_prose(text) {
        return Ok((0, false));
    }
    let Some(p) = memchr2(b'{', b'`', b).and_then(|p| {
        let mut p = p;
        // The first `{`, or the first fence (a lone backtick is prose's inline code).
        loop {
            if b[p] == b'{' || b[p..].starts_with(b"```") {
                return Some(p);
            }
            p = p + 1 + memchr2(b'{', b'`', &b[p + 1..])?;
        }
    }) else {
        return Ok((0, false));
    };
    let prefix = &text[..p];
    if b[p] == b'`' {
        if !is_prose(prefix) {
            return Err("text before the fence is not prose".to_string());
        }
        return fenced(b, p);
    }
    match prefix.rfind('\n') {
        Some(line) if prefix[line + 1..].trim().is_empty() && is_prose(&prefix[..line]) => Ok((p, true)),
        _ => Err("an object inside a line of text".to_string()),
    }
}

/// The object inside the fence that opens at `p`.
fn fenced(b: &[u8], p: usize) -> Result<(usize, bool), String> {
    let mut k = p + backtick_run(b, p);
    while b
        .get(k)
        .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'+' | b'.' | b'-'))
    {
        k += 1;
    }
    while b.get(k).is_some_and(u8::is_ascii_whitespace) {
        k += 1;
    }
    if b.get(k) == Some(&b'{') {
        Ok((k, true))
    } else {
        Err("the fence holds no object".to_string())
    }
}

/// Whether `text` reads as prose around the arguments: it starts with a letter, holds no
/// bracket or fence (so no second object), and no line of it reads as a member (`name: value`).
fn is_prose(text: &str) -> bool {
    let t = text.trim_start();
    starts_prose(t) && !t.bytes().any(|c| matches!(c, b'{' | b'}' | b'[' | b']')) && !t.contains("```") && !t.lines().any(reads_as_member)
}

/// Whether `text` starts the way prose does: with a letter, or markdown's emphasis, quote or
/// a parenthesis before one.
fn starts_prose(text: &str) -> bool {
    text.trim_start_matches(['*', '_', '>', '(', ' '])
        .chars()
        .next()
        .is_some_and(char::is_alphabetic)
}

/// `name: value` on one line.
fn reads_as_member(line: &str) -> bool {
    let b = line.trim_start().as_bytes();
    let mut j = 0;
    while is_word_byte(b, j) {
        j += 1;
    }
    if j == 0 {
        return false;
    }
    let rest = std::str::from_utf8(&b[j..]).unwrap_or("").trim_start();
    rest.strip_prefix(':').is_some_and(|v| !v.trim().is_empty())
}

/// Whether a fence at `i` ends the text (white space may follow it).
pub(super) fn closing_fence_at(b: &[u8], i: usize) -> bool {
    let run = backtick_run(b, i);
    run >= 3 && b[i + run..].iter().all(u8::is_ascii_whitespace)
}

fn backtick_run(b: &[u8], i: usize) -> usize {
    b[i..].iter().take_while(|c| **c == b'`').count()
}
