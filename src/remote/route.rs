//! Which pool of workers runs a tool, and which worker a call must reach.

use std::collections::BTreeMap;

use serde_json::Value;

/// `remote.routes`: tool-name globs → pool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routes {
    /// Exact names first, then globs, longest first: the most specific route wins.
    ordered: Vec<(String, String)>,
}

impl Routes {
    /// Routes from the config table.
    pub fn new(table: &BTreeMap<String, String>) -> Self {
        let mut ordered: Vec<(String, String)> = table.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        // Exact names before globs; among globs the longer (more specific) pattern first; the
        // name itself breaks ties so that the order never depends on the table's.
        ordered.sort_by(|(a, _), (b, _)| {
            (a.contains('*'), std::cmp::Reverse(a.len()), a.as_str()).cmp(&(b.contains('*'), std::cmp::Reverse(b.len()), b.as_str()))
        });
        Self { ordered }
    }

    /// The pool that runs `tool`, if it is routed.
    pub fn pool_of(&self, tool: &str) -> Option<&str> {
        self.ordered
            .iter()
            .find(|(pattern, _)| crate::child_env::glob(pattern, tool))
            .map(|(_, pool)| pool.as_str())
    }

    /// Whether any route sends a tool to `pool`.
    pub fn names_pool(&self, pool: &str) -> bool {
        self.ordered.iter().any(|(_, p)| p == pool)
    }

    /// Whether nothing is routed.
    pub fn is_empty(&self) -> bool {
        self.ordered.is_empty()
    }
}

/// Which worker a call must reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Affinity {
    /// Any worker of the pool.
    Any,
    /// The worker that holds the session's background tasks, when it is alive (a new task
    /// joins the others, so that task ids stay unique in the session); any worker otherwise.
    PreferTaskOwner,
    /// Only the worker that holds the session's background tasks: they live in its memory.
    TaskOwner,
}

/// The affinity of a call: background shell tasks stay on the worker that started them.
pub fn affinity(tool: &str, input: &Value) -> Affinity {
    match tool {
        "exec_shell" if input.get("background").and_then(Value::as_bool) == Some(true) => Affinity::PreferTaskOwner,
        "shell_output" | "kill_shell" => Affinity::TaskOwner,
        _ => Affinity::Any,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes(pairs: &[(&str, &str)]) -> Routes {
        Routes::new(&pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect())
    }

    #[test]
    fn the_most_specific_route_wins() {
        let r = routes(&[("git__*", "mcp"), ("git__push", "guarded"), ("*", "all"), ("exec_shell", "shell")]);
        assert_eq!(r.pool_of("git__status"), Some("mcp"));
        assert_eq!(r.pool_of("git__push"), Some("guarded"));
        assert_eq!(r.pool_of("exec_shell"), Some("shell"));
        assert_eq!(r.pool_of("read_file"), Some("all"));
        assert!(routes(&[("exec_*", "shell")]).pool_of("read_file").is_none());
        assert!(r.names_pool("guarded") && !r.names_pool("other"));
    }

    #[test]
    fn background_calls_follow_their_task() {
        use serde_json::json;
        assert_eq!(affinity("exec_shell", &json!({"command": "ls"})), Affinity::Any);
        assert_eq!(
            affinity("exec_shell", &json!({"command": "x", "background": true})),
            Affinity::PreferTaskOwner
        );
        assert_eq!(affinity("shell_output", &json!({"task_id": "t1"})), Affinity::TaskOwner);
        assert_eq!(affinity("kill_shell", &json!({})), Affinity::TaskOwner);
    }
}
