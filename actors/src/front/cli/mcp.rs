//! `toolslot mcp`: toolslot as an MCP server on stdio, one session for the connection.
//!
//! A desktop client starts it from its configuration
//! (`"command": "toolslot", "args": ["mcp", "--workspace", "/path/to/project"]`) and talks
//! MCP on its stdin and stdout; logs go to stderr. It builds the same toolset as `replay` and
//! `serve` (built-ins, extensions, MCP servers, sub-agents), opens one session on a dispatcher
//! over it, and serves until the client closes stdin (or its end of stdout: it has gone); then
//! the session is closed (its ledger sealed) and every MCP server it started is stopped.

use std::path::PathBuf;
use std::sync::Arc;

use toolslot::config::Config;

use super::CliError;
use crate::front::mcp_server::{McpFront, serve_stdio, stdout_closed};
use crate::host::dispatcher::Dispatcher;
use crate::pipeline::session::SessionOptions;

/// Options of `mcp`.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// Config file overlaying the built-in defaults.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Workspace root of the session's tools.
    #[arg(long)]
    pub workspace: PathBuf,
    /// Offer spawn_agent, its children answered by these recorded responses in turn.
    #[arg(long = "agent-response", value_name = "FILE")]
    pub agent_responses: Vec<PathBuf>,
}

/// Runs the MCP server until the client goes.
///
/// # Errors
/// [`CliError::Usage`] for a workspace that is not a folder, a policy that does not load or a
/// mode it forbids; [`CliError::Startup`] when a required MCP server does not start;
/// [`CliError::Io`] when the MCP session fails.
pub fn run(args: McpArgs) -> Result<(), CliError> {
    let cfg = Arc::new(Config::load(args.config.as_deref())?);
    let workspace = args.workspace;
    if !workspace.is_dir() {
        return Err(CliError::Usage(format!("--workspace `{}` is not a folder", workspace.display())));
    }
    // A session does not start under a policy that does not load, or a mode it forbids.
    let policy = Arc::new(toolslot::policy::Policy::load(&cfg, &workspace).map_err(|e| CliError::Usage(e.to_string()))?);
    if let Some(why) = policy.forbids(cfg.approval.mode) {
        return Err(CliError::Usage(why));
    }
    let runner = super::recorded_runner(&args.agent_responses)?;
    actix_rt::System::new().block_on(async move {
        let toolset = crate::host::toolset::build_toolset(Arc::clone(&cfg), runner)
            .await
            .map_err(CliError::Startup)?;
        for notice in toolset.notices.iter().chain(toolset.registry.current().notices()) {
            tracing::warn!(kind = ?notice.kind, "{}", notice.message);
        }
        let dispatcher = toolset.attach(Dispatcher::new(Arc::clone(&cfg), toolset.registry.clone()));
        let session = dispatcher.open_session(SessionOptions {
            workspace: Some(workspace),
            approval_mode: None,
            dialect: None,
            policy: Some(Arc::clone(&policy)),
        });
        let front = serve_stdio(McpFront::new(Arc::clone(&dispatcher), session.clone(), policy));
        tokio::pin!(front);
        // A client that closed its end of stdout is gone: its session (and the call it may
        // be running) ends now, not when rmcp has waited for that call's answer.
        let mut sealing = None;
        let served = tokio::select! {
            served = &mut front => served,
            () = stdout_closed() => {
                tracing::info!("the MCP client closed stdout: its session is closed and a running call cancelled");
                sealing = dispatcher.close_session(&session).ok();
                front.await
            }
        };
        // The ledger's closing record is on disk before the process goes; a call still
        // running is cancelled with the session.
        if let Some(sealing) = sealing.or_else(|| dispatcher.close_session(&session).ok())
            && let Err(e) = sealing.wait().await
        {
            tracing::error!("the ledger's closing record was not written: {e}");
        }
        if let Some(hub) = &toolset.remote {
            hub.drain(std::time::Duration::from_secs(5)).await;
        }
        crate::host::toolset::shutdown_servers(&toolset.mcp).await;
        served.map_err(CliError::Io)
    })
}
