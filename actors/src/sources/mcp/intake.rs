//! Where every listing of a server's tools goes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;
use toolslot::config::{McpConfig, McpServerConfig};
use toolslot::mcp::{ListingLimits, McpCaller, ToolListCache, entry_name, hashed_name, server_prefixes, tool_from_entry, tool_name};
use toolslot::notice::{Notice, NoticeKind};
use toolslot::registry::LiveRegistry;
use toolslot::tool::ToolSpec;

/// Who a catalog name belongs to: a server and the tool's name there (or its place in the
/// listing, for an entry without a name).
type Owner = (String, String);

/// The MCP tools seen so far, in the order seen, and whose each name is.
#[derive(Default)]
struct Known {
    tools: Vec<Arc<dyn ToolSpec>>,
    owners: HashMap<String, Owner>,
    /// The name each (server, tool) got, once.
    names: HashMap<Owner, String>,
}

/// Every MCP tool seen so far, and the registry that new ones are appended to.
///
/// A server lists its tools when it starts and again when it says they changed; only names
/// not seen before are new (a tool a server dropped stays listed and answers with the
/// server's error, so the catalog never shrinks under a cached prompt). A name belongs to the
/// one server that listed it under its prefix (prefixes are settled from the configuration,
/// [`server_prefixes`]); a tool whose name is taken anyway (two tools of one server that
/// clean to one name) gets a hashed name of its own, with a notice, and a call is never routed
/// to a server other than the one that listed the tool.
pub struct ToolIntake {
    limits: ListingLimits,
    max_tools: usize,
    cache: Option<ToolListCache>,
    prefixes: HashMap<String, String>,
    known: Mutex<Known>,
    /// The listing last written to the cache, per server.
    stored: Mutex<HashMap<String, Vec<Value>>>,
    /// Notices not yet taken (renamed servers and tools, cut listings).
    notices: Mutex<Vec<Notice>>,
    live: OnceLock<LiveRegistry>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each operation leaves the maps whole; a poisoned lock holds nothing half-done.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ToolIntake {
    /// An intake for the servers of `mcp`, keeping listings in `cache`.
    pub fn new(mcp: &McpConfig, cache: Option<ToolListCache>) -> Self {
        let mut prefixes = HashMap::new();
        let mut notices = Vec::new();
        for (server, (prefix, note)) in mcp.servers.iter().zip(server_prefixes(&mcp.servers)) {
            if let Some(note) = note {
                tracing::warn!(server = %server.name, %prefix, "{note}");
                notices.push(Notice::new(NoticeKind::ToolAdjusted, note));
            }
            prefixes.insert(server.name.clone(), prefix);
        }
        Self {
            limits: ListingLimits::of(mcp),
            max_tools: mcp.max_tools_per_server,
            cache,
            prefixes,
            known: Mutex::new(Known::default()),
            stored: Mutex::new(HashMap::new()),
            notices: Mutex::new(notices),
            live: OnceLock::new(),
        }
    }

    /// The notices raised so far, taken.
    pub fn take_notices(&self) -> Vec<Notice> {
        std::mem::take(&mut *lock(&self.notices))
    }

    /// The listing kept for `cfg`'s server, if any (see [`ToolListCache::load`]).
    pub fn kept_listing(&self, cfg: &McpServerConfig) -> Option<Vec<Value>> {
        self.cache.as_ref()?.load(cfg)
    }

    fn prefix_of(&self, cfg: &McpServerConfig) -> String {
        self.prefixes
            .get(&cfg.name)
            .cloned()
            // A server not in the configuration the intake was made for: its cleaned name.
            .unwrap_or_else(|| server_prefixes(std::slice::from_ref(cfg)).remove(0).0)
    }

    /// Takes a listing of `cfg`'s server. A `fresh` listing (from the running server, not
    /// from the cache) is kept for next time. Returns how many tools were new.
    pub fn offer(&self, cfg: &McpServerConfig, listing: &[Value], caller: Arc<dyn McpCaller>, fresh: bool) -> usize {
        let listing = if listing.len() > self.max_tools {
            let note = format!(
                "MCP server `{}` listed {} tools; only the first {} are offered (mcp.max_tools_per_server)",
                cfg.name,
                listing.len(),
                self.max_tools
            );
            tracing::warn!(server = %cfg.name, "{note}");
            lock(&self.notices).push(Notice::new(NoticeKind::ToolAdjusted, note));
            &listing[..self.max_tools]
        } else {
            listing
        };
        if fresh && let Some(cache) = &self.cache {
            // A server re-lists at every start and change notice, mostly the same tools: the
            // file is written only when the listing differs from the one kept last.
            let mut stored = lock(&self.stored);
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
        let prefix = self.prefix_of(cfg);
        let new: Vec<Arc<dyn ToolSpec>> = {
            let mut known = lock(&self.known);
            let mut new = Vec::new();
            for (i, entry) in listing.iter().enumerate() {
                let remote = entry_name(entry).map_or_else(|| format!("entry_{i}"), str::to_string);
                let owner: Owner = (cfg.name.clone(), remote.clone());
                if known.names.contains_key(&owner) {
                    // Seen before: it keeps the tool (and the name) it had.
                    continue;
                }
                let plain = tool_name(&prefix, &remote);
                // A name another source holds (an extension named like a server tool) is
                // taken as surely as another server's.
                let elsewhere = self
                    .live
                    .get()
                    .filter(|live| !known.owners.contains_key(&plain) && live.current().get(&plain).is_some())
                    .map(|_| ("a tool of another source".to_string(), plain.clone()));
                let holder = known
                    .owners
                    .get(&plain)
                    .map(|(server, tool)| (format!("MCP server `{server}`"), tool.clone()));
                let (name, note) = match holder.or(elsewhere) {
                    None => (plain, None),
                    Some((other_server, other_tool)) => {
                        let hashed = hashed_name(&prefix, &remote);
                        if known.owners.contains_key(&hashed) || self.live.get().is_some_and(|l| l.current().get(&hashed).is_some()) {
                            // Nothing is left to call it by: it is not offered, and says so.
                            let note = format!(
                                "MCP server `{}`'s tool `{remote}` is not offered: its names `{plain}` and `{hashed}` are taken",
                                cfg.name
                            );
                            tracing::warn!(server = %cfg.name, "{note}");
                            lock(&self.notices).push(Notice::new(NoticeKind::ToolAdjusted, note));
                            continue;
                        }
                        let note = format!("named `{hashed}` because `{plain}` is taken by tool `{other_tool}` of {other_server}");
                        (hashed, Some(note))
                    }
                };
                let tool = tool_from_entry(cfg, name.clone(), note, entry, self.limits, &caller);
                known.owners.insert(name.clone(), owner.clone());
                known.names.insert(owner, name);
                known.tools.push(Arc::clone(&tool));
                new.push(tool);
            }
            new
        };
        if !new.is_empty() {
            tracing::info!(server = %cfg.name, new = new.len(), "MCP tools added");
            if let Some(live) = self.live.get() {
                let (_, notices) = live.append(new.iter().cloned());
                for n in notices {
                    tracing::warn!(server = %cfg.name, notice = %n.message, "added tool failed closed or was adjusted");
                }
            }
        }
        new.len()
    }

    /// Every MCP tool seen so far, in the order seen.
    pub fn tools(&self) -> Vec<Arc<dyn ToolSpec>> {
        lock(&self.known).tools.clone()
    }

    /// From now on, new tools are appended to `live`; tools seen since `live` was built
    /// from [`ToolIntake::tools`] are appended now.
    pub fn attach(&self, live: LiveRegistry) {
        let live = self.live.get_or_init(|| live);
        live.append(self.tools());
    }
}
