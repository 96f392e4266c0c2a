//! Turning a call's outcome into the one result the model reads.

use crate::config::OutputConfig;
use crate::event::ToolResult;
use crate::notice::{Notice, NoticeKind};
use crate::tool::{ErrorCategory, OutputKind, ToolError, ToolOutput};

use super::handles::{SummaryLimits, example_pointer, handle_marker, summarize};
use super::media::media_blocks;
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
/// a host may want to run off its event loop. A structured value counts as such work (it is
/// serialized, and may be saved under a handle).
pub fn needs_truncation(outcome: &Result<ToolOutput, ToolError>, cfg: &OutputConfig) -> bool {
    match outcome {
        Ok(out) if out.cut.is_some() => false,
        Ok(out)
            if out.structured.is_some()
                || out.blocks.iter().any(|b| {
                    b.get("data")
                        .and_then(serde_json::Value::as_str)
                        .is_some_and(|d| d.len() > cfg.block_max_bytes)
                }) =>
        {
            true
        }
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

/// Whether an outcome counts as a failure for the loop guard: the model's own mistakes and tool
/// failures do; a user's rejection, a cancellation or a cut round do not. (The pipeline counts
/// a call when it ends, before its result is finished: [`Finished::failed`] says the same.)
pub fn counts_as_failure(outcome: &Result<ToolOutput, ToolError>) -> bool {
    match outcome {
        Err(e) => !matches!(
            e.category,
            ErrorCategory::NotApproved | ErrorCategory::Cancelled | ErrorCategory::TruncatedRound
        ),
        Ok(out) => out.is_error,
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
    let failed = counts_as_failure(&outcome);
    let mut kept_blocks: Vec<serde_json::Value> = Vec::new();
    let mut structured = None;
    let (content, is_error) = match outcome {
        Err(e) => (e.to_model_text(), true),
        Ok(out) => {
            let (budget, rescue) = match out.kind {
                OutputKind::Shell => (Budget::shell(cfg), true),
                OutputKind::Other => (Budget::other(cfg), false),
            };
            let mut content = out.content;
            let described = media_blocks(&ctx, out.blocks, cfg, overflow, &mut notices);
            kept_blocks = described.kept;
            if let Some(value) = out.structured {
                let body = structured_body(&ctx, &value, cfg, overflow, &mut notices);
                if !content.is_empty() && !content.ends_with('\n') {
                    content.push('\n');
                }
                content.push_str(&body);
                structured = Some(value);
            }
            for line in described.lines {
                if !content.is_empty() && !content.ends_with('\n') {
                    content.push('\n');
                }
                content.push_str(&line);
            }
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
            (content, out.is_error)
        }
    };
    let content = match ctx.external {
        Some(source) => wrap_external(source, &content),
        None => content,
    };
    let blocks = (!kept_blocks.is_empty()).then(|| {
        let mut all = vec![serde_json::json!({"type": "text", "text": content})];
        all.extend(kept_blocks);
        all
    });
    Finished {
        result: ToolResult {
            index: ctx.index,
            tool_use_id: ctx.id.to_string(),
            name: ctx.name.to_string(),
            is_error,
            content,
            blocks,
            structured,
        },
        notices,
        failed,
    }
}

/// A structured value as the model reads it: its JSON when that is at most
/// `output.handle_min_bytes`, otherwise (when the store can keep it and this is the call's
/// final view) a structural summary and the handle it is kept under. A value that cannot be
/// kept is shown as JSON and cut like any output, with an `overflow_failed` notice.
fn structured_body(
    ctx: &FinishContext<'_>,
    value: &serde_json::Value,
    cfg: &OutputConfig,
    overflow: Option<Overflow<'_>>,
    notices: &mut Vec<Notice>,
) -> String {
    let json = value.to_string();
    if json.len() <= cfg.handle_min_bytes || !ctx.final_view {
        return json;
    }
    let Some(o) = overflow else {
        return json;
    };
    // Kept pretty-printed, so that retrieval by lines reads one member per line.
    let kept = serde_json::to_string_pretty(value).unwrap_or_else(|_| json.clone());
    match o.store.save_handle(o.session, &kept) {
        Ok(handle) => {
            let limits = SummaryLimits {
                max_bytes: cfg.handle_summary_bytes,
                preview_items: cfg.handle_preview_items,
            };
            format!(
                "{}\n{}",
                summarize(value, json.len(), limits),
                handle_marker(&handle, json.len(), &example_pointer(value))
            )
        }
        Err(e) => {
            tracing::warn!(error = %e, "saving a structured result under a handle failed");
            notices.push(Notice::for_call(NoticeKind::OverflowFailed, ctx.index, e.to_string()));
            json
        }
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
                    structured: None,
                    blocks: Vec::new(),
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
            structured: None,
            blocks: Vec::new(),
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
    fn a_large_structured_value_becomes_a_summary_and_a_handle() {
        let dir = tempfile::tempdir().unwrap();
        let store = OverflowStore::new(dir.path().to_path_buf());
        let items: Vec<serde_json::Value> = (0..5000).map(|i| serde_json::json!({"id": i, "name": format!("n{i}")})).collect();
        let value = serde_json::json!({"items": items, "total": 5000});
        let overflow = Some(Overflow {
            store: &store,
            session: "s",
        });
        let ctx = FinishContext {
            name: "search",
            ..ctx(true)
        };
        let f = finish_call(ctx, Ok(ToolOutput::structured("Found 5000.", value.clone())), &cfg(), overflow);
        let content = &f.result.content;
        assert!(
            content.starts_with("Found 5000.\n[JSON object {items: array, total: number}"),
            "{content}"
        );
        assert!(
            content.contains("[handle h1: ") && content.contains("\"path\": \"/items/0/id\""),
            "{content}"
        );
        assert!(content.len() < 3000, "the model reads the shape, not the data: {}", content.len());
        let kept: serde_json::Value = serde_json::from_str(&store.load_handle("s", "h1").unwrap()).unwrap();
        assert_eq!(kept, value, "kept whole");
        // A small value is shown as it is; a poll is never kept.
        let small = finish_call(ctx, Ok(ToolOutput::structured("", serde_json::json!({"a": 1}))), &cfg(), overflow);
        assert_eq!(small.result.content, "{\"a\":1}");
        let poll = finish_call(
            FinishContext { final_view: false, ..ctx },
            Ok(ToolOutput::structured("", value)),
            &cfg(),
            overflow,
        );
        assert!(!poll.result.content.contains("[handle"));
        assert!(store.load_handle("s", "h2").is_err());
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
