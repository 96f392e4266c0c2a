//! `list_dir`: the entries of a folder, sorted, depth-limited.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{parse_input, workspace};
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
            let mut lines = Vec::new();
            let mut truncated = false;
            walk(&root, &root, depth, cfg.max_entries, &mut lines, &mut truncated);
            let mut out = lines.join("\n");
            if lines.is_empty() {
                out.push_str("(empty folder)");
            }
            if truncated {
                out.push_str(&format!("\n[listing stopped at {} entries; list a subfolder]", cfg.max_entries));
            }
            Ok(ToolOutput::text(out))
        })
    }
}

fn walk(root: &Path, dir: &Path, depth: usize, max: usize, out: &mut Vec<String>, truncated: &mut bool) {
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = read.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        if out.len() >= max {
            *truncated = true;
            return;
        }
        let path = e.path();
        let rel = path.strip_prefix(root).unwrap_or(&path).display().to_string();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            out.push(format!("link  {rel}"));
        } else if meta.is_dir() {
            out.push(format!("dir   {rel}/"));
            if depth > 1 {
                walk(root, &path, depth - 1, max, out, truncated);
            }
        } else {
            out.push(format!("file  {rel}  ({} bytes)", meta.len()));
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
