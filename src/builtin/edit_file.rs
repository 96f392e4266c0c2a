//! `edit_file`: replace a unique piece of text in a file the session has read.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Value, json};

use super::write_beneath::write_atomic_beneath;
use super::{parse_input, workspace};
use crate::tool::{Capability, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};

/// Replaces `search` with `replace` in one file.
#[derive(Debug, Default)]
pub struct EditFile;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    path: String,
    search: String,
    replace: String,
    #[serde(default)]
    replace_all: bool,
}

impl Tool for EditFile {
    fn name(&self) -> &str {
        "edit_file"
    }
    fn description(&self) -> &str {
        "Replace an exact piece of text in a file you have read in this session. The text must occur exactly once unless replace_all is true; include surrounding lines to make it unique."
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path, relative to the workspace root"},
                "search": {"type": "string", "minLength": 1, "description": "Exact text to find"},
                "replace": {"type": "string", "description": "Text to put in its place"},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence"}
            },
            "required": ["path", "search", "replace"],
            "additionalProperties": false
        })
    }
    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let input: Input = parse_input(input)?;
            let path = workspace::confine_input(ctx, &input.path, "path")?;
            super::protected::check(&ctx.workspace, &path, &ctx.config.tools.protected)?;
            let shown = workspace::display(&ctx.workspace, &path);
            workspace::refuse_hidden(ctx, "edit_file", &path, &shown)?;
            let meta = std::fs::metadata(&path).map_err(|e| ToolError::invalid("path", format!("cannot edit `{shown}`: {e}")))?;
            let modified = meta
                .modified()
                .map_err(|e| ToolError::tool(format!("cannot stat `{shown}`: {e}")))?;
            match ctx.services.file_read_state(&path) {
                None => {
                    return Err(ToolError::invalid(
                        "path",
                        format!("`{shown}` has not been read in this session; read it with read_file before editing it"),
                    ));
                }
                Some(seen) if seen != modified => {
                    return Err(ToolError::invalid(
                        "path",
                        format!("`{shown}` changed since you read it; read it again before editing it"),
                    ));
                }
                Some(_) => {}
            }
            let file = workspace::open_regular(&ctx.workspace, &path, "path")?;
            let max = ctx.config.read_file.max_file_bytes;
            let bytes = workspace::read_bounded(file, max)
                .map_err(|e| ToolError::tool(format!("cannot read `{shown}`: {e}")))?
                .ok_or_else(|| {
                    ToolError::invalid(
                        "path",
                        format!("`{shown}` is over the {max}-byte limit (read_file.max_file_bytes); edit it with exec_shell"),
                    )
                })?;
            let text = String::from_utf8(bytes).map_err(|_| ToolError::invalid("path", format!("`{shown}` is not UTF-8 text")))?;
            let find = |search: &str| -> Vec<usize> { text.match_indices(search).map(|(i, _)| i).collect() };
            let (mut search, mut replace) = (Cow::Borrowed(input.search.as_str()), Cow::Borrowed(input.replace.as_str()));
            let mut starts = find(&search);
            if starts.is_empty()
                && let Some((crlf_search, crlf_replace)) = in_crlf(&text, &input.search, &input.replace)
            {
                starts = find(&crlf_search);
                (search, replace) = (crlf_search, crlf_replace);
            }
            let (search, replace) = (search.as_ref(), replace.as_ref());
            if starts.is_empty() {
                return Err(ToolError::invalid(
                    "search",
                    format!("the search text was not found in `{shown}`; read the file again and copy the text exactly"),
                ));
            }
            if starts.len() > 1 && !input.replace_all {
                let lines: Vec<String> = starts.iter().map(|i| (text[..*i].matches('\n').count() + 1).to_string()).collect();
                return Err(ToolError::invalid(
                    "search",
                    format!(
                        "the search text occurs {} times in `{shown}` (lines {}); include more surrounding text to make it unique, or set replace_all",
                        starts.len(),
                        lines.join(", ")
                    ),
                ));
            }
            let new_text = if input.replace_all {
                text.replace(search, replace)
            } else {
                text.replacen(search, replace, 1)
            };
            let modified = write_atomic_beneath(&ctx.workspace, &path, new_text.as_bytes(), &shown)?;
            ctx.services.record_file_state(&path, modified);
            Ok(ToolOutput::text(format!("Edited `{shown}`: {} replacement(s).", starts.len())))
        })
    }
}

/// `search` and `replace` with CRLF line endings, for a search that did not match `text`, a file
/// with CRLF line endings: read_file shows such a file without its carriage returns, so a
/// model's search text spanning lines has bare newlines and would never match. The replacement
/// is written with them too, so the file keeps its own. `None` where that cannot be the reason.
fn in_crlf<'a>(text: &str, search: &str, replace: &str) -> Option<(Cow<'a, str>, Cow<'a, str>)> {
    if !search.contains('\n') || search.contains('\r') || !text.contains("\r\n") {
        return None;
    }
    let crlf = |s: &str| Cow::Owned(s.replace("\r\n", "\n").replace('\n', "\r\n"));
    Some((crlf(search), crlf(replace)))
}

impl ToolSpec for EditFile {
    fn capabilities(&self) -> &[Capability] {
        &[Capability::WritesFiles]
    }
    fn approval_key(&self, input: &Value) -> String {
        format!("write_file:{}", input.get("path").and_then(Value::as_str).unwrap_or(""))
    }
    fn field_aliases(&self) -> &[(&'static str, &'static str)] {
        &[
            ("old_string", "search"),
            ("new_string", "replace"),
            ("old_str", "search"),
            ("new_str", "replace"),
            ("file_path", "path"),
        ]
    }
}
