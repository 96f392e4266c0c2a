//! `tool_search`: finds deferred tools and loads them into the session's catalog.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::tool::{Capability, ErrorCategory, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};

/// Ranks deferred tools for a query and activates the matches for the session.
#[derive(Debug, Default)]
pub struct ToolSearch;

#[derive(Deserialize)]
struct Input {
    query: String,
    #[serde(default)]
    limit: Option<usize>,
}

impl Tool for ToolSearch {
    fn name(&self) -> &str {
        "tool_search"
    }
    fn description(&self) -> &str {
        "Search the tools that are available but not loaded yet, by what you want to do. \
         The best matches are loaded, so you can call them in your next message."
    }
    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you want to do, in a few words"},
                "limit": {"type": "integer", "minimum": 1, "description": "How many tools to load"}
            },
            "required": ["query"],
            "additionalProperties": false
        })
    }
    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let input: Input = serde_json::from_value(input)
                .map_err(|e| ToolError::invalid("query", format!("tool_search needs {{\"query\": string}}: {e}")))?;
            if let Some(why) = crate::registry::query_too_long(&input.query, ctx.config.search.max_query_chars) {
                return Err(ToolError::invalid("query", why));
            }
            let Some(index) = ctx.services.search_index() else {
                return Err(ToolError::refused(
                    ErrorCategory::Unavailable,
                    "No tools are deferred: every tool is already loaded.",
                ));
            };
            let cfg = &ctx.config.search;
            let top = input.limit.unwrap_or(cfg.top_n).clamp(1, cfg.max_results.max(1));
            let hits = index.search(&input.query, top);
            if hits.is_empty() {
                return Ok(ToolOutput::text(format!(
                    "No deferred tool matches \"{}\". Try other words for the task.",
                    input.query
                )));
            }
            let names: Vec<String> = hits.iter().map(|h| h.name.clone()).collect();
            ctx.services.activate_tools(&names);
            let mut text = String::from("Loaded these tools; call them in your next message:\n");
            for h in &hits {
                text.push_str(&format!("- {}: {}\n", h.name, h.summary));
            }
            Ok(ToolOutput::text(text))
        })
    }
}

impl ToolSpec for ToolSearch {
    fn capabilities(&self) -> &[Capability] {
        &[Capability::ReadOnly]
    }
    fn supports_parallel(&self) -> bool {
        // It changes the session's catalog; two searches in one batch would race on it.
        false
    }
}
