//! `grep_files`: a regex over the workspace, honoring .gitignore.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{blocking, parse_input, workspace};
use crate::tool::{Capability, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};

/// Searches file contents with a regular expression.
#[derive(Debug, Default)]
pub struct GrepFiles;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    case_insensitive: bool,
}

impl Tool for GrepFiles {
    fn name(&self) -> &str {
        "grep_files"
    }
    fn description(&self) -> &str {
        "Search the workspace's files for a regular expression (files ignored by .gitignore are skipped). Returns file:line:text for each match."
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression (Rust regex syntax)"},
                "path": {"type": "string", "description": "Folder or file to search, relative to the workspace root"},
                "case_insensitive": {"type": "boolean"}
            },
            "required": ["pattern"],
            "additionalProperties": false
        })
    }
    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let input: Input = parse_input(input)?;
            let re = regex::RegexBuilder::new(&input.pattern)
                .case_insensitive(input.case_insensitive)
                .build()
                .map_err(|e| ToolError::invalid("pattern", format!("invalid regular expression: {e}")))?;
            let root = workspace::confine_input(ctx, input.path.as_deref().unwrap_or("."), "path")?;
            let cfg = ctx.config.grep_files.clone();
            let ws = ctx.workspace.clone();
            // What the policy denies by path is skipped, folders and all: a search with no path
            // names no secret, and must not read one.
            let screen = ctx.screen("grep_files").map(std::sync::Arc::new);
            let skipped_hidden = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let skipped_walk = std::sync::Arc::clone(&skipped_hidden);
            let skipped_hidden_files = std::sync::Arc::clone(&skipped_hidden);
            // The walk runs off the async thread and stops between files once the call is gone
            // (its timeout, a cancelled round): see `blocking`.
            let (out, more, too_big) = blocking::run(move |abandon| {
                let mut out = Vec::new();
                let mut more = false;
                let mut too_big = 0usize;
                if screen.as_ref().is_some_and(|hides| hides(&root)) {
                    skipped_walk.store(true, std::sync::atomic::Ordering::Relaxed);
                    return Ok((out, more, too_big));
                }
                let (screen_walk, skipped_walk) = (screen.clone(), std::sync::Arc::clone(&skipped_walk));
                'walk: for entry in ignore::WalkBuilder::new(&root)
                    .hidden(false)
                    .git_ignore(true)
                    .require_git(false)
                    .filter_entry(move |e| {
                        let hidden = screen_walk.as_ref().is_some_and(|hides| hides(e.path()));
                        if hidden {
                            skipped_walk.store(true, std::sync::atomic::Ordering::Relaxed);
                        }
                        !hidden
                    })
                    .build()
                    .flatten()
                {
                    if abandon.is_set() {
                        return Err(blocking::Abandon::stopped());
                    }
                    // Symlinks are not followed (the walk's default), and only regular files are
                    // opened: a FIFO would block the walk, a device would never end.
                    if !entry.file_type().is_some_and(|t| t.is_file()) {
                        continue;
                    }
                    let Ok(file) = workspace::open_regular(&ws, entry.path(), "path") else {
                        continue;
                    };
                    // Judged again where the opened file really is: a folder swapped since the
                    // walk looked at it must not bring a hidden file in under another name.
                    if let (Some(hides), Some(real)) = (screen.as_ref(), workspace::opened_path(&file))
                        && hides(&real)
                    {
                        skipped_hidden_files.store(true, std::sync::atomic::Ordering::Relaxed);
                        continue;
                    }
                    let bytes = match workspace::read_bounded(file, cfg.max_file_bytes) {
                        Ok(Some(bytes)) => bytes,
                        Ok(None) => {
                            too_big += 1;
                            continue;
                        }
                        Err(_) => continue,
                    };
                    if bytes[..bytes.len().min(8192)].contains(&0) {
                        continue;
                    }
                    let text = String::from_utf8_lossy(&bytes);
                    let shown = workspace::display(&ws, entry.path());
                    for (n, line) in text.lines().enumerate() {
                        if re.is_match(line) {
                            if out.len() >= cfg.max_matches {
                                more = true;
                                break 'walk;
                            }
                            let line: String = line.chars().take(cfg.max_line_chars).collect();
                            out.push(format!("{shown}:{}:{line}", n + 1));
                        }
                    }
                }
                Ok((out, more, too_big))
            })
            .await?;
            let cfg = &ctx.config.grep_files;
            let mut skipped = if too_big > 0 {
                format!(
                    "\n[{too_big} file(s) over {} bytes were not searched (grep_files.max_file_bytes)]",
                    cfg.max_file_bytes
                )
            } else {
                String::new()
            };
            if skipped_hidden.load(std::sync::atomic::Ordering::Relaxed) {
                skipped.push_str("\n[paths the policy denies were not searched]");
            }
            if out.is_empty() {
                return Ok(ToolOutput::text(format!("no match for `{}`{skipped}", input.pattern)));
            }
            let mut text = out.join("\n");
            text.push_str(&skipped);
            if more {
                text.push_str(&format!(
                    "\n[stopped at {} matches; narrow the pattern or the path]",
                    cfg.max_matches
                ));
            }
            Ok(ToolOutput::text(text))
        })
    }
}

impl ToolSpec for GrepFiles {
    fn capabilities(&self) -> &[Capability] {
        &[Capability::ReadOnly]
    }
    fn supports_parallel(&self) -> bool {
        true
    }
}
