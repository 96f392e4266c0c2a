//! Assembling a host's tools: built-ins, extensions, MCP servers and sub-agents in one registry.

use std::sync::{Arc, Mutex, Weak};

use toolslot::config::Config;
use toolslot::notice::Notice;
use toolslot::registry::{LiveRegistry, Registry, RegistryBuilder};

use crate::host::dispatcher::Dispatcher;
use crate::host::subagent::{AgentRunner, RegistryFactory, SpawnAgent};
use crate::sources::mcp::{McpServerHandle, start_servers};
use crate::sources::remote::RemoteHub;

/// A host's tools and what keeps them running.
pub struct Toolset {
    /// The registry of the host's own sessions; MCP tools that arrive later are appended.
    pub registry: LiveRegistry,
    /// Notices from start-up (servers that did not start).
    pub notices: Vec<Notice>,
    /// The MCP servers.
    pub mcp: Vec<McpServerHandle>,
    /// The connection to remote workers, when `remote.nats_url` is set.
    pub remote: Option<Arc<RemoteHub>>,
    dispatcher_slot: Arc<Mutex<Weak<Dispatcher>>>,
    /// Builds the registry of a session at a depth (a sub-agent's one level below its parent).
    factory: RegistryFactory,
}

/// Stops every server of `servers` at once (see [`McpServerHandle::shutdown`]): what a host
/// does before it exits, so no server process outlives it.
pub async fn shutdown_servers(servers: &[McpServerHandle]) {
    futures::future::join_all(servers.iter().map(McpServerHandle::shutdown)).await;
}

impl Toolset {
    /// Connects spawn_agent to the dispatcher its children run beside. Keep the returned
    /// `Arc` alive as long as the dispatcher is used.
    pub fn attach(&self, dispatcher: Dispatcher) -> Arc<Dispatcher> {
        dispatcher.build_children_with(Arc::clone(&self.factory));
        let d = Arc::new(dispatcher);
        *self.dispatcher_slot.lock().unwrap_or_else(|p| p.into_inner()) = Arc::downgrade(&d);
        d
    }
}

/// Builds the toolset: starts the MCP servers (see [`start_servers`]), reads the extensions, and, when a `runner`
/// drives sub-agents, adds `spawn_agent` at every depth below `subagents.max_depth`. With
/// `remote.nats_url` set, the tools `remote.routes` names run on workers: each is replaced by a
/// remote tool of its pool, and routed tools that only workers host (their MCP servers) are
/// added as the workers announce them.
/// Must run inside an actix system.
///
/// # Errors
/// A one-line reason when a required MCP server does not start, or NATS cannot be reached.
pub async fn build_toolset(config: Arc<Config>, runner: Option<Arc<dyn AgentRunner>>) -> Result<Toolset, String> {
    build_toolset_with(config, runner, ToolsetOptions::default()).await
}

/// What the host can do for its tools.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToolsetOptions {
    /// The host answers `input_required` events (`Dispatcher::answer_input`): MCP servers are
    /// told the client supports elicitation. Off, their questions are never asked.
    pub answers_input: bool,
}

/// As [`build_toolset`], for a host that can do what `options` says.
///
/// # Errors
/// As [`build_toolset`].
pub async fn build_toolset_with(
    config: Arc<Config>,
    runner: Option<Arc<dyn AgentRunner>>,
    options: ToolsetOptions,
) -> Result<Toolset, String> {
    let remote = if config.remote.enabled() {
        Some(RemoteHub::start(&config).await?)
    } else {
        None
    };
    build(config, runner, remote, options).await
}

/// The toolset of a process that runs every tool itself (`toolslot worker`): as
/// [`build_toolset`], with nothing routed away.
///
/// # Errors
/// A one-line reason when a required MCP server does not start.
pub async fn build_local_toolset(config: Arc<Config>) -> Result<Toolset, String> {
    build(config, None, None, ToolsetOptions::default()).await
}

async fn build(
    config: Arc<Config>,
    runner: Option<Arc<dyn AgentRunner>>,
    remote: Option<Arc<RemoteHub>>,
    options: ToolsetOptions,
) -> Result<Toolset, String> {
    let mcp = start_servers(&config, options.answers_input).await?;
    let dispatcher_slot: Arc<Mutex<Weak<Dispatcher>>> = Arc::new(Mutex::new(Weak::new()));
    let factory: Arc<Mutex<Option<RegistryFactory>>> = Arc::new(Mutex::new(None));
    let build = {
        let config = Arc::clone(&config);
        let intake = Arc::clone(&mcp.intake);
        let helpers = mcp.helpers.clone();
        let slot = Arc::clone(&dispatcher_slot);
        let factory_cell = Arc::clone(&factory);
        let remote = remote.clone();
        move |depth: usize| -> Arc<Registry> {
            let b = RegistryBuilder::new(Arc::clone(&config)).extend(toolslot::builtin::enabled(&config));
            let b = toolslot::extension::add_declared(b, &config)
                // A child sees every MCP tool known when it is spawned.
                .extend(intake.tools())
                // Our own tools: their names are reserved like the built-ins'.
                .reserve(helpers.iter().cloned());
            let mut b = match &remote {
                // Routed tools keep their definition (schema, approval) and run on a worker.
                Some(hub) => b.map_tools(|tools| hub.route(tools)).extend(hub.announced_tools()),
                None => b,
            };
            if let Some(runner) = &runner
                && depth < config.subagents.max_depth
            {
                let f = factory_cell.lock().unwrap_or_else(|p| p.into_inner()).clone();
                if let Some(f) = f {
                    b = b.with_tool(Arc::new(SpawnAgent::new(depth, Arc::clone(runner), f, Arc::clone(&slot))));
                }
            }
            Arc::new(b.build())
        }
    };
    let f: RegistryFactory = Arc::new(build);
    *factory.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&f));
    let registry = LiveRegistry::from(f(0));
    mcp.intake.attach(registry.clone());
    if let Some(hub) = &remote {
        hub.attach(registry.clone());
    }
    Ok(Toolset {
        registry,
        notices: mcp.notices,
        mcp: mcp.handles,
        remote,
        dispatcher_slot,
        factory: f,
    })
}
