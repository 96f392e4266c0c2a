//! Command-line parsing and the subcommands.

mod catalog;
mod replay;
mod search;

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use toolslot::config::Config;
use toolslot::registry::{Registry, RegistryBuilder};

/// Governs an LLM agent's tool calls.
#[derive(Debug, Parser)]
#[command(name = "toolslot", version, about)]
pub struct Cli {
    /// Log format on stderr (filter with RUST_LOG).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
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
    /// Feed recorded model responses through the full pipeline and print each event.
    Replay {
        /// Config file overlaying the built-in defaults.
        #[arg(long)]
        config: Option<PathBuf>,
        /// auto | anthropic | openai-chat | openai-responses | gemini.
        #[arg(long, default_value = "auto")]
        dialect: String,
        /// Workspace root for file tools (default: the current folder).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// Answer every approval request: all (approve) or none (reject).
        #[arg(long)]
        approve: Option<String>,
        /// jsonl (default when stdout is not a terminal) or pretty.
        #[arg(long)]
        format: Option<String>,
        /// Recorded responses, one round (or several messages) each; `-` reads stdin.
        #[arg(required = true)]
        files: Vec<String>,
    },
    /// Print the model-facing tool catalog.
    Catalog {
        /// Config file overlaying the built-in defaults.
        #[arg(long)]
        config: Option<PathBuf>,
        /// anthropic | openai (model-facing) or json (every tool with its metadata).
        #[arg(long, default_value = "anthropic")]
        format: String,
    },
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

/// Sets up `tracing` on stderr, filtered by RUST_LOG (default: warnings).
pub fn init_tracing(args: &Cli) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
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
    /// Whoever read our output went away (`| head`): not an error of ours.
    #[error("broken pipe")]
    BrokenPipe,
}

/// Runs the chosen subcommand.
pub fn run(args: Cli) -> Result<(), CliError> {
    match args.command {
        Command::Replay {
            config,
            dialect,
            workspace,
            approve,
            format,
            files,
        } => replay::run(replay::ReplayArgs {
            config,
            dialect,
            workspace,
            approve,
            format,
            files,
        }),
        Command::Catalog { config, format } => catalog::run(config.as_deref(), &format),
        Command::Search {
            config,
            top,
            format,
            query,
        } => search::run(config.as_deref(), top, &format, &query),
    }
}

/// Loads the config and builds the registry every subcommand uses.
pub fn load(config: Option<&std::path::Path>) -> Result<(Arc<Config>, Arc<Registry>), CliError> {
    let cfg = Arc::new(Config::load(config)?);
    let registry = Arc::new(RegistryBuilder::new(Arc::clone(&cfg)).with_builtins().build());
    for notice in registry.notices() {
        tracing::warn!(kind = ?notice.kind, "{}", notice.message);
    }
    Ok((cfg, registry))
}
