//! Command-line parsing and the subcommands.

mod catalog;
mod ledger;
mod mcp;
mod mcp_check;
mod policy;
mod replay;
mod search;
mod trust;
mod worker;

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use toolslot::config::Config;
use toolslot::registry::Registry;

/// Governs an LLM agent's tool calls.
#[derive(Debug, Parser)]
#[command(name = "toolslot", version, about)]
pub struct Cli {
    /// Log format on stderr (filter with RUST_LOG).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// How logs are written.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object a line.
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the standalone actor system with its HTTP API and approval console.
    Serve {
        /// Config file overlaying the built-in defaults.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Offer spawn_agent, its children answered by these recorded responses in turn.
        #[arg(long = "agent-response", value_name = "FILE")]
        agent_responses: Vec<PathBuf>,
    },
    /// Feed recorded model responses through the full pipeline and print each event.
    Replay(replay::ReplayArgs),
    /// Serve the session's governed tools to an MCP client on stdin and stdout.
    Mcp(mcp::McpArgs),
    /// Print the model-facing tool catalog.
    Catalog {
        /// Config file overlaying the built-in defaults.
        #[arg(long)]
        config: Option<PathBuf>,
        /// anthropic | openai (model-facing) or json (every tool with its metadata).
        #[arg(long, default_value = "anthropic")]
        format: String,
        /// Offer spawn_agent, its children answered by these recorded responses in turn.
        #[arg(long = "agent-response", value_name = "FILE")]
        agent_responses: Vec<PathBuf>,
    },
    /// Connect to one MCP server as toolslot would: list its tools, optionally call each.
    McpCheck(mcp_check::McpCheckArgs),
    /// Explain what the policy decides for a call, or check that every layer loads.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// Trust a project's policy file, so that its allow rules apply (deny and ask rules
    /// always do); list or revoke trusted files.
    Trust(trust::TrustArgs),
    /// Verify a session's ledger of decisions.
    #[command(subcommand)]
    Ledger(ledger::LedgerCommand),
    /// Run a pool's tools for dispatchers that route calls to it over NATS JetStream.
    Worker(worker::WorkerArgs),
    /// Rank deferred tools for a query, as tool_search does.
    Search {
        /// Config file overlaying the built-in defaults.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Number of matches.
        #[arg(long)]
        top: Option<usize>,
        /// text | json.
        #[arg(long, default_value = "text")]
        format: String,
        /// The query, or `-` to read one query a line from stdin.
        query: String,
    },
}

/// Sets up `tracing` on stderr, filtered by RUST_LOG (default: warnings), and OpenTelemetry
/// export where `[telemetry]` (or `OTEL_EXPORTER_OTLP_ENDPOINT`) asks for it. Export runs
/// until the returned value is dropped, which sends what is left.
pub fn init_tracing(args: &Cli) -> Option<crate::front::telemetry::Telemetry> {
    use crate::front::telemetry::{LogStyle, subscriber};
    // The NATS client logs, as errors, what toolslot reports itself in one line (a refused
    // login, a lost connection; see `sources::remote::broker`): quiet unless RUST_LOG asks.
    const DEFAULT: &str = "warn,async_nats=off";
    use std::io::IsTerminal;
    let style = match args.log_format {
        LogFormat::Text => LogStyle::Text {
            ansi: std::io::stderr().is_terminal(),
        },
        LogFormat::Json => LogStyle::Json,
    };
    // The subcommand loads its configuration again and reports a broken one; until then
    // there is nothing to export to.
    let telemetry = Config::load(config_of(&args.command)).ok().and_then(|cfg| {
        crate::front::telemetry::Telemetry::start(&cfg.telemetry).unwrap_or_else(|e| {
            eprintln!("toolslot: {e}");
            None
        })
    });
    // The filter is the log's own: the exporter keeps its spans whatever RUST_LOG says.
    let directives = std::env::var("RUST_LOG").ok().filter(|d| !d.trim().is_empty());
    let built = subscriber(style, std::io::stderr, directives.as_deref().unwrap_or(DEFAULT), telemetry.as_ref()).or_else(|e| {
        eprintln!("toolslot: RUST_LOG ignored: {e}");
        subscriber(style, std::io::stderr, DEFAULT, telemetry.as_ref())
    });
    if let Ok(s) = built {
        let _ = tracing::subscriber::set_global_default(s);
    }
    for note in telemetry.iter().flat_map(|t| t.notes()) {
        tracing::warn!("telemetry: {note}");
    }
    telemetry
}

/// The `--config` file a subcommand was given.
fn config_of(command: &Command) -> Option<&std::path::Path> {
    match command {
        Command::Serve { config, .. } | Command::Catalog { config, .. } | Command::Search { config, .. } => config.as_deref(),
        Command::Replay(a) => a.config.as_deref(),
        Command::Mcp(a) => a.config.as_deref(),
        Command::McpCheck(a) => a.config.as_deref(),
        Command::Worker(a) => a.config.as_deref(),
        Command::Policy(_) | Command::Trust(_) | Command::Ledger(_) => None,
    }
}

/// A failure the binary reports as one line and exit status 2.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The configuration did not load.
    #[error(transparent)]
    Config(#[from] toolslot::config::ConfigError),
    /// An argument is unusable.
    #[error("{0}")]
    Usage(String),
    /// Reading input or writing output failed.
    #[error("{0}")]
    Io(String),
    /// A required part did not start (a required MCP server).
    #[error("{0}")]
    Startup(String),
    /// Whoever read our output went away (`| head`): not an error of ours.
    #[error("broken pipe")]
    BrokenPipe,
    /// A check ran and found a fault (a ledger whose chain breaks): exit status 1.
    #[error("{0}")]
    Failed(String),
    /// A check ran and found nothing wrong, but what it checked cannot prove itself (a ledger
    /// of the unkeyed format): exit status 3.
    #[error("{0}")]
    Unproven(String),
}

impl CliError {
    /// The exit status: 1 for a check that found a fault, 3 for one that could not prove
    /// anything, 2 for anything unusable.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Failed(_) => 1,
            CliError::Unproven(_) => 3,
            _ => 2,
        }
    }
}

/// Runs the chosen subcommand.
pub fn run(args: Cli) -> Result<(), CliError> {
    match args.command {
        Command::Serve { config, agent_responses } => serve(config.as_deref(), &agent_responses),
        Command::Replay(args) => replay::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::McpCheck(args) => mcp_check::run(args),
        Command::Policy(command) => policy::run(command),
        Command::Trust(args) => trust::run(args),
        Command::Ledger(command) => ledger::run(command),
        Command::Worker(args) => worker::run(args),
        Command::Catalog {
            config,
            format,
            agent_responses,
        } => catalog::run(config.as_deref(), &format, &agent_responses),
        Command::Search {
            config,
            top,
            format,
            query,
        } => search::run(config.as_deref(), top, &format, &query),
    }
}

/// The sub-agent runner of `--agent-response` files, if any were given.
///
/// # Errors
/// [`CliError::Io`] naming a file that cannot be read.
pub fn recorded_runner(files: &[PathBuf]) -> Result<Option<Arc<dyn crate::host::subagent::AgentRunner>>, CliError> {
    if files.is_empty() {
        return Ok(None);
    }
    let runner = crate::host::subagent::RecordedRunner::from_files(files).map_err(CliError::Io)?;
    Ok(Some(Arc::new(runner)))
}

/// Loads the config, starts an actor system, builds the toolset (built-ins, extensions, MCP
/// servers, and spawn_agent when a `runner` is given) and runs `f` with it inside the system.
pub fn with_toolset<T>(
    config: Option<&std::path::Path>,
    runner: Option<Arc<dyn crate::host::subagent::AgentRunner>>,
    f: impl AsyncFnOnce(Arc<Config>, crate::host::toolset::Toolset) -> Result<T, CliError>,
) -> Result<T, CliError> {
    let cfg = Arc::new(Config::load(config)?);
    actix_rt::System::new().block_on(async move {
        let toolset = crate::host::toolset::build_toolset(Arc::clone(&cfg), runner)
            .await
            .map_err(CliError::Startup)?;
        for notice in toolset.notices.iter().chain(toolset.registry.current().notices()) {
            tracing::warn!(kind = ?notice.kind, "{}", notice.message);
        }
        let remote = toolset.remote.clone();
        let servers = toolset.mcp.clone();
        let result = f(cfg, toolset).await;
        if let Some(hub) = remote {
            // Calls given up at the end (a timeout, a cancel) are settled with their workers
            // before the process goes.
            hub.drain(std::time::Duration::from_secs(5)).await;
        }
        // No server process outlives the command, whatever it does with stdin's end.
        crate::host::toolset::shutdown_servers(&servers).await;
        result
    })
}

fn serve(config: Option<&std::path::Path>, agent_responses: &[PathBuf]) -> Result<(), CliError> {
    let runner = recorded_runner(agent_responses)?;
    let mut cfg = Config::load(config)?;
    if cfg.execution.workers == 0 {
        // A server's sessions should use every core (see `execution.workers`).
        cfg.execution.workers = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    }
    crate::front::server::check_bind(&cfg.server).map_err(CliError::Usage)?;
    let root = &cfg.server.workspace_root;
    if !root.is_empty() && !toolslot::config::expand_home(root).is_dir() {
        return Err(CliError::Usage(format!("server.workspace_root `{root}` is not a folder")));
    }
    let cfg = Arc::new(cfg);
    actix_rt::System::new().block_on(async move {
        // The server's clients answer input requests (the inputs endpoint, the console).
        let options = crate::host::toolset::ToolsetOptions { answers_input: true };
        let toolset = crate::host::toolset::build_toolset_with(Arc::clone(&cfg), runner, options)
            .await
            .map_err(CliError::Startup)?;
        for notice in toolset.notices.iter().chain(toolset.registry.current().notices()) {
            tracing::warn!(kind = ?notice.kind, "{}", notice.message);
        }
        let dispatcher =
            toolset.attach(crate::host::dispatcher::Dispatcher::new(Arc::clone(&cfg), toolset.registry.clone()).answering_inputs());
        if let Some(hub) = &toolset.remote {
            // With NATS, sessions outlive this process: their state is kept in JetStream KV.
            let store = crate::sources::remote::SessionStore::open(hub.broker(), &cfg.remote)
                .await
                .map_err(|e| CliError::Startup(e.to_string()))?;
            dispatcher.keep_sessions_in(store);
        }
        let served = crate::front::server::serve(cfg, dispatcher, toolset.mcp.clone())
            .await
            .map_err(|e| CliError::Io(format!("server: {e}")));
        if let Some(hub) = &toolset.remote {
            hub.drain(std::time::Duration::from_secs(5)).await;
        }
        crate::host::toolset::shutdown_servers(&toolset.mcp).await;
        served
    })
}

/// The registry of a finished toolset (for subcommands that only read it).
pub fn registry_of(toolset: &crate::host::toolset::Toolset) -> Arc<Registry> {
    toolset.registry.current()
}
