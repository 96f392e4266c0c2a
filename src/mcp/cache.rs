//! The tools each server listed last time, so an optional server can start on first use.
//!
//! A server's tools must be in the catalog before the model can call them, and the model's
//! call is what should start the server. The last listing, kept on disk, breaks the circle:
//! a server with a listing for its current command or URL is not started until one of its
//! tools is called; when it starts, its fresh listing replaces the kept one and any tool it
//! gained is appended to the catalog.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::config::McpServerConfig;

/// Server listings kept in one folder, one JSON file per server.
#[derive(Debug, Clone)]
pub struct ToolListCache {
    dir: PathBuf,
}

impl ToolListCache {
    /// Listings kept in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn file(&self, cfg: &McpServerConfig) -> PathBuf {
        // Two names that clean alike (`my.srv`, `my_srv`) keep two files.
        self.dir.join(format!(
            "{}-{:08x}.json",
            crate::tool_name::sanitize_tool_name(&cfg.name),
            super::naming::fnv1a(cfg.name.as_bytes())
        ))
    }

    /// The tools `cfg`'s server listed last time; `None` when there is no listing, it cannot
    /// be read, or it was made for another command, environment or URL.
    pub fn load(&self, cfg: &McpServerConfig) -> Option<Vec<Value>> {
        let text = std::fs::read_to_string(self.file(cfg)).ok()?;
        let kept: Value = serde_json::from_str(&text).ok()?;
        if kept.get("fingerprint").and_then(Value::as_str) != Some(fingerprint(cfg).as_str()) {
            return None;
        }
        kept.get("tools")?.as_array().cloned()
    }

    /// Keeps `tools` as `cfg`'s listing (written atomically: a reader never sees half a file).
    ///
    /// # Errors
    /// A one-line reason naming the file.
    pub fn store(&self, cfg: &McpServerConfig, tools: &[Value]) -> Result<(), String> {
        let file = self.file(cfg);
        let body = json!({"server": cfg.name, "fingerprint": fingerprint(cfg), "tools": tools});
        crate::output::write_atomic(&file, body.to_string().as_bytes(), &file.display().to_string())
            .map(|_| ())
            .map_err(|e| e.message)
    }
}

/// What identifies a server's tool set: how it is started or reached. A listing for another
/// command, environment or URL says nothing about this one.
fn fingerprint(cfg: &McpServerConfig) -> String {
    let mut parts: Vec<&str> = vec![cfg.url.as_deref().unwrap_or("")];
    parts.extend(cfg.command.iter().map(String::as_str));
    let env: Vec<String> = cfg.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.extend(env.iter().map(String::as_str));
    format!("{:08x}", super::naming::fnv1a(parts.join("\0").as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(command: &[&str]) -> McpServerConfig {
        serde_json::from_value(json!({"name": "srv", "command": command})).unwrap()
    }

    #[test]
    fn a_listing_is_kept_for_the_same_command_only() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ToolListCache::new(dir.path().join("nested"));
        let a = cfg(&["node", "server.js"]);
        assert_eq!(cache.load(&a), None);
        let tools = vec![json!({"name": "echo", "inputSchema": {"type": "object"}})];
        cache.store(&a, &tools).unwrap();
        assert_eq!(cache.load(&a), Some(tools));
        assert_eq!(cache.load(&cfg(&["node", "other.js"])), None, "another command");
        std::fs::write(cache.file(&a), "{not json").unwrap();
        assert_eq!(cache.load(&a), None, "a damaged file is no listing");
    }

    #[test]
    fn names_that_clean_alike_keep_two_listings() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ToolListCache::new(dir.path());
        let named = |name: &str| -> McpServerConfig { serde_json::from_value(json!({"name": name, "command": ["x"]})).unwrap() };
        let (dot, under) = (named("my.srv"), named("my_srv"));
        cache.store(&dot, &[json!({"name": "a"})]).unwrap();
        cache.store(&under, &[json!({"name": "b"})]).unwrap();
        assert_eq!(cache.load(&dot), Some(vec![json!({"name": "a"})]));
        assert_eq!(cache.load(&under), Some(vec![json!({"name": "b"})]));
    }

    #[test]
    fn an_unwritable_folder_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "").unwrap();
        let err = ToolListCache::new(&blocker).store(&cfg(&["x"]), &[]).unwrap_err();
        assert!(err.contains("srv-") && err.contains(".json"), "{err}");
    }
}
