//! `list_dir`: the entries of a folder, sorted, depth-limited.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{blocking, parse_input, workspace};
use crate::tool::{Capability, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};

/// Lists a folder's entries with kind and size.
#[derive(Debug, Default)]
pub struct ListDir;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    depth: Option<usize>,
}

impl Tool for ListDir {
    fn name(&self) -> &str {
        "list_dir"
    }
    fn description(&self) -> &str {
        "List the files and folders in a workspace folder, sorted, with kind and size. Depth 1 lists only the folder itself."
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Folder, relative to the workspace root (default: the root)"},
                "depth": {"type": "integer", "minimum": 1, "description": "How many levels to list"}
            },
            "additionalProperties": false
        })
    }
    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let input: Input = parse_input(input)?;
            let cfg = &ctx.config.list_dir;
            let depth = input.depth.unwrap_or(cfg.default_depth);
            if depth > cfg.max_depth {
                return Err(ToolError::invalid(
                    "depth",
                    format!(
                        "depth {depth} is over the limit of {}; use grep_files to search deep trees",
                        cfg.max_depth
                    ),
                ));
            }
            let root = workspace::confine_input(ctx, input.path.as_deref().unwrap_or("."), "path")?;
            if !root.is_dir() {
                return Err(ToolError::invalid(
                    "path",
                    format!("`{}` is not a folder", workspace::display(&ctx.workspace, &root)),
                ));
            }
            let max = cfg.max_entries;
            // What the policy denies by path is left out, names and all.
            let screen = ctx.screen("list_dir");
            // A walk of a large or slow tree runs off the async thread (see `blocking`).
            // The workspace's real path once; every folder's walk starts there.
            let ws = ctx
                .workspace
                .canonicalize()
                .map_err(|e| ToolError::tool(format!("the workspace {} is not usable: {e}", ctx.workspace.display())))?;
            let (lines, truncated, hid) = blocking::run(move |_| {
                let mut walked = Walk {
                    workspace: &ws,
                    root: &root,
                    max,
                    screen: screen.as_ref(),
                    lines: Vec::new(),
                    truncated: false,
                    hid: false,
                    unlistable: false,
                };
                if walked.screen.is_some_and(|hides| hides(&root)) {
                    walked.hid = true;
                } else {
                    walked.walk(&root, depth);
                }
                if walked.unlistable {
                    return Err(ToolError::tool(
                        "folders are listed through /proc/self/fd, which is not mounted here; nothing was listed",
                    ));
                }
                Ok((walked.lines, walked.truncated, walked.hid))
            })
            .await?;
            let mut out = lines.join("\n");
            if lines.is_empty() {
                out.push_str("(empty folder)");
            }
            if hid {
                out.push_str("\n[paths the policy denies are not listed]");
            }
            if truncated {
                out.push_str(&format!("\n[listing stopped at {} entries; list a subfolder]", cfg.max_entries));
            }
            Ok(ToolOutput::text(out))
        })
    }
}

/// One listing: where it started, its limits, and what it found.
struct Walk<'a> {
    /// The workspace's real path.
    workspace: &'a Path,
    root: &'a Path,
    max: usize,
    screen: Option<&'a crate::tool::Screen>,
    lines: Vec<String>,
    truncated: bool,
    /// Something was left out because the policy denies it.
    hid: bool,
    /// A folder could not be listed through its handle (no `/proc`).
    unlistable: bool,
}

impl Walk<'_> {
    fn walk(&mut self, dir: &Path, depth: usize) {
        // The folder reached from the workspace with no link followed, and listed through its
        // handle: a folder a running program swapped for a link since is not listed, and what
        // is listed (names, kinds, sizes: `fstatat` in that folder) is that folder's.
        let Ok(handle) = super::workspace::walk_down_from(self.workspace, dir, false) else {
            return;
        };
        let read = match std::fs::read_dir(format!("/proc/self/fd/{}", handle.raw())) {
            Ok(read) => read,
            // No /proc (a minimal container): listing by path would bring the race back.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.unlistable = true;
                return;
            }
            Err(_) => return,
        };
        let mut entries: Vec<_> = read.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            if self.lines.len() >= self.max {
                self.truncated = true;
                return;
            }
            let path = dir.join(e.file_name());
            if self.screen.is_some_and(|hides| hides(&path)) {
                self.hid = true;
                continue;
            }
            let rel = path.strip_prefix(self.root).unwrap_or(&path).display().to_string();
            let Ok(meta) = e.metadata() else {
                continue;
            };
            if meta.file_type().is_symlink() {
                self.lines.push(format!("link  {rel}"));
            } else if meta.is_dir() {
                self.lines.push(format!("dir   {rel}/"));
                if depth > 1 {
                    self.walk(&path, depth - 1);
                }
            } else {
                self.lines.push(format!("file  {rel}  ({} bytes)", meta.len()));
            }
        }
    }
}

impl ToolSpec for ListDir {
    fn capabilities(&self) -> &[Capability] {
        &[Capability::ReadOnly]
    }
    fn supports_parallel(&self) -> bool {
        true
    }
}
