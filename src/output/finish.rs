//! Turning a call's outcome into the one result the model reads.

use crate::config::OutputConfig;
use crate::event::ToolResult;
use crate::notice::{Notice, NoticeKind};
use crate::tool::{ErrorCategory, OutputKind, ToolError, ToolOutput};

use super::{Budget, OverflowStore, truncate, wrap_external};

/// Where a call's full output may be saved when it is truncated.
#[derive(Debug, Clone, Copy)]
pub struct Overflow<'a> {
    /// The store.
    pub store: &'a OverflowStore,
    /// The session that will be allowed to read it back.
    pub session: &'a str,
}

/// What post-processing needs to know about a call besides its outcome.
#[derive(Debug, Clone, Copy)]
pub struct FinishContext<'a> {
    /// Index in the response.
    pub index: usize,
    /// Provider id.
    pub id: &'a str,
    /// Resolved name.
    pub name: &'a str,
    /// `Some(source)` when the content came from outside (network, MCP): it is enveloped.
    pub external: Option<&'a str>,
    /// Whether this is the call's final view. A result observed while its task still runs
    /// (a poll) is truncated but never saved, so a later full save is not shadowed.
    pub final_view: bool,
}

/// A finished result.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// The result for the model.
    pub result: ToolResult,
    /// `output_truncated`, `overflow_failed`.
    pub notices: Vec<Notice>,
    /// Whether it counts as a failure for the loop guard: the model's own mistakes and tool
    /// failures do; a user's rejection, a cancellation or a cut round do not.
    pub failed: bool,
}

/// Whether [`finish_call`] will cut (and save) this outcome's output: the part of
/// post-processing that costs milliseconds (a head/tail scan of megabytes, a file write), which
/// a host may want to run off its event loop.
pub fn needs_truncation(outcome: &Result<ToolOutput, ToolError>, cfg: &OutputConfig) -> bool {
    match outcome {
        Ok(out) if out.cut.is_some() => false,
        Ok(out) => {
            let max = match out.kind {
                OutputKind::Shell => cfg.shell_max_bytes,
                OutputKind::Other => cfg.other_max_bytes,
            };
            out.content.len() > max
        }
        Err(_) => false,
    }
}

/// Applies the output economics to an outcome: truncation with overflow, the trailer that
/// truncation never cuts (exit code, stderr), the external-content envelope.
pub fn finish_call(
    ctx: FinishContext<'_>,
    outcome: Result<ToolOutput, ToolError>,
    cfg: &OutputConfig,
    overflow: Option<Overflow<'_>>,
) -> Finished {
    let mut notices = Vec::new();
    let (content, is_error, failed) = match outcome {
        Err(e) => {
            let failed = !matches!(
                e.category,
                ErrorCategory::NotApproved | ErrorCategory::Cancelled | ErrorCategory::TruncatedRound
            );
            (e.to_model_text(), true, failed)
        }
        Ok(out) => {
            let (budget, rescue) = match out.kind {
                OutputKind::Shell => (Budget::shell(cfg), true),
                OutputKind::Other => (Budget::other(cfg), false),
            };
            let mut content = out.content;
            if let Some(cut) = &out.cut {
                // Cut (and saved) by the tool while it streamed: reported, not cut again.
                if let Some(e) = &cut.save_error {
                    tracing::warn!(error = %e, "overflow save failed");
                    notices.push(Notice::for_call(
                        NoticeKind::OverflowFailed,
                        ctx.index,
                        format!("could not save the full output: {e}"),
                    ));
                }
                notices.push(Notice::for_call(
                    NoticeKind::OutputTruncated,
                    ctx.index,
                    format!(
                        "`{}` output cut: {} bytes ({} lines) left out; {} bytes saved",
                        ctx.name, cut.omitted_bytes, cut.omitted_lines, cut.saved_bytes
                    ),
                ));
            } else if content.len() > budget.max {
                let mut pointer = None;
                let mut saved = 0usize;
                if ctx.final_view
                    && let Some(o) = overflow
                {
                    let full = match &out.trailer {
                        Some(t) => format!("{content}\n{t}"),
                        None => content.clone(),
                    };
                    match o.store.save(o.session, &full) {
                        Ok(id) => {
                            saved = full.len();
                            pointer = Some(format!("Full output saved; call retrieve_tool_result ref={id} to view it."));
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "overflow save failed");
                            notices.push(Notice::for_call(NoticeKind::OverflowFailed, ctx.index, e.to_string()));
                        }
                    }
                }
                if let Some(t) = truncate(&content, &budget, rescue, pointer.as_deref()) {
                    notices.push(Notice::for_call(
                        NoticeKind::OutputTruncated,
                        ctx.index,
                        format!(
                            "`{}` output cut: {} bytes ({} lines) left out; {saved} bytes saved in full",
                            ctx.name, t.omitted_bytes, t.omitted_lines
                        ),
                    ));
                    content = t.text;
                }
            }
            if let Some(trailer) = out.trailer {
                if !content.is_empty() && !content.ends_with('\n') {
                    content.push('\n');
                }
                content.push_str(&trailer);
            }
            (content, out.is_error, out.is_error)
        }
    };
    let content = match ctx.external {
        Some(source) => wrap_external(source, &content),
        None => content,
    };
    Finished {
        result: ToolResult {
            index: ctx.index,
            tool_use_id: ctx.id.to_string(),
            name: ctx.name.to_string(),
            is_error,
            content,
        },
        notices,
        failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> OutputConfig {
        crate::config::Config::builtin().output
    }

    #[test]
    fn truncation_is_foreseen_exactly_where_it_happens() {
        let c = cfg();
        for (kind, max) in [(OutputKind::Shell, c.shell_max_bytes), (OutputKind::Other, c.other_max_bytes)] {
            for len in [max, max + 1, 4 * max] {
                let out = ToolOutput {
                    content: "x".repeat(len),
                    is_error: false,
                    kind,
                    trailer: None,
                    partial: false,
                    cut: None,
                };
                let foreseen = needs_truncation(&Ok(out.clone()), &c);
                assert_eq!(foreseen, len > max, "{kind:?} at {len}");
                let done = finish_call(ctx(false), Ok(out), &c, None);
                if !foreseen {
                    assert_eq!(done.result.content.len(), len, "nothing is cut that was not foreseen");
                }
                if len == 4 * max {
                    assert!(done.result.content.len() < len, "a large output is cut");
                }
            }
        }
        assert!(!needs_truncation(&Err(ToolError::tool("x".repeat(1 << 20))), &c));
    }

    fn ctx(final_view: bool) -> FinishContext<'static> {
        FinishContext {
            index: 4,
            id: "c4",
            name: "exec_shell",
            external: None,
            final_view,
        }
    }

    fn shell(content: String) -> ToolOutput {
        ToolOutput {
            content,
            is_error: false,
            kind: OutputKind::Shell,
            trailer: Some("[exit code: 0]".into()),
            partial: false,
            cut: None,
        }
    }

    #[test]
    fn big_output_is_saved_and_pointed_to() {
        let dir = tempfile::tempdir().unwrap();
        let store = OverflowStore::new(dir.path().to_path_buf());
        let big: String = (0..5000).map(|i| format!("line {i}\n")).collect();
        let f = finish_call(
            ctx(true),
            Ok(shell(big.clone())),
            &cfg(),
            Some(Overflow {
                store: &store,
                session: "s",
            }),
        );
        let content = &f.result.content;
        assert!(content.ends_with("[exit code: 0]"), "the trailer survives the cut");
        let id = content.split("ref=").nth(1).unwrap().split(' ').next().unwrap();
        assert_eq!(store.load("s", id).unwrap(), format!("{big}\n[exit code: 0]"));
        assert_eq!(f.notices[0].kind, NoticeKind::OutputTruncated);
    }

    #[test]
    fn a_poll_is_never_saved() {
        let dir = tempfile::tempdir().unwrap();
        let store = OverflowStore::new(dir.path().to_path_buf());
        let f = finish_call(
            ctx(false),
            Ok(shell("x".repeat(40_000))),
            &cfg(),
            Some(Overflow {
                store: &store,
                session: "s",
            }),
        );
        assert!(!f.result.content.contains("ref="));
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
    }

    #[test]
    fn failed_save_makes_no_false_promise() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let store = OverflowStore::new(file);
        let f = finish_call(
            ctx(true),
            Ok(shell("x".repeat(40_000))),
            &cfg(),
            Some(Overflow {
                store: &store,
                session: "s",
            }),
        );
        assert!(!f.result.content.contains("retrieve_tool_result"));
        assert!(f.notices.iter().any(|n| n.kind == NoticeKind::OverflowFailed));
    }

    #[test]
    fn errors_carry_their_category_and_side_effect() {
        let f = finish_call(ctx(true), Err(ToolError::invalid("path", "bad path")), &cfg(), None);
        assert!(f.result.is_error && f.failed);
        assert!(
            f.result
                .content
                .ends_with(r#"{"error":"invalid_input","field":"path","side_effect":"not_started"}"#),
            "{}",
            f.result.content
        );
        let rejected = finish_call(ctx(true), Err(ToolError::refused(ErrorCategory::NotApproved, "no")), &cfg(), None);
        assert!(!rejected.failed, "a user's rejection is not the model failing");
    }

    #[test]
    fn external_content_is_enveloped() {
        let f = finish_call(
            FinishContext {
                external: Some("fetch_url"),
                ..ctx(true)
            },
            Ok(ToolOutput::text("page")),
            &cfg(),
            None,
        );
        assert!(f.result.content.starts_with("<external_content source=\"fetch_url\""));
    }
}
