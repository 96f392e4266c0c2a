//! Words and numbers: literals (`true`, and `True`), numbers (and those cut after `.` or their
//! exponent), and keys written without quotes.

use super::{Expect, Reader, is_comment, is_word_byte};
use crate::repair::args::RepairStep;

impl Reader<'_> {
    /// `true`, `false`, `null` in any case, `None`; one cut at the end is finished.
    pub(super) fn literal(&mut self) -> Result<(), String> {
        let end = self.b[self.i..]
            .iter()
            .position(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
            .map_or(self.b.len(), |p| self.i + p);
        let word = &self.s[self.i..end];
        let literal = if let Some(literal) = ["true", "false", "null", "none"].into_iter().find(|w| word.eq_ignore_ascii_case(w)) {
            let literal = if literal == "none" { "null" } else { literal };
            if literal != word {
                self.steps.add(RepairStep::PythonLiterals);
            }
            literal
        } else if end == self.b.len()
            && let Some((full, literal)) = [
                ("true", "true"),
                ("false", "false"),
                ("null", "null"),
                ("True", "true"),
                ("False", "false"),
                ("None", "null"),
            ]
            .into_iter()
            .find(|(full, _)| full.starts_with(word))
        {
            // Cut mid-literal at the end: there is only one way to finish it.
            self.steps.add(RepairStep::CloseBrackets);
            if full != literal {
                self.steps.add(RepairStep::PythonLiterals);
            }
            literal
        } else {
            return Err(format!("{word:?} at byte {} is not a JSON value", self.i));
        };
        self.out.extend_from_slice(literal.as_bytes());
        self.i = end;
        self.complete_value();
        Ok(())
    }

    /// A JSON number; one that ends in `.` or an exponent without digits keeps the digits
    /// written, and `-` cut at the end is dropped with its key.
    pub(super) fn number(&mut self) -> Result<(), String> {
        let b = self.b;
        let start = self.i;
        let mut j = start;
        if b[j] == b'-' {
            j += 1;
        }
        let int_start = j;
        j = skip_digits(b, j);
        if j == int_start {
            if j == b.len() {
                // `-` cut at the end: no value was written; its key goes with it.
                self.i = j;
                return Ok(());
            }
            return Err(self.unexpected());
        }
        if b[int_start] == b'0' && j - int_start > 1 {
            return Err(format!("a number with a leading zero at byte {start}"));
        }
        self.out.extend_from_slice(&b[start..j]);
        let mut incomplete = false;
        if b.get(j) == Some(&b'.') {
            let digits = skip_digits(b, j + 1);
            if digits > j + 1 {
                self.out.extend_from_slice(&b[j..digits]);
            } else {
                incomplete = true;
            }
            j = digits;
        }
        if matches!(b.get(j), Some(b'e' | b'E')) {
            let mut k = j + 1;
            if matches!(b.get(k), Some(b'+' | b'-')) {
                k += 1;
            }
            let digits = skip_digits(b, k);
            if digits > k {
                self.out.extend_from_slice(&b[j..digits]);
            } else {
                incomplete = true;
            }
            j = digits;
        }
        if let Some(&c) = b.get(j)
            && !(matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n') || is_comment(b, j))
        {
            return Err(format!("a malformed number at byte {start}"));
        }
        if incomplete {
            // `2.` or `2e-`: the digits written are the value; none is made up after them.
            self.steps.add(RepairStep::IncompleteNumber);
        }
        self.i = j;
        self.complete_value();
        Ok(())
    }

    /// A key without quotes, which a colon must follow on its line.
    pub(super) fn unquoted_key(&mut self) -> Result<(), String> {
        let start = self.i;
        let mut j = start;
        while is_word_byte(self.b, j) {
            j += 1;
        }
        let mut k = j;
        while matches!(self.b.get(k), Some(b' ' | b'\t')) {
            k += 1;
        }
        match self.b.get(k) {
            // Cut after the key: dangling, dropped at the end.
            None => self.i = k,
            Some(b':') => {
                self.steps.add(RepairStep::UnquotedKeys);
                self.out.push(b'"');
                self.out.extend_from_slice(&self.b[start..j]);
                self.out.push(b'"');
                self.i = j;
                self.expect = Expect::Colon;
            }
            Some(_) => return Err(format!("a word at byte {start} that is neither a key nor a value")),
        }
        Ok(())
    }
}

fn skip_digits(b: &[u8], mut j: usize) -> usize {
    while b.get(j).is_some_and(u8::is_ascii_digit) {
        j += 1;
    }
    j
}

/// A number or a literal word at `k` that ends where a value can end.
pub(super) fn is_scalar_token(b: &[u8], k: usize) -> bool {
    let end = b[k..]
        .iter()
        .position(|c| !(c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'+' | b'_')))
        .map_or(b.len(), |p| k + p);
    let token = &b[k..end];
    let scalar = matches!(token.first(), Some(b'-' | b'0'..=b'9'))
        || ["true", "false", "null", "none"]
            .iter()
            .any(|w| token.eq_ignore_ascii_case(w.as_bytes()));
    scalar && matches!(b.get(end), None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n'))
}
