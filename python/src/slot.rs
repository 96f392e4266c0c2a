//! `NativeSlot`: one embedded runtime, its sessions and host tools.

use std::path::PathBuf;

use pyo3::prelude::*;
use serde_json::Value;
use toolslot::config::Config;
use toolslot::registry::CatalogFormat;
use toolslot::stream::Dialect;
use toolslot::tool::Capability;
use toolslot_actors::HostDecision;
use toolslot_actors::front::embed::{Embedded, HostToolDef, OpenOptions};

use crate::errors::{ConfigError, same_process, to_py};
use crate::guard;
use crate::round::NativeRound;

/// The embedded runtime (`toolslot.Slot` holds one).
#[pyclass(module = "toolslot._native", frozen)]
pub struct NativeSlot {
    pub(crate) embedded: Embedded,
    pub(crate) pid: u32,
}

/// Reads a config from a file, or from the JSON text of a dict, written as TOML for the same
/// loader (layers, validation and messages as for `--config`).
fn load_config(path: Option<PathBuf>, json: Option<String>) -> PyResult<Config> {
    let loaded = match (path, json) {
        (Some(_), Some(_)) => return Err(ConfigError::new_err("give a config file or a dict, not both")),
        (Some(path), None) => Config::load(Some(&path)),
        (None, None) => Config::load(None),
        (None, Some(json)) => {
            let value: Value = serde_json::from_str(&json).map_err(|e| ConfigError::new_err(format!("config dict: {e}")))?;
            let text = toml::to_string(&value).map_err(|e| ConfigError::new_err(format!("config dict cannot be TOML: {e}")))?;
            let file = std::env::temp_dir().join(format!("toolslot-config-{}-{}.toml", std::process::id(), unique()));
            std::fs::write(&file, text).map_err(|e| ConfigError::new_err(format!("config dict: cannot write {}: {e}", file.display())))?;
            let loaded = Config::load(Some(&file));
            let _ = std::fs::remove_file(&file);
            // The file was ours; name the dict, not a temporary path, in what is wrong.
            loaded.map_err(|e| toolslot::config::ConfigError::File {
                path: PathBuf::from("<config dict>"),
                reason: match e {
                    toolslot::config::ConfigError::File { reason, .. } => reason,
                    other => other.to_string(),
                },
            })
        }
    };
    loaded.map_err(|e| ConfigError::new_err(e.to_string()))
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn dialect(d: Option<&str>) -> PyResult<Option<Dialect>> {
    match d {
        None | Some("auto") => Ok(None),
        Some(d) => d.parse::<Dialect>().map(Some).map_err(ConfigError::new_err),
    }
}

/// A host tool from what `@slot.tool` read off the function.
fn tool_def(name: String, description: String, schema_json: &str, capabilities: Vec<String>) -> PyResult<HostToolDef> {
    let input_schema: Value = serde_json::from_str(schema_json).map_err(|e| ConfigError::new_err(format!("tool `{name}`: schema: {e}")))?;
    let capabilities = capabilities
        .iter()
        .map(|c| {
            c.parse::<Capability>()
                .map_err(|e| ConfigError::new_err(format!("tool `{name}`: {e}")))
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(HostToolDef {
        name,
        description,
        input_schema,
        capabilities,
    })
}

fn decision(d: &str) -> PyResult<HostDecision> {
    match d {
        "approve" => Ok(HostDecision::Approve),
        "approve_for_session" => Ok(HostDecision::ApproveForSession),
        "approve_for_project" => Ok(HostDecision::ApproveForProject),
        "reject" => Ok(HostDecision::Reject),
        "reject_for_session" => Ok(HostDecision::RejectForSession),
        other => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "unknown decision `{other}` (expected approve, approve_for_session, approve_for_project, reject or reject_for_session)"
        ))),
    }
}

#[pymethods]
impl NativeSlot {
    /// Starts the runtime with the config file at `path`, or the dict given as JSON text.
    #[new]
    #[pyo3(signature = (path=None, config_json=None))]
    fn new(py: Python<'_>, path: Option<PathBuf>, config_json: Option<String>) -> PyResult<Self> {
        guard(|| {
            let config = load_config(path, config_json)?;
            let embedded = py.detach(|| Embedded::start(config, Vec::new())).map_err(to_py)?;
            Ok(NativeSlot {
                embedded,
                pid: std::process::id(),
            })
        })
    }

    /// Opens a session; returns its id.
    #[pyo3(signature = (workspace=None, approval_mode=None, dialect=None))]
    fn open_session(
        &self,
        py: Python<'_>,
        workspace: Option<PathBuf>,
        approval_mode: Option<String>,
        dialect: Option<String>,
    ) -> PyResult<String> {
        guard(|| {
            same_process(self.pid)?;
            let options = OpenOptions {
                workspace,
                approval_mode,
                dialect: self::dialect(dialect.as_deref())?,
            };
            py.detach(|| self.embedded.open_session(options)).map_err(to_py)
        })
    }

    /// The catalog as JSON text: the session's when one is named, else the registry's.
    #[pyo3(signature = (format="anthropic", session=None))]
    fn catalog(&self, py: Python<'_>, format: &str, session: Option<String>) -> PyResult<String> {
        guard(|| {
            same_process(self.pid)?;
            let format: CatalogFormat = format.parse().map_err(ConfigError::new_err)?;
            py.detach(|| self.embedded.catalog(session.as_deref(), format)).map_err(to_py)
        })
    }

    /// Every tool's metadata as JSON text (name, capabilities, `static_approval`, …).
    fn metadata(&self, py: Python<'_>) -> PyResult<String> {
        guard(|| {
            same_process(self.pid)?;
            py.detach(|| self.embedded.metadata()).map_err(to_py)
        })
    }

    /// The config's approval mode (`read-only`, `ask`, `auto-edit`, `full-auto`).
    fn default_mode(&self) -> PyResult<String> {
        guard(|| {
            let mode = serde_json::to_value(self.embedded.config().approval.mode).map_err(|e| ConfigError::new_err(e.to_string()))?;
            Ok(mode.as_str().unwrap_or("ask").to_string())
        })
    }

    /// Adds a host tool to the registry.
    fn add_tool(&self, py: Python<'_>, name: String, description: String, schema_json: &str, capabilities: Vec<String>) -> PyResult<()> {
        guard(|| {
            same_process(self.pid)?;
            let def = tool_def(name, description, schema_json, capabilities)?;
            py.detach(|| self.embedded.add_tools(vec![def])).map_err(to_py)
        })
    }

    /// Starts a round of `session`.
    #[pyo3(signature = (session, dialect=None))]
    fn submit(&self, py: Python<'_>, session: &str, dialect: Option<String>) -> PyResult<NativeRound> {
        guard(|| {
            same_process(self.pid)?;
            let d = self::dialect(dialect.as_deref())?;
            let submission = py.detach(|| self.embedded.submit(session, d)).map_err(to_py)?;
            Ok(NativeRound::new(submission, self.pid))
        })
    }

    /// Answers an approval request.
    #[pyo3(signature = (session, index, decision, request=None))]
    fn answer(&self, py: Python<'_>, session: &str, index: usize, decision: &str, request: Option<u64>) -> PyResult<()> {
        guard(|| {
            same_process(self.pid)?;
            let d = self::decision(decision)?;
            py.detach(|| self.embedded.answer(session, index, request, d)).map_err(to_py)
        })
    }

    /// Cancels the session's running round (one its caller stopped reading): waiting approvals
    /// are rejected, running calls stopped, and the round completes.
    fn cancel_round(&self, py: Python<'_>, session: &str) -> PyResult<()> {
        guard(|| {
            same_process(self.pid)?;
            py.detach(|| self.embedded.cancel_round(session)).map_err(to_py)
        })
    }

    /// Closes a session.
    fn close_session(&self, py: Python<'_>, session: &str) -> PyResult<()> {
        guard(|| {
            same_process(self.pid)?;
            py.detach(|| self.embedded.close_session(session)).map_err(to_py)
        })
    }

    /// Stops the runtime and waits for it.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        guard(|| {
            if std::process::id() != self.pid {
                // The child has no runtime thread to stop; nothing to wait for.
                return Ok(());
            }
            py.detach(|| self.embedded.close());
            Ok(())
        })
    }
}
