//! `toolslot catalog`.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::json;
use toolslot::registry::CatalogFormat;

use super::{CliError, recorded_runner, registry_of, with_toolset};

pub fn run(config: Option<&Path>, format: &str, agent_responses: &[PathBuf]) -> Result<(), CliError> {
    let runner = recorded_runner(agent_responses)?;
    let registry = with_toolset(config, runner, async |_cfg, toolset| Ok(registry_of(&toolset)))?;
    let text = if format == "json" {
        let tools: Vec<_> = registry
            .metadata()
            .into_iter()
            .filter_map(|meta| {
                let tool = registry.get(&meta.name)?;
                Some(json!({
                    "name": meta.name,
                    "description": tool.model_description,
                    "input_schema": tool.model_schema,
                    "metadata": meta,
                }))
            })
            .collect();
        serde_json::to_string_pretty(&tools).map_err(|e| CliError::Io(e.to_string()))?
    } else {
        let format: CatalogFormat = format.parse().map_err(CliError::Usage)?;
        registry.catalog().render(format).to_string()
    };
    writeln!(std::io::stdout(), "{text}").map_err(|e| CliError::Io(format!("writing stdout: {e}")))
}
