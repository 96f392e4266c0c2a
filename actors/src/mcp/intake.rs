//! Where every listing of a server's tools goes.

use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;
use toolslot::config::McpServerConfig;
use toolslot::mcp::{McpCaller, ToolListCache, tools_from_listing};
use toolslot::registry::LiveRegistry;
use toolslot::tool::ToolSpec;

/// Every MCP tool seen so far, and the registry that new ones are appended to.
///
/// A server lists its tools when it starts and again when it says they changed; only names
/// not seen before are new (a tool a server dropped stays listed and answers with the
/// server's error, so the catalog never shrinks under a cached prompt).
pub struct ToolIntake {
    description_max_chars: usize,
    cache: Option<ToolListCache>,
    known: Mutex<Vec<Arc<dyn ToolSpec>>>,
    live: OnceLock<LiveRegistry>,
}

impl ToolIntake {
    /// An intake capping descriptions at `description_max_chars`, keeping listings in `cache`.
    pub fn new(description_max_chars: usize, cache: Option<ToolListCache>) -> Self {
        Self {
            description_max_chars,
            cache,
            known: Mutex::new(Vec::new()),
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
        if fresh
            && let Some(cache) = &self.cache
            && let Err(reason) = cache.store(cfg, listing)
        {
            tracing::warn!(server = %cfg.name, %reason, "cannot keep the tool listing; the server will start at start-up next time");
        }
        let tools = tools_from_listing(cfg, listing, self.description_max_chars, &caller);
        let new: Vec<Arc<dyn ToolSpec>> = {
            let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
            let new: Vec<_> = tools.into_iter().filter(|t| !known.iter().any(|k| k.name() == t.name())).collect();
            known.extend(new.iter().cloned());
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
        self.known.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// From now on, new tools are appended to `live`; tools seen since `live` was built
    /// from [`ToolIntake::tools`] are appended now.
    pub fn attach(&self, live: LiveRegistry) {
        let live = self.live.get_or_init(|| live);
        live.append(self.tools());
    }
}
