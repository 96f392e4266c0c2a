//! Head/tail truncation with important-line rescue.

use std::sync::LazyLock;

use regex::Regex;

/// A truncation budget (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Outputs longer than this are cut.
    pub max: usize,
    /// Bytes kept from the start.
    pub head: usize,
    /// Bytes kept from the end.
    pub tail: usize,
    /// Share of the head (percent) that rescued lines may take.
    pub rescue_percent: usize,
}

impl Budget {
    /// The shell budget from config.
    pub fn shell(o: &crate::config::OutputConfig) -> Self {
        Self {
            max: o.shell_max_bytes,
            head: o.shell_head_bytes,
            tail: o.shell_tail_bytes,
            rescue_percent: o.rescue_percent,
        }
    }

    /// The budget of every other tool.
    pub fn other(o: &crate::config::OutputConfig) -> Self {
        Self {
            max: o.other_max_bytes,
            head: o.other_head_bytes,
            tail: o.other_tail_bytes,
            rescue_percent: o.rescue_percent,
        }
    }
}

/// A cut output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncated {
    /// Head, marker (with rescued lines and the pointer), tail.
    pub text: String,
    /// Bytes left out.
    pub omitted_bytes: usize,
    /// Lines left out (counting a partly cut line as cut).
    pub omitted_lines: usize,
    /// Lines rescued from the cut middle.
    pub rescued: usize,
}

/// Lines worth rescuing from the middle of a long log: compiler errors, panics, failed tests,
/// tracebacks.
const IMPORTANT_PATTERN: &str = r"(?x)
        \berror(\[E\d+\])?: | \bERROR\b | \bFAILED\b | \bFAIL\b | \bfailed\b | panicked\ at |
        Traceback\ \(most\ recent\ call\ last\) | \bException\b | ^E\s | \bfatal: |
        \bassert(ion)?\b.*\bfail | \bSegmentation\ fault\b | \bundefined\ reference\b";

static IMPORTANT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(IMPORTANT_PATTERN).unwrap_or_else(|e| panic!("the built-in pattern compiles: {e}")));

/// The same pattern over many lines at once: every line [`is_important`] accepts holds a match
/// (`^` matches at each line's start), so a streamed middle is scanned a chunk at a time and
/// only the lines holding a match are judged one by one.
static IMPORTANT_IN_LINES: LazyLock<regex::bytes::Regex> = LazyLock::new(|| {
    regex::bytes::RegexBuilder::new(IMPORTANT_PATTERN)
        .multi_line(true)
        .build()
        .unwrap_or_else(|e| panic!("the built-in pattern compiles: {e}"))
});

/// Where in `lines` (from `at`) the next line that may be important holds a match.
pub(super) fn next_candidate(lines: &[u8], at: usize) -> Option<usize> {
    IMPORTANT_IN_LINES.find_at(lines, at).map(|m| m.start())
}

/// Cuts `text` to the budget, or returns `None` when it fits. The marker says exactly how
/// many bytes and lines were left out; `pointer` (where the full output is) is appended to it;
/// with `rescue`, important lines of the cut middle are kept inside the same budget.
pub fn truncate(text: &str, budget: &Budget, rescue: bool, pointer: Option<&str>) -> Option<Truncated> {
    if text.len() <= budget.max {
        return None;
    }
    let mut head_len = floor_boundary(text, budget.head.min(text.len()));
    let tail_start = ceil_boundary(text, text.len().saturating_sub(budget.tail).max(head_len));
    let mut rescued_lines: Vec<&str> = Vec::new();
    if rescue && budget.rescue_percent > 0 {
        let allowance = budget.head * budget.rescue_percent / 100;
        let middle = &text[head_len..tail_start];
        let mut used = 0;
        for line in middle.lines().filter(|l| is_important(l)) {
            let line = cut_line(line, RESCUED_LINE_BYTES);
            if used + line.len() + 1 > allowance {
                break;
            }
            used += line.len() + 1;
            rescued_lines.push(line);
        }
        // The rescued lines are paid for from the head, so the total stays in budget.
        head_len = floor_boundary(text, budget.head.saturating_sub(used));
    }
    let head = &text[..head_len];
    let tail = &text[tail_start..];
    let omitted = &text[head_len..tail_start];
    let omitted_lines = omitted.matches('\n').count() + usize::from(!omitted.is_empty() && !omitted.ends_with('\n'));
    Some(Truncated {
        text: render_cut(head, omitted.len() as u64, omitted_lines as u64, &rescued_lines, pointer, tail),
        omitted_bytes: omitted.len(),
        omitted_lines,
        rescued: rescued_lines.len(),
    })
}

/// Whether a line is worth rescuing from a cut middle.
pub(super) fn is_important(line: &str) -> bool {
    IMPORTANT.is_match(line)
}

/// The longest rescued line (bytes): the start of a line says what went wrong.
pub(super) const RESCUED_LINE_BYTES: usize = 400;

/// The text of a cut output: head, the marker (bytes and lines left out, rescued lines, the
/// pointer to where the whole is), tail. Every cut output has this one shape, whether it was
/// cut whole ([`truncate`]) or while it streamed ([`super::Capture`]).
pub(super) fn render_cut(
    head: &str,
    omitted_bytes: u64,
    omitted_lines: u64,
    rescued: &[impl AsRef<str>],
    pointer: Option<&str>,
    tail: &str,
) -> String {
    let mut marker = format!("\n[... {omitted_bytes} bytes ({omitted_lines} lines) omitted ...]\n");
    if !rescued.is_empty() {
        marker.push_str("[important lines from the omitted part:]\n");
        for l in rescued {
            marker.push_str(l.as_ref());
            marker.push('\n');
        }
    }
    if let Some(p) = pointer {
        marker.push_str(&format!("[{p}]\n"));
    }
    let mut out = String::with_capacity(head.len() + marker.len() + tail.len());
    out.push_str(head);
    out.push_str(&marker);
    out.push_str(tail);
    out
}

fn cut_line(line: &str, max: usize) -> &str {
    &line[..floor_boundary(line, max.min(line.len()))]
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: Budget = Budget {
        max: 30_000,
        head: 22_000,
        tail: 8_000,
        rescue_percent: 20,
    };

    #[test]
    fn exactly_the_limit_is_not_cut() {
        assert_eq!(truncate(&"x".repeat(30_000), &B, true, None), None);
    }

    #[test]
    fn one_byte_over_is_cut_with_an_exact_marker() {
        let text = "y".repeat(30_001);
        let t = truncate(&text, &B, true, Some("pointer")).unwrap();
        assert_eq!(t.omitted_bytes, 1);
        assert_eq!(t.omitted_lines, 1);
        assert!(t.text.starts_with(&"y".repeat(22_000)));
        assert!(t.text.ends_with(&"y".repeat(8_000)));
        assert!(t.text.contains("[... 1 bytes (1 lines) omitted ...]"));
        assert!(t.text.contains("[pointer]"));
    }

    #[test]
    fn multibyte_characters_at_the_cut_are_kept_whole() {
        let text = "é".repeat(20_000); // 40,000 bytes, every boundary even.
        let t = truncate(
            &text,
            &Budget {
                max: 30_000,
                head: 22_001,
                tail: 7_999,
                rescue_percent: 0,
            },
            false,
            None,
        )
        .unwrap();
        assert!(std::str::from_utf8(t.text.as_bytes()).is_ok());
        // The head rounds down to 22,000 and the tail's start up to 32,002: whole characters
        // only, so the cut part is 10,002 bytes rather than a split `é` on either side.
        assert_eq!(t.omitted_bytes, 10_002);
    }

    #[test]
    fn counts_lines_and_bytes_exactly() {
        let text: String = (0..10_000).map(|i| format!("line {i:05}\n")).collect(); // 11 bytes a line
        let t = truncate(&text, &B, false, None).unwrap();
        // Head 22,000 bytes = 2,000 lines; tail 8,000 bytes ends at a line end after 727 lines
        // and 3 bytes, so the omitted part is 80,000 bytes: 7,272 whole lines and one part.
        assert_eq!(t.omitted_bytes, 110_000 - 22_000 - 8_000);
        assert_eq!(t.omitted_lines, 7_273);
    }

    #[test]
    fn a_failure_in_the_middle_is_rescued_within_budget() {
        let mut text = String::new();
        for i in 0..5_000 {
            text.push_str(&format!("   Compiling crate{i} v1.0.0\n"));
        }
        text.push_str("error[E0308]: mismatched types\n --> src/lib.rs:3:5\n");
        for i in 0..5_000 {
            text.push_str(&format!("   Compiling other{i} v1.0.0\n"));
        }
        let t = truncate(&text, &B, true, None).unwrap();
        assert!(t.text.contains("error[E0308]: mismatched types"));
        assert_eq!(t.rescued, 1);
        let marker_len = t.text.len() - 22_000 - 8_000;
        assert!(marker_len < 200, "rescued lines come out of the head budget");
    }
}
