//! Where every listing of a server's tools goes.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;
use toolslot::config::McpServerConfig;
use toolslot::mcp::{McpCaller, ToolListCache, tool_name, tools_from_listing};
use toolslot::registry::LiveRegistry;
use toolslot::tool::ToolSpec;

/// The MCP tools seen so far, in the order seen, and their names.
#[derive(Default)]
struct Known {
    tools: Vec<Arc<dyn ToolSpec>>,
    names: HashSet<String>,
}

/// Every MCP tool seen so far, and the registry that new ones are appended to.
///
/// A server lists its tools when it starts and again when it says they changed; only names
/// not seen before are new (a tool a server dropped stays listed and answers with the
/// server's error, so the catalog never shrinks under a cached prompt).
pub struct ToolIntake {
    description_max_chars: usize,
    cache: Option<ToolListCache>,
    known: Mutex<Known>,
    /// The listing last written to the cache, per server.
    stored: Mutex<HashMap<String, Vec<Value>>>,
    live: OnceLock<LiveRegistry>,
}

impl ToolIntake {
    /// An intake capping descriptions at `description_max_chars`, keeping listings in `cache`.
    pub fn new(description_max_chars: usize, cache: Option<ToolListCache>) -> Self {
        Self {
            description_max_chars,
            cache,
            known: Mutex::new(Known::default()),
            stored: Mutex::new(HashMap::new()),
            live: OnceLock::new(),
        }
    }

    /// The listing kept for `cfg`'s server, if any (see [`ToolListCache::load`]).
    pub fn kept_listing(&self, cfg: &McpServerConfig) -> Option<Vec<Value>> {
        self.cache.as_ref()?.load(cfg)
    }

    /// Takes a listing of `cfg`'s server. A `fresh` listing (from the running server, not
    /// from the cache) is kept for next time. Returns how many tools were new.
    pub fn offer(&self, cfg: &McpServerConfig, listing: &[Value], caller: Arc<dyn McpCaller>, fresh: bool) -> usize {
        if fresh && let Some(cache) = &self.cache {
            // A server re-lists at every start and change notice, mostly the same tools: the
            // file is written only when the listing differs from the one kept last.
            let mut stored = self.stored.lock().unwrap_or_else(|p| p.into_inner());
            if stored.get(&cfg.name).is_none_or(|kept| kept.as_slice() != listing) {
                match cache.store(cfg, listing) {
                    Ok(()) => {
                        stored.insert(cfg.name.clone(), listing.to_vec());
                    }
                    Err(reason) => {
                        tracing::warn!(server = %cfg.name, %reason, "cannot keep the tool listing; the server will start at start-up next time")
                    }
                }
            }
        }
        let new: Vec<Arc<dyn ToolSpec>> = {
            let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
            // Only tools with new names are built: the rest are known already.
            let unseen: Vec<Value> = listing
                .iter()
                .filter(|t| {
                    let remote = t.get("name").and_then(Value::as_str).unwrap_or("");
                    !known.names.contains(&tool_name(&cfg.name, remote))
                })
                .cloned()
                .collect();
            let new = tools_from_listing(cfg, &unseen, self.description_max_chars, &caller);
            for t in &new {
                known.names.insert(t.name().to_string());
            }
            known.tools.extend(new.iter().cloned());
            new
        };
        if !new.is_empty() {
            tracing::info!(server = %cfg.name, new = new.len(), "MCP tools added");
            if let Some(live) = self.live.get() {
                let (_, notices) = live.append(new.iter().cloned());
                for n in notices {
                    tracing::warn!(server = %cfg.name, notice = %n.message, "added tool failed closed");
                }
            }
        }
        new.len()
    }

    /// Every MCP tool seen so far, in the order seen.
    pub fn tools(&self) -> Vec<Arc<dyn ToolSpec>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner()).tools.clone()
    }

    /// From now on, new tools are appended to `live`; tools seen since `live` was built
    /// from [`ToolIntake::tools`] are appended now.
    pub fn attach(&self, live: LiveRegistry) {
        let live = self.live.get_or_init(|| live);
        live.append(self.tools());
    }
}
