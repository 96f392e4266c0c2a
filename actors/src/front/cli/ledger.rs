//! `toolslot ledger verify FILE`: whether a ledger's keyed chain holds and ends where its sealed
//! head says.

use std::io::Write;
use std::path::PathBuf;

use serde_json::{Value, json};
use toolslot::config::Config;
use toolslot::ledger::{VerifyError, verify};

use super::CliError;

/// `toolslot ledger …`.
#[derive(Debug, clap::Subcommand)]
pub enum LedgerCommand {
    /// Check a session's ledger under toolslot's key (`audit.key_file`) and its sealed head:
    /// exit 0 when every record's MAC and chain hold and it ends where its head says, 1 naming
    /// the first record that does not (or the first one missing), 2 when it cannot be checked,
    /// 3 for a ledger of the unkeyed format, which cannot prove its tail.
    Verify {
        /// Config file overlaying the built-in defaults (for `audit.key_file`).
        #[arg(long)]
        config: Option<PathBuf>,
        /// The ledger (`<audit.ledger_dir>/<session>.jsonl`).
        file: PathBuf,
    },
}

pub fn run(command: LedgerCommand) -> Result<(), CliError> {
    let LedgerCommand::Verify { config, file } = command;
    let cfg = Config::load(config.as_deref())?;
    let mut out = std::io::stdout().lock();
    let mut print = |answer: Value| writeln!(out, "{answer}").map_err(|e| CliError::Io(format!("writing stdout: {e}")));
    match verify(&file, &cfg.audit.key_path()) {
        Ok(v) => {
            let mut answer = json!({"ok": true, "records": v.records, "keyed": true, "closed": v.closed, "session": v.session});
            if v.unsealed > 0 {
                // Written just before a crash: its MAC holds, its head was not yet written.
                answer["unsealed"] = json!(v.unsealed);
            }
            print(answer)
        }
        Err(e @ (VerifyError::Unreadable { .. } | VerifyError::Key { .. } | VerifyError::WrongKey { .. })) => {
            Err(CliError::Io(e.to_string()))
        }
        Err(e @ VerifyError::Unkeyed { records }) => {
            print(json!({"ok": false, "keyed": false, "records": records, "reason": e.to_string()}))?;
            Err(CliError::Unproven(e.to_string()))
        }
        Err(e) => {
            let mut answer = json!({"ok": false, "reason": e.to_string()});
            if let Some(seq) = e.seq() {
                answer["seq"] = json!(seq);
            }
            print(answer)?;
            Err(CliError::Failed(e.to_string()))
        }
    }
}
