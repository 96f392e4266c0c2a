//! `toolslot trust [DIR]`: lets a project's policy file loosen what is asked.
//!
//! A project's `.toolslot/policy.toml` may always restrict; its allow rules apply only once the
//! user has trusted its exact content, recorded by this command in `policy.trust_file`
//! (outside every workspace). `--list` shows what is trusted, `--revoke` forgets a file.

use std::io::Write;
use std::path::PathBuf;

use serde_json::{Value, json};
use toolslot::config::Config;
use toolslot::project_policy::{revoke_project, trust_project, trusted_projects};

use super::CliError;

/// `toolslot trust …`.
#[derive(Debug, clap::Args)]
pub struct TrustArgs {
    /// Config file overlaying the built-in defaults (its `policy.trust_file` is the store).
    #[arg(long)]
    config: Option<PathBuf>,
    /// List the trusted files, each with whether it still has the content that was trusted.
    #[arg(long, conflicts_with_all = ["revoke", "dir"])]
    list: bool,
    /// Forget DIR's policy file: its allow rules stop applying.
    #[arg(long)]
    revoke: bool,
    /// The workspace whose `.toolslot/policy.toml` is trusted (default: the current folder).
    dir: Option<PathBuf>,
}

/// Runs `toolslot trust`, printing one JSON line.
pub fn run(args: TrustArgs) -> Result<(), CliError> {
    let cfg = Config::load(args.config.as_deref())?;
    let dir = args.dir.unwrap_or_else(|| PathBuf::from("."));
    let fail = |e: toolslot::policy::TrustError| CliError::Usage(e.to_string());
    let line = if args.list {
        let files = trusted_projects(&cfg.policy).map_err(fail)?;
        json!({ "trusted": files })
    } else if args.revoke {
        let (file, was) = revoke_project(&cfg.policy, &dir).map_err(fail)?;
        json!({ "revoked": file, "was_trusted": was })
    } else {
        let trusted = trust_project(&cfg.policy, &dir).map_err(fail)?;
        json!({ "trusted": trusted.file, "sha256": trusted.sha256 })
    };
    print_line(&line)
}

fn print_line(line: &Value) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").map_err(|e| CliError::Io(format!("writing stdout: {e}")))
}
