//! `toolslot ledger verify FILE`: whether a ledger's hash chain holds.

use std::io::Write;
use std::path::PathBuf;

use serde_json::json;
use toolslot::ledger::{VerifyError, verify};

use super::CliError;

/// `toolslot ledger …`.
#[derive(Debug, clap::Subcommand)]
pub enum LedgerCommand {
    /// Check a session's ledger: exit 0 when every record's chain holds, 1 naming the first
    /// record (`seq`) that does not.
    Verify {
        /// The ledger (`<audit.ledger_dir>/<session>.jsonl`).
        file: PathBuf,
    },
}

pub fn run(command: LedgerCommand) -> Result<(), CliError> {
    let LedgerCommand::Verify { file } = command;
    let mut out = std::io::stdout().lock();
    let io = |e: std::io::Error| CliError::Io(format!("writing stdout: {e}"));
    match verify(&file) {
        Ok(records) => writeln!(out, "{}", json!({"ok": true, "records": records})).map_err(io),
        Err(VerifyError::Unreadable { path, reason }) => Err(CliError::Io(format!("cannot read `{path}`: {reason}"))),
        Err(e @ VerifyError::Broken { seq, .. }) => {
            writeln!(out, "{}", json!({"ok": false, "seq": seq, "reason": e.to_string()})).map_err(io)?;
            Err(CliError::Failed(e.to_string()))
        }
    }
}
