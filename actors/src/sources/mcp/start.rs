//! Starting the configured servers: required ones now, optional ones on first use when their
//! last listing is kept.

use std::sync::Arc;

use actix::prelude::*;
use toolslot::config::Config;
use toolslot::mcp::{ListMcpResources, McpCaller, ReadMcpResource, ResourceSource, ToolListCache};
use toolslot::notice::{Notice, NoticeKind};
use toolslot::tool::ToolSpec;

use super::handle::{Live, McpServerHandle};
use super::intake::ToolIntake;
use super::per_thread::Opener;
use super::server::McpServerActor;

/// The configured servers and where their tools go.
pub struct McpSet {
    /// Every server tool seen so far; new ones are appended to the registry it is attached to.
    pub intake: Arc<ToolIntake>,
    /// The discovery helpers (`list_mcp_resources`, `read_mcp_resource`), when any server is
    /// configured.
    pub helpers: Vec<Arc<dyn ToolSpec>>,
    /// Servers that could not start (optional ones; a required one is an error).
    pub notices: Vec<Notice>,
    /// One handle per server, in configuration order.
    pub handles: Vec<McpServerHandle>,
}

/// Starts one supervised actor per configured server. A required server, and an optional one
/// whose last listing is not kept, is started now (in parallel, each within its start-up
/// timeout) to list its tools; an optional one with a kept listing offers those tools and
/// starts on the first call. Must run inside an actix system.
///
/// # Errors
/// A one-line reason when a `required` server cannot start.
/// `answers_input`: the host can put a server's questions (elicitation) to a user; only then
/// is the capability announced.
pub async fn start_servers(config: &Config, answers_input: bool) -> Result<McpSet, String> {
    let intake = Arc::new(ToolIntake::new(&config.mcp, config.mcp.tool_cache_path().map(ToolListCache::new)));
    let mut handles = Vec::new();
    let mut now = Vec::new();
    for cfg in &config.mcp.servers {
        let kept = if cfg.required { None } else { intake.kept_listing(cfg) };
        let call_timeout = cfg.call_timeout(&config.mcp);
        let (actor_cfg, global, actor_intake, idle) = (cfg.clone(), config.clone(), Arc::clone(&intake), kept.is_some());
        let live = Live::new(Opener::of(cfg, &config.mcp, answers_input));
        let actor_live = live.clone();
        let addr = Supervisor::start(move |_| McpServerActor::new(actor_cfg, &global, actor_intake, actor_live, idle, answers_input));
        let handle = McpServerHandle::new(cfg.name.clone(), addr, live, call_timeout);
        match kept {
            Some(listing) => {
                tracing::info!(server = %cfg.name, tools = listing.len(), "MCP server will start on first use");
                intake.offer(cfg, &listing, Arc::new(handle.clone()) as Arc<dyn McpCaller>, false);
            }
            None => now.push((cfg, handle.clone())),
        }
        handles.push(handle);
    }
    // Starting lists the tools into the intake.
    let started = futures::future::join_all(now.iter().map(|(_, h)| h.start())).await;
    let mut notices = Vec::new();
    for ((cfg, _), outcome) in now.iter().zip(started) {
        match outcome {
            Ok(()) => {}
            Err(reason) if cfg.required => return Err(format!("required MCP server `{}` did not start: {reason}", cfg.name)),
            Err(reason) => {
                tracing::warn!(server = %cfg.name, %reason, "optional MCP server unavailable");
                notices.push(Notice::new(
                    NoticeKind::FailClosedTool,
                    format!("MCP server `{}` is unavailable and offers no tools: {reason}", cfg.name),
                ));
            }
        }
    }
    // Servers named apart from the configuration, tools renamed, listings cut.
    notices.extend(intake.take_notices());
    let mut helpers: Vec<Arc<dyn ToolSpec>> = Vec::new();
    if !handles.is_empty() {
        let sources: Vec<Arc<dyn ResourceSource>> = handles.iter().map(|h| Arc::new(h.clone()) as Arc<dyn ResourceSource>).collect();
        helpers.push(Arc::new(ListMcpResources(sources.clone())));
        helpers.push(Arc::new(ReadMcpResource(sources)));
    }
    Ok(McpSet {
        intake,
        helpers,
        notices,
        handles,
    })
}
