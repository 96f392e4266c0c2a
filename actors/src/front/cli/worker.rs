//! `toolslot worker --pool NAME [--slots K] [--config FILE]`: runs a pool's tools for remote
//! dispatchers.

use std::path::PathBuf;
use std::sync::Arc;

use toolslot::config::Config;

use super::CliError;

/// Arguments of `toolslot worker`.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// The pool whose calls this worker takes (a `remote.routes` value).
    #[arg(long)]
    pub pool: String,
    /// Calls run at once (default: `remote.worker_slots`).
    #[arg(long)]
    pub slots: Option<usize>,
    /// Config file overlaying the built-in defaults (its tools, MCP servers and extensions are
    /// the ones this worker hosts).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// Runs the worker until SIGTERM or SIGINT.
///
/// # Errors
/// [`CliError`] for a bad config or pool name, or when NATS cannot be reached.
pub fn run(args: WorkerArgs) -> Result<(), CliError> {
    let cfg = Config::load(args.config.as_deref())?;
    if !cfg.remote.enabled() {
        return Err(CliError::Usage(
            "toolslot worker needs remote.nats_url (the NATS server it takes calls from)".into(),
        ));
    }
    if args.pool.is_empty() || !args.pool.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return Err(CliError::Usage(format!(
            "--pool `{}` must be letters, digits, `_` or `-`",
            args.pool
        )));
    }
    let slots = args.slots.unwrap_or(cfg.remote.worker_slots);
    if slots == 0 {
        return Err(CliError::Usage("--slots must be at least 1".into()));
    }
    let cfg = Arc::new(cfg);
    actix_rt::System::new().block_on(async move {
        let toolset = crate::host::toolset::build_local_toolset(Arc::clone(&cfg))
            .await
            .map_err(CliError::Startup)?;
        for notice in toolset.notices.iter().chain(toolset.registry.current().notices()) {
            tracing::warn!(kind = ?notice.kind, "{}", notice.message);
        }
        let options = crate::sources::remote::WorkerOptions { pool: args.pool, slots };
        crate::sources::remote::run_worker(cfg, toolset.registry.clone(), options)
            .await
            .map_err(|e| CliError::Startup(e.to_string()))
    })
}
