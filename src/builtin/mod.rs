//! The built-in tools, each a plain `ToolSpec` in its own file.
//!
//! Every file tool is confined to the session's workspace ([`workspace::confine`]), and the write
//! tools refuse the files that steer what runs next ([`protected::check`]); limits
//! come from the config, never from constants here.

pub mod address_policy;
pub mod background;
mod blocking;
mod edit_file;
mod exec_shell;
mod fetch_url;
mod grep_files;
mod html_text;
mod list_dir;
pub mod protected;
mod read_file;
mod retrieve_tool_result;
mod shell_process;
mod tool_search;
pub mod workspace;
mod write_beneath;
mod write_file;

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::tool::{ToolError, ToolSpec};

pub use edit_file::EditFile;
pub use exec_shell::ExecShell;
pub use fetch_url::{FetchUrl, Resolve, SystemResolver};
pub use grep_files::GrepFiles;
pub use html_text::html_to_text;
pub use list_dir::ListDir;
pub use read_file::ReadFile;
pub use retrieve_tool_result::RetrieveToolResult;
pub use tool_search::ToolSearch;
pub use write_file::WriteFile;

/// The built-in tools the config leaves enabled (all but those named in `tools.disable`), in
/// [`all`]'s order: what a host hands its `RegistryBuilder`.
pub fn enabled(config: &crate::config::Config) -> Vec<Arc<dyn ToolSpec>> {
    all(config)
        .into_iter()
        .filter(|t| !config.tools.disable.iter().any(|d| d == t.name()))
        .collect()
}

/// Every built-in tool, in a fixed order, under `config`'s sandbox.
pub fn all(config: &crate::config::Config) -> Vec<Arc<dyn ToolSpec>> {
    vec![
        Arc::new(ReadFile),
        Arc::new(ListDir),
        Arc::new(GrepFiles),
        Arc::new(WriteFile),
        Arc::new(EditFile),
        Arc::new(ExecShell::new(config)),
        Arc::new(background::ShellOutput),
        Arc::new(background::KillShell),
        Arc::new(FetchUrl::default()),
        Arc::new(RetrieveToolResult),
        Arc::new(ToolSearch),
    ]
}

/// Deserializes a tool's input; the error names the field serde complained about.
pub(crate) fn parse_input<T: DeserializeOwned>(input: Value) -> Result<T, ToolError> {
    serde_path_to_error::deserialize(input).map_err(|e| {
        let path = e.path().to_string();
        let msg = e.inner().to_string();
        // A missing or unknown field is named in serde's message, not in the path (which is
        // where it was looked for: the top).
        let field = if path == "." {
            msg.split('`').nth(1).unwrap_or("").to_string()
        } else {
            path
        };
        let at = if field.is_empty() || msg.contains(&format!("`{field}`")) {
            String::new()
        } else {
            format!("`{field}`: ")
        };
        ToolError::invalid(field, format!("invalid arguments: {at}{msg}"))
    })
}

#[cfg(test)]
#[path = "builtin_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "hidden_tests.rs"]
mod hidden_tests;
