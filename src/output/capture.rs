//! Output read as it streams, in bounded memory: a command's, an extension program's, a
//! server's stderr.
//!
//! A program can write gigabytes; holding them to cut them afterwards is how 400 MB of output
//! became 777 MB of resident memory. A [`Capture`] keeps the output whole only while it is
//! short; past that it keeps the head, the tail (a [`Tail`] ring) and the important lines of
//! the middle (as [`super::truncate`] would rescue them), streams every byte to a saved file up
//! to a cap, and only counts the rest. [`Capture::finish`] gives the text the model reads in
//! the same shape as a truncated output: head, marker, tail, and a pointer to the saved file
//! that says "Full output saved" only when all of it was saved.

use std::collections::VecDeque;

use tokio::io::{AsyncRead, AsyncReadExt};

use super::Budget;
use super::truncate::{RESCUED_LINE_BYTES, is_important, next_candidate, render_cut};
use crate::tool::{CutReport, OutputFile};

/// How much of an output a [`Capture`] keeps, and how much it saves.
#[derive(Debug, Clone, Copy)]
pub struct CaptureLimits {
    /// Head, tail and rescue budget of the cut text.
    pub budget: Budget,
    /// Whether important lines of the cut middle are rescued.
    pub rescue: bool,
    /// Kept whole (uncut) while the output is at most this long; raised to the budget's
    /// head plus tail when lower.
    pub whole_up_to: usize,
    /// Bytes saved at most (`shell.max_saved_bytes`); the rest is counted only.
    pub max_saved_bytes: u64,
}

impl CaptureLimits {
    /// A command's stdout (exec_shell): the shell budget, with rescue, saved up to
    /// `shell.max_saved_bytes`.
    pub fn shell(cfg: &crate::config::Config) -> Self {
        Self {
            budget: Budget::shell(&cfg.output),
            rescue: true,
            whole_up_to: cfg.output.shell_max_bytes,
            max_saved_bytes: cfg.shell.max_saved_bytes,
        }
    }

    /// A command's stderr: a small budget weighted to the end, where the error is; never
    /// saved apart (it is part of the result's trailer).
    pub fn stderr(cfg: &crate::config::Config) -> Self {
        let o = &cfg.output;
        Self {
            budget: Budget {
                max: o.shell_tail_bytes,
                head: o.shell_tail_bytes / 4,
                tail: o.shell_tail_bytes / 2,
                rescue_percent: o.rescue_percent,
            },
            rescue: true,
            whole_up_to: o.shell_tail_bytes,
            max_saved_bytes: 0,
        }
    }

    /// An extension program's stdout: kept whole up to `output.program_whole_bytes` (so its
    /// JSON answer can be read), cut with the general budget past that.
    pub fn program(cfg: &crate::config::Config) -> Self {
        Self {
            budget: Budget::other(&cfg.output),
            rescue: false,
            whole_up_to: cfg.output.program_whole_bytes,
            max_saved_bytes: cfg.shell.max_saved_bytes,
        }
    }
}

/// The last bytes of a stream, in a ring of fixed size.
#[derive(Debug, Clone)]
pub struct Tail {
    ring: VecDeque<u8>,
    cap: usize,
}

impl Tail {
    /// A ring keeping the last `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Self {
            ring: VecDeque::with_capacity(cap.min(1 << 16)),
            cap,
        }
    }

    /// Appends `bytes`; what falls off the front goes to `evicted`, oldest first.
    pub fn push(&mut self, bytes: &[u8], mut evicted: impl FnMut(&[u8])) {
        if bytes.len() >= self.cap {
            let (a, b) = self.ring.as_slices();
            evicted(a);
            evicted(b);
            self.ring.clear();
            let keep_from = bytes.len() - self.cap;
            evicted(&bytes[..keep_from]);
            self.ring.extend(&bytes[keep_from..]);
            return;
        }
        let over = (self.ring.len() + bytes.len()).saturating_sub(self.cap);
        if over > 0 {
            let (a, b) = self.ring.as_slices();
            let from_a = over.min(a.len());
            evicted(&a[..from_a]);
            evicted(&b[..over - from_a]);
            self.ring.drain(..over);
        }
        self.ring.extend(bytes);
    }

    /// The bytes kept, oldest first.
    pub fn bytes(&self) -> Vec<u8> {
        self.ring.iter().copied().collect()
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// The kept bytes as text, starting at a character boundary.
    pub fn text(&self) -> String {
        let bytes = self.bytes();
        let skip = bytes.iter().take(3).take_while(|b| is_continuation(**b)).count();
        String::from_utf8_lossy(&bytes[skip..]).into_owned()
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0b1100_0000 == 0b1000_0000
}

/// Lines longer than this are matched for rescue on their first this-many bytes only: the
/// marker shows at most [`RESCUED_LINE_BYTES`] of a line, and an important line says so early.
const RESCUE_SCAN_BYTES: usize = 4 * RESCUED_LINE_BYTES;

/// The bytes between head and tail: counted, and scanned for lines worth rescuing.
#[derive(Debug, Default)]
struct Middle {
    bytes: u64,
    newlines: u64,
    last: Option<u8>,
    line: Vec<u8>,
    rescued: Vec<String>,
    used: usize,
    allowance: usize,
    rescuing: bool,
}

impl Middle {
    fn feed(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.bytes += bytes.len() as u64;
        self.newlines += memchr::memchr_iter(b'\n', bytes).count() as u64;
        self.last = bytes.last().copied();
        if !self.rescuing {
            return;
        }
        // The line begun in an earlier chunk ends at the first newline.
        let Some(first) = memchr::memchr(b'\n', bytes) else {
            self.take_line(bytes);
            return;
        };
        self.take_line(&bytes[..first]);
        self.end_line();
        let rest = &bytes[first + 1..];
        // Whole lines are scanned together; only a line holding a match is judged alone.
        let whole = memchr::memrchr(b'\n', rest).map_or(0, |i| i + 1);
        let (lines, partial) = rest.split_at(whole);
        let mut at = 0;
        while self.rescuing
            && let Some(hit) = next_candidate(lines, at)
        {
            let start = memchr::memrchr(b'\n', &lines[..hit]).map_or(0, |i| i + 1);
            let end = memchr::memchr(b'\n', &lines[hit..]).map_or(lines.len(), |i| hit + i);
            self.take_line(&lines[start..end]);
            self.end_line();
            at = end + 1;
            if at >= lines.len() {
                break;
            }
        }
        if self.rescuing {
            self.take_line(partial);
        }
    }

    fn take_line(&mut self, part: &[u8]) {
        let room = RESCUE_SCAN_BYTES.saturating_sub(self.line.len());
        self.line.extend_from_slice(&part[..part.len().min(room)]);
    }

    /// Judges the line gathered so far, as `truncate` does: the first important line that
    /// no longer fits the allowance ends the rescue.
    fn end_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        let text = String::from_utf8_lossy(&line);
        let text = text.strip_suffix('\r').unwrap_or(&text);
        if !is_important(text) {
            return;
        }
        let mut end = text.len().min(RESCUED_LINE_BYTES);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let kept = &text[..end];
        if self.used + kept.len() + 1 > self.allowance {
            self.rescuing = false;
            return;
        }
        self.used += kept.len() + 1;
        self.rescued.push(kept.to_string());
    }
}

/// Where the saved copy stands.
enum Save {
    /// Nowhere to save.
    Off,
    /// Saving: bytes written so far.
    On(Box<dyn OutputFile>, u64),
    /// The cap was reached: bytes written.
    Capped(Box<dyn OutputFile>, u64),
    /// Writing failed.
    Failed(String),
}

/// One output being read (see the module documentation).
pub struct Capture {
    limits: CaptureLimits,
    total: u64,
    /// The whole output while it is short; `None` once it is cut.
    whole: Option<Vec<u8>>,
    head: Vec<u8>,
    tail: Tail,
    middle: Middle,
    /// The file the whole goes to, not yet written to while the output is short.
    file: Option<Box<dyn OutputFile>>,
    save: Save,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture").field("total", &self.total).finish_non_exhaustive()
    }
}

/// What a finished capture holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// The whole output, or head + marker + tail.
    pub text: String,
    /// How it was cut, when it was.
    pub cut: Option<CutReport>,
    /// Bytes the output had.
    pub total: u64,
}

impl Capture {
    /// A capture within `limits`, saving to `file` once the output is too long to keep whole
    /// (no saving without one).
    pub fn new(mut limits: CaptureLimits, file: Option<Box<dyn OutputFile>>) -> Self {
        limits.whole_up_to = limits.whole_up_to.max(limits.budget.head + limits.budget.tail);
        let rescuing = limits.rescue && limits.budget.rescue_percent > 0;
        Self {
            middle: Middle {
                allowance: limits.budget.head * limits.budget.rescue_percent / 100,
                rescuing,
                ..Middle::default()
            },
            tail: Tail::new(limits.budget.tail),
            whole: Some(Vec::new()),
            head: Vec::new(),
            total: 0,
            file,
            save: Save::Off,
            limits,
        }
    }

    /// Bytes read so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Bytes saved so far.
    pub fn saved(&self) -> u64 {
        match &self.save {
            Save::On(_, n) | Save::Capped(_, n) => *n,
            Save::Off | Save::Failed(_) => 0,
        }
    }

    /// Takes the next bytes of the output.
    pub fn push(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.total += bytes.len() as u64;
        if let Some(whole) = &mut self.whole {
            if whole.len() + bytes.len() <= self.limits.whole_up_to {
                whole.extend_from_slice(bytes);
                return;
            }
            // Too long to keep whole: cut from here on, and start the saved copy.
            let mut so_far = std::mem::take(whole);
            self.whole = None;
            so_far.extend_from_slice(bytes);
            self.save = match self.file.take() {
                Some(file) => Save::On(file, 0),
                None => Save::Off,
            };
            self.save(&so_far);
            let head_len = self.limits.budget.head.min(so_far.len());
            self.head = so_far[..head_len].to_vec();
            self.keep_tail(&so_far[head_len..]);
            return;
        }
        self.save(bytes);
        self.keep_tail(bytes);
    }

    fn keep_tail(&mut self, bytes: &[u8]) {
        let middle = &mut self.middle;
        self.tail.push(bytes, |gone| middle.feed(gone));
    }

    fn save(&mut self, bytes: &[u8]) {
        let cap = self.limits.max_saved_bytes;
        self.save = match std::mem::replace(&mut self.save, Save::Off) {
            Save::On(mut file, written) => {
                let room = cap.saturating_sub(written);
                let part = &bytes[..bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX))];
                match file.write(part) {
                    Err(e) => Save::Failed(e.to_string()),
                    Ok(()) if part.len() < bytes.len() => Save::Capped(file, written + part.len() as u64),
                    Ok(()) => Save::On(file, written + part.len() as u64),
                }
            }
            other => other,
        };
    }

    /// The text the model reads. `trailer` (exit code, stderr) is appended to the saved copy
    /// when all of the output was saved, as it follows the output in the result.
    pub fn finish(mut self, trailer: Option<&str>) -> Captured {
        if let Some(whole) = self.whole.take() {
            return Captured {
                text: String::from_utf8_lossy(&whole).into_owned(),
                cut: None,
                total: self.total,
            };
        }
        if self.middle.rescuing && !self.middle.line.is_empty() {
            self.middle.end_line();
        }
        let Middle {
            bytes: middle_bytes,
            newlines: middle_newlines,
            last: middle_last,
            rescued,
            used,
            ..
        } = std::mem::take(&mut self.middle);
        // Rescued lines are paid for from the head, as in `truncate`.
        let mut head_len = self.limits.budget.head.saturating_sub(used).min(self.head.len());
        while head_len > 0 && head_len < self.head.len() && is_continuation(self.head[head_len]) {
            head_len -= 1;
        }
        let head_cut = &self.head[head_len..];
        let tail = self.tail.bytes();
        let skip = tail.iter().take(3).take_while(|b| is_continuation(**b)).count();
        let omitted_bytes = head_cut.len() as u64 + middle_bytes + skip as u64;
        let last_omitted = if skip > 0 {
            Some(tail[skip - 1])
        } else if middle_bytes > 0 {
            middle_last
        } else {
            head_cut.last().copied()
        };
        let omitted_lines = memchr::memchr_iter(b'\n', head_cut).count() as u64
            + middle_newlines
            + u64::from(omitted_bytes > 0 && last_omitted != Some(b'\n'));
        let (pointer, saved_bytes, save_error) = self.commit(trailer);
        let text = render_cut(
            &String::from_utf8_lossy(&self.head[..head_len]),
            omitted_bytes,
            omitted_lines,
            &rescued,
            pointer.as_deref(),
            &String::from_utf8_lossy(&tail[skip..]),
        );
        Captured {
            text,
            cut: Some(CutReport {
                omitted_bytes,
                omitted_lines,
                saved_bytes,
                save_error,
            }),
            total: self.total,
        }
    }

    /// Commits the saved copy: the pointer for the marker, bytes saved, and why saving failed.
    fn commit(&mut self, trailer: Option<&str>) -> (Option<String>, u64, Option<String>) {
        let total = self.total;
        match std::mem::replace(&mut self.save, Save::Off) {
            Save::Off => (None, 0, None),
            Save::Failed(e) => (None, 0, Some(e)),
            Save::On(mut file, written) => {
                if let Some(t) = trailer
                    && let Err(e) = file.write(format!("\n{t}").as_bytes())
                {
                    return (None, 0, Some(e.to_string()));
                }
                match file.commit() {
                    Ok(id) => (
                        Some(format!("Full output saved; call retrieve_tool_result ref={id} to view it.")),
                        written,
                        None,
                    ),
                    Err(e) => (None, 0, Some(e.to_string())),
                }
            }
            Save::Capped(file, written) => match file.commit() {
                Ok(id) => (
                    Some(format!(
                        "Only the first {written} of {total} bytes were saved (shell.max_saved_bytes); call retrieve_tool_result ref={id} to view them."
                    )),
                    written,
                    None,
                ),
                Err(e) => (None, 0, Some(e.to_string())),
            },
        }
    }
}

/// Reads `stdout` and `stderr` to their ends at once, each into its capture (a program blocks
/// when either pipe fills, so neither may wait for the other).
///
/// # Cancel safety
/// Dropping it stops reading; what was read is in the captures.
pub async fn read_both(
    stdout: Option<impl AsyncRead + Unpin>,
    stderr: Option<impl AsyncRead + Unpin>,
    out: &mut Capture,
    err: &mut Capture,
) {
    let (mut so, mut se) = (stdout, stderr);
    let mut a = vec![0u8; 1 << 16];
    let mut b = vec![0u8; 1 << 14];
    loop {
        tokio::select! {
            n = async { match so.as_mut() { Some(s) => s.read(&mut a).await, None => std::future::pending().await } } => match n {
                Ok(n) if n > 0 => out.push(&a[..n]),
                _ => so = None,
            },
            n = async { match se.as_mut() { Some(s) => s.read(&mut b).await, None => std::future::pending().await } } => match n {
                Ok(n) if n > 0 => err.push(&b[..n]),
                _ => se = None,
            },
        }
        if so.is_none() && se.is_none() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::{OverflowStore, truncate};

    const B: Budget = Budget {
        max: 300,
        head: 200,
        tail: 100,
        rescue_percent: 20,
    };

    fn limits(rescue: bool, max_saved_bytes: u64) -> CaptureLimits {
        CaptureLimits {
            budget: B,
            rescue,
            whole_up_to: B.max,
            max_saved_bytes,
        }
    }

    /// The same text cut whole and cut while streaming in chunks of `chunk` bytes.
    fn both(text: &str, rescue: bool, chunk: usize) -> (String, Captured) {
        let whole = truncate(text, &B, rescue, None).map_or_else(|| text.to_string(), |t| t.text);
        let mut c = Capture::new(limits(rescue, 1 << 20), None);
        for part in text.as_bytes().chunks(chunk) {
            c.push(part);
        }
        (whole, c.finish(None))
    }

    #[test]
    fn streaming_cuts_exactly_as_truncate_does() {
        let mut texts = vec![
            String::new(),
            "x".repeat(300),
            "y".repeat(301),
            (0..200).map(|i| format!("line {i}\n")).collect::<String>(),
            (0..200).map(|i| format!("line {i}")).collect::<Vec<_>>().join("\n"),
            "é".repeat(400),
        ];
        let mut log = String::new();
        for i in 0..100 {
            log.push_str(&format!("   Compiling crate{i}\n"));
            if i == 50 {
                log.push_str("error[E0308]: mismatched types\nthread 'main' panicked at src/x.rs\n");
            }
        }
        texts.push(log);
        for text in &texts {
            for rescue in [false, true] {
                for chunk in [1, 7, 64, 4096] {
                    let (whole, streamed) = both(text, rescue, chunk);
                    assert_eq!(streamed.text, whole, "rescue {rescue}, chunk {chunk}");
                    assert_eq!(streamed.cut.is_some(), text.len() > B.max);
                }
            }
        }
    }

    #[test]
    fn the_whole_is_saved_and_pointed_to_only_when_it_all_fit() {
        let dir = tempfile::tempdir().unwrap();
        let store = OverflowStore::new(dir.path().to_path_buf());
        let text: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let mut c = Capture::new(limits(true, 1 << 20), Some(Box::new(store.writer("s"))));
        for part in text.as_bytes().chunks(100) {
            c.push(part);
        }
        let done = c.finish(Some("[exit code: 0]"));
        let report = done.cut.unwrap();
        assert_eq!(report.saved_bytes, text.len() as u64);
        let id = done.text.split("ref=").nth(1).unwrap().split(' ').next().unwrap();
        assert!(done.text.contains("Full output saved"));
        assert_eq!(store.load("s", id).unwrap(), format!("{text}\n[exit code: 0]"));

        let mut c = Capture::new(limits(true, 1000), Some(Box::new(store.writer("s"))));
        c.push(text.as_bytes());
        let done = c.finish(Some("[exit code: 0]"));
        assert!(!done.text.contains("Full output saved"), "{}", done.text);
        assert!(done.text.contains("shell.max_saved_bytes"), "{}", done.text);
        let id = done.text.split("ref=").nth(1).unwrap().split(' ').next().unwrap();
        assert_eq!(store.load("s", id).unwrap(), text[..1000]);
        assert_eq!(done.cut.unwrap().saved_bytes, 1000);
    }

    #[test]
    fn a_short_output_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = OverflowStore::new(dir.path().to_path_buf());
        let mut c = Capture::new(limits(true, 1 << 20), Some(Box::new(store.writer("s"))));
        c.push(b"short");
        assert_eq!(c.finish(None).text, "short");
        assert!(!dir.path().join("s").exists());
    }

    #[test]
    fn the_tail_ring_keeps_the_last_bytes() {
        let mut t = Tail::new(4);
        let mut gone = Vec::new();
        t.push(b"ab", |g| gone.extend_from_slice(g));
        t.push(b"cdef", |g| gone.extend_from_slice(g));
        t.push(b"g", |g| gone.extend_from_slice(g));
        assert_eq!(t.bytes(), b"defg");
        assert_eq!(gone, b"abc");
    }
}
