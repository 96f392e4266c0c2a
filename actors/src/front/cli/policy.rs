//! `toolslot policy explain|check`: what the rules decide for a call, and whether every layer
//! loads.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use toolslot::config::Config;
use toolslot::plan::approval::{Gate, decide, gate};
use toolslot::policy::{Call, Policy};
use toolslot::registry::{Registry, RegistryBuilder};
use toolslot::shell::Runs;
use toolslot::tool::ApprovalRequirement;

use super::CliError;

/// `toolslot policy …`.
#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Print what the rules and the mode decide for one call, as one JSON line.
    Explain {
        /// Config file overlaying the built-in defaults.
        #[arg(long)]
        config: Option<PathBuf>,
        /// The workspace whose project policy applies (default: the current folder).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// The tool's name.
        tool: String,
        /// The call's input, as JSON.
        input: String,
    },
    /// Load every layer and check every rule's examples: exit 0, or 2 with the reason.
    Check {
        /// Config file overlaying the built-in defaults.
        #[arg(long)]
        config: Option<PathBuf>,
        /// The workspace whose project policy is checked (default: the current folder).
        #[arg(long)]
        workspace: Option<PathBuf>,
    },
}

pub fn run(command: PolicyCommand) -> Result<(), CliError> {
    match command {
        PolicyCommand::Explain {
            config,
            workspace,
            tool,
            input,
        } => explain(config.as_deref(), workspace.as_deref(), &tool, &input),
        PolicyCommand::Check { config, workspace } => check(config.as_deref(), workspace.as_deref()),
    }
}

fn load(config: Option<&Path>, workspace: Option<&Path>) -> Result<(Config, PathBuf, Policy), CliError> {
    let cfg = Config::load(config)?;
    let workspace = workspace.map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
    if !workspace.is_dir() {
        return Err(CliError::Usage(format!("--workspace `{}` is not a folder", workspace.display())));
    }
    let policy = Policy::load(&cfg, &workspace).map_err(|e| CliError::Usage(e.to_string()))?;
    Ok((cfg, workspace, policy))
}

fn check(config: Option<&Path>, workspace: Option<&Path>) -> Result<(), CliError> {
    let (cfg, _, policy) = load(config, workspace)?;
    if let Some(why) = policy.forbids(cfg.approval.mode) {
        return Err(CliError::Usage(format!("approval.mode is {:?}, but {why}", cfg.approval.mode)));
    }
    let files: Vec<String> = policy.files().iter().map(|f| f.display().to_string()).collect();
    let not_applied = not_applied(&policy, |_| true);
    let line = json!({"ok": true, "files": files, "rules": policy.rules().len(), "not_applied": not_applied});
    print_line(&line)
}

/// The allow rules of an untrusted project file that `keep` keeps, each with why it was not
/// applied.
fn not_applied(policy: &Policy, keep: impl Fn(&toolslot::policy::Rule) -> bool) -> Vec<Value> {
    let Some(untrusted) = policy.untrusted() else {
        return Vec::new();
    };
    let reason = untrusted.not_applied();
    policy
        .not_applied()
        .iter()
        .filter(|r| keep(r))
        .map(|r| json!({"rule": r.reference(), "reason": reason}))
        .collect()
}

fn explain(config: Option<&Path>, workspace: Option<&Path>, tool: &str, input: &str) -> Result<(), CliError> {
    let (cfg, workspace, policy) = load(config, workspace)?;
    let input: Value = serde_json::from_str(input).map_err(|e| CliError::Usage(format!("the input is not JSON: {e}")))?;
    let cfg = Arc::new(cfg);
    // The tools a call can name without starting anything: built-ins and extensions. Another
    // (an MCP server's) is judged as its approval would be without trusted annotations.
    let registry: Registry = toolslot::extension::add_declared(
        RegistryBuilder::new(Arc::clone(&cfg)).extend(toolslot::builtin::enabled(&cfg)),
        &cfg,
    )
    .build();
    let known = registry.get(tool);
    let requirement = known.map_or(ApprovalRequirement::Required, |t| {
        t.spec.approval_requirement_for_input(&input, cfg.network.policy)
    });
    let key_of = || match known {
        Some(t) => t.spec.approval_key(&input),
        None => format!("{tool}:{}", toolslot::canonical::canonical_json(&input)),
    };
    let verdict = policy.evaluate(&Call::new(tool, &input, &workspace, &key_of));
    let (decided, _) = decide(requirement, cfg.approval.mode, &verdict);
    let script = input.get("command").and_then(Value::as_str).map(toolslot::shell::parse);
    let segments: Vec<Value> = script
        .iter()
        .flat_map(|s| s.all_segments())
        .map(|s| {
            json!({
                "words": s.words,
                "command": s.command(),
                "wrappers": s.wrappers,
                "depth": s.depth,
                "literal": s.literal,
                "unknown": s.runs == Runs::Unknown,
                "opaque": s.opaque,
                "patterns": s.patterns.iter().filter_map(|&i| s.words.get(i)).collect::<Vec<_>>(),
            })
        })
        .collect();
    // Why the words may not say what runs: a rule that restricts only may match such a line.
    let opaque: Vec<String> = script.map(|s| s.opacity()).unwrap_or_default();
    let mut line = json!({
        "decision": word(decided),
        "rule": verdict.rule,
        "mode_decision": word(gate(requirement, cfg.approval.mode)),
        "segments": segments,
        "opaque": opaque,
        "not_applied": not_applied(&policy, |r| r.applies_to(tool)),
    });
    if let Some(reason) = verdict.reason {
        line["reason"] = json!(reason);
    }
    print_line(&line)
}

fn word(g: Gate) -> &'static str {
    match g {
        Gate::Run => "allow",
        Gate::Ask(_) => "ask",
        Gate::Refuse => "deny",
    }
}

fn print_line(line: &Value) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").map_err(|e| CliError::Io(format!("writing stdout: {e}")))
}
