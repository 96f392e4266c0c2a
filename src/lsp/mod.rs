//! Language servers' part in a result: which server handles a file, the documents a client
//! keeps in sync with it, and the diagnostics text appended to an edit's result.
//!
//! The conversation with a server (a process, JSON-RPC, restarts) lives in the actors crate;
//! everything here is a plain function or plain data, so the rules (which diagnostics belong
//! to which edit, what the model reads) are tested without a server.

mod documents;
mod format;

use std::path::Path;

pub use documents::{Documents, Expect, Fresh, Published, SyncKind};
pub use format::{DiagnosticsNote, format_diagnostics, format_note};
pub use lsp_types;

use crate::config::LspServerConfig;

/// The first configured server that handles `path`'s extension (case-insensitive, given with
/// or without the dot).
pub fn server_for<'a>(servers: &'a [LspServerConfig], path: &Path) -> Option<&'a LspServerConfig> {
    let ext = path.extension()?.to_str()?;
    servers
        .iter()
        .find(|s| s.extensions.iter().any(|e| e.trim_start_matches('.').eq_ignore_ascii_case(ext)))
}

/// The LSP language id of `path` for `server`: the configured one, else the usual id of its
/// extension, else the extension itself (servers that handle one language ignore it).
pub fn language_id(server: &LspServerConfig, path: &Path) -> String {
    if let Some(id) = &server.language_id {
        return id.clone();
    }
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    let id = match ext.as_str() {
        "py" | "pyi" | "pyw" => "python",
        "ts" | "mts" | "cts" => "typescript",
        "tsx" => "typescriptreact",
        "js" | "mjs" | "cjs" => "javascript",
        "jsx" => "javascriptreact",
        "rs" => "rust",
        "go" => "go",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" => "cpp",
        "java" => "java",
        "rb" => "ruby",
        "sh" | "bash" => "shellscript",
        "md" => "markdown",
        "json" => "json",
        "yaml" | "yml" => "yaml",
        "toml" => "toml",
        other => other,
    };
    id.to_string()
}

/// The `file://` URI of an absolute path, as servers name documents.
pub fn file_uri(path: &Path) -> Option<lsp_types::Url> {
    lsp_types::Url::from_file_path(path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(exts: &[&str]) -> LspServerConfig {
        LspServerConfig {
            name: "s".into(),
            command: vec!["x".into()],
            extensions: exts.iter().map(|e| e.to_string()).collect(),
            language_id: None,
            env: Default::default(),
        }
    }

    #[test]
    fn servers_are_chosen_by_extension() {
        let servers = vec![server(&["py", ".pyi"]), server(&["TS"])];
        assert!(std::ptr::eq(server_for(&servers, Path::new("/w/a.py")).unwrap(), &servers[0]));
        assert!(std::ptr::eq(server_for(&servers, Path::new("/w/a.PYI")).unwrap(), &servers[0]));
        assert!(std::ptr::eq(server_for(&servers, Path::new("/w/b.ts")).unwrap(), &servers[1]));
        assert!(server_for(&servers, Path::new("/w/Makefile")).is_none());
        assert!(server_for(&servers, Path::new("/w/a.rs")).is_none());
    }

    #[test]
    fn language_ids() {
        let s = server(&["py"]);
        assert_eq!(language_id(&s, Path::new("a.py")), "python");
        assert_eq!(language_id(&s, Path::new("a.tsx")), "typescriptreact");
        assert_eq!(language_id(&s, Path::new("a.zig")), "zig");
        let fixed = LspServerConfig {
            language_id: Some("django-html".into()),
            ..s
        };
        assert_eq!(language_id(&fixed, Path::new("a.html")), "django-html");
    }
}
