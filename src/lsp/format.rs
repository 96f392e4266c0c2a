//! The diagnostics text the model reads after an edit: errors first, at most
//! `lsp.max_diagnostics`, within the bytes the result has left.

use lsp_types::{Diagnostic, DiagnosticSeverity, NumberOrString};

/// Why an edit's result carries no diagnostics from its server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiagnosticsNote {
    /// The server is down, failed to start or failed the request; the reason.
    Unavailable(String),
    /// No answer for this edit within `lsp.wait_ms`.
    NotInTime(u64),
    /// No OS sandbox works here (`shell.sandbox`), so the server was not started: a language
    /// server runs programs the workspace names (a checkout's own interpreter, its plugins).
    NoSandbox,
}

fn rank(severity: Option<DiagnosticSeverity>) -> u8 {
    // The protocol leaves a missing severity to the client; read it as the worst, so nothing
    // a server may mean as an error sorts below a hint.
    match severity {
        Some(DiagnosticSeverity::WARNING) => 1,
        Some(DiagnosticSeverity::INFORMATION) => 2,
        Some(DiagnosticSeverity::HINT) => 3,
        _ => 0,
    }
}

const NAMES: [(&str, &str); 4] = [("error", "errors"), ("warning", "warnings"), ("info", "infos"), ("hint", "hints")];

/// One diagnostic on one line: `path:line:col: severity: message [code]` (1-based, as editors
/// and compilers print them); a message's own line breaks become `; `.
fn line_of(shown: &str, d: &Diagnostic) -> String {
    let message: Vec<&str> = d
        .message
        .lines()
        .map(|l| l.trim_matches(|c: char| c.is_whitespace() || c == '\u{a0}'))
        .filter(|l| !l.is_empty())
        .collect();
    let code = match &d.code {
        Some(NumberOrString::String(s)) => format!(" [{s}]"),
        Some(NumberOrString::Number(n)) => format!(" [{n}]"),
        None => String::new(),
    };
    format!(
        "{shown}:{}:{}: {}: {}{code}",
        d.range.start.line + 1,
        d.range.start.character + 1,
        NAMES[rank(d.severity) as usize].0,
        message.join("; ")
    )
}

/// The text appended to an edit's result: a header naming the server and counts by severity,
/// then the diagnostics, errors first (then by position), at most `max`, and only as many as
/// fit in `budget` bytes (the rest are counted, not shown). `None` when not even the header
/// fits.
pub fn format_diagnostics(server: &str, shown: &str, diagnostics: &[Diagnostic], max: usize, budget: usize) -> Option<String> {
    if diagnostics.is_empty() {
        let text = format!("Diagnostics ({server}) for `{shown}`: none.");
        return (text.len() <= budget).then_some(text);
    }
    let mut sorted: Vec<&Diagnostic> = diagnostics.iter().collect();
    sorted.sort_by_key(|d| (rank(d.severity), d.range.start.line, d.range.start.character));
    let mut counts = [0usize; 4];
    for d in &sorted {
        counts[rank(d.severity) as usize] += 1;
    }
    let summary: Vec<String> = counts
        .iter()
        .zip(NAMES)
        .filter(|(n, _)| **n > 0)
        .map(|(n, (one, many))| format!("{n} {}", if *n == 1 { one } else { many }))
        .collect();
    let mut text = format!("Diagnostics ({server}) for `{shown}`: {}", summary.join(", "));
    if text.len() + 1 > budget {
        return None;
    }
    text.push(':');
    let mut shown_count = 0;
    for d in sorted.iter().take(max) {
        let line = line_of(shown, d);
        let left = sorted.len() - shown_count - 1;
        // Room is kept for the line that says how many were left out.
        let tail = if left > 0 { format!("\n({left} more not shown)").len() } else { 0 };
        if text.len() + 1 + line.len() + tail > budget {
            break;
        }
        text.push('\n');
        text.push_str(&line);
        shown_count += 1;
    }
    let left = sorted.len() - shown_count;
    if left > 0 {
        let more = format!("\n({left} more not shown)");
        if text.len() + more.len() <= budget {
            text.push_str(&more);
        }
    }
    Some(text)
}

/// The line an edit's result carries when there are no diagnostics to show from `server`.
pub fn format_note(server: &str, shown: &str, note: &DiagnosticsNote) -> String {
    match note {
        DiagnosticsNote::Unavailable(reason) => {
            format!("Diagnostics ({server}) for `{shown}`: unavailable ({reason}); the edit itself succeeded.")
        }
        DiagnosticsNote::NotInTime(ms) => {
            format!("Diagnostics ({server}) for `{shown}`: not ready within {ms} ms; the edit itself succeeded.")
        }
        DiagnosticsNote::NoSandbox => format!(
            "Diagnostics ({server}) for `{shown}`: not started, because no OS sandbox works here (shell.sandbox) \
             and a language server runs programs the workspace names; the edit itself succeeded."
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsp_types::{Position, Range};

    fn diag(line: u32, severity: DiagnosticSeverity, message: &str) -> Diagnostic {
        Diagnostic {
            range: Range::new(Position::new(line, 4), Position::new(line, 9)),
            severity: Some(severity),
            message: message.into(),
            code: Some(NumberOrString::String("reportX".into())),
            ..Diagnostic::default()
        }
    }

    #[test]
    fn errors_come_first_then_position() {
        let d = vec![
            diag(1, DiagnosticSeverity::WARNING, "unused"),
            diag(9, DiagnosticSeverity::ERROR, "late error"),
            diag(3, DiagnosticSeverity::ERROR, "Type \"str\" is not assignable\n\u{a0}\u{a0}detail"),
        ];
        let text = format_diagnostics("python", "a.py", &d, 20, 10_000).unwrap();
        assert_eq!(
            text,
            "Diagnostics (python) for `a.py`: 2 errors, 1 warning:\n\
             a.py:4:5: error: Type \"str\" is not assignable; detail [reportX]\n\
             a.py:10:5: error: late error [reportX]\n\
             a.py:2:5: warning: unused [reportX]"
        );
    }

    #[test]
    fn at_most_max_and_within_budget() {
        let d: Vec<Diagnostic> = (0..50).map(|i| diag(i, DiagnosticSeverity::ERROR, "bad")).collect();
        let text = format_diagnostics("ts", "a.ts", &d, 3, 10_000).unwrap();
        assert_eq!(text.lines().count(), 5, "{text}");
        assert!(text.ends_with("(47 more not shown)"), "{text}");
        for budget in [60, 100, 150, 400] {
            let text = format_diagnostics("ts", "a.ts", &d, 20, budget).unwrap();
            assert!(text.len() <= budget, "{budget}: {}", text.len());
            assert!(text.contains("more not shown"), "{text}");
        }
        assert!(format_diagnostics("ts", "a.ts", &d, 20, 10).is_none(), "not even the header fits");
    }

    #[test]
    fn clean_files_and_notes_say_so() {
        assert_eq!(
            format_diagnostics("python", "a.py", &[], 20, 1000).unwrap(),
            "Diagnostics (python) for `a.py`: none."
        );
        let note = format_note("python", "a.py", &DiagnosticsNote::NotInTime(3000));
        assert!(note.contains("not ready within 3000 ms"), "{note}");
        let note = format_note("python", "a.py", &DiagnosticsNote::Unavailable("it exited".into()));
        assert!(
            note.contains("unavailable (it exited)") && note.contains("edit itself succeeded"),
            "{note}"
        );
        assert_eq!(
            format_note("python", "a.py", &DiagnosticsNote::NoSandbox),
            "Diagnostics (python) for `a.py`: not started, because no OS sandbox works here (shell.sandbox) \
             and a language server runs programs the workspace names; the edit itself succeeded."
        );
    }

    #[test]
    fn a_missing_severity_counts_as_an_error() {
        let mut d = diag(0, DiagnosticSeverity::HINT, "hint");
        let mut e = diag(5, DiagnosticSeverity::ERROR, "no severity");
        e.severity = None;
        d.code = None;
        let text = format_diagnostics("s", "f", &[d, e], 5, 1000).unwrap();
        assert!(text.lines().nth(1).unwrap().contains("no severity"), "{text}");
        assert!(text.contains("1 error, 1 hint"), "{text}");
    }
}
