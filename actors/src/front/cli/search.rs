//! `toolslot search`.

use std::io::{BufRead, Write};
use std::path::Path;

use serde_json::json;
use toolslot::registry::{SearchIndex, query_too_long};

use super::{CliError, registry_of, with_toolset};

pub fn run(config: Option<&Path>, top: Option<usize>, format: &str, query: &str) -> Result<(), CliError> {
    if format != "text" && format != "json" {
        return Err(CliError::Usage(format!("unknown search format `{format}` (expected text or json)")));
    }
    let (cfg, registry) = with_toolset(config, None, async |cfg, toolset| Ok((cfg, registry_of(&toolset))))?;
    let top = top.unwrap_or(cfg.search.top_n);
    let empty = SearchIndex::new(Vec::new());
    let index = registry.search_index();
    let index = index.as_deref().unwrap_or(&empty);
    let mut out = std::io::stdout().lock();
    let io = |e: std::io::Error| CliError::Io(format!("writing stdout: {e}"));
    if query == "-" {
        for line in std::io::stdin().lock().lines() {
            let line = line.map_err(|e| CliError::Io(format!("reading stdin: {e}")))?;
            // One bad line among many gets its own answer; the stream goes on.
            if let Some(why) = query_too_long(&line, cfg.search.max_query_chars) {
                writeln!(out, "{}", json!({"query": line, "error": why})).map_err(io)?;
                out.flush().map_err(io)?;
                continue;
            }
            let hits = index.search(&line, top);
            writeln!(out, "{}", json!({"query": line, "results": hits})).map_err(io)?;
            out.flush().map_err(io)?;
        }
        return Ok(());
    }
    if let Some(why) = query_too_long(query, cfg.search.max_query_chars) {
        return Err(CliError::Usage(why));
    }
    let hits = index.search(query, top);
    if format == "json" {
        writeln!(out, "{}", json!({"query": query, "results": hits})).map_err(io)?;
    } else if hits.is_empty() {
        writeln!(out, "no deferred tool matches").map_err(io)?;
    } else {
        for h in hits {
            writeln!(out, "{:.3}  {}  {}", h.score, h.name, h.summary).map_err(io)?;
        }
    }
    Ok(())
}
