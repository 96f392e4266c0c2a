//! [`RemoteTool`]: a routed tool, whose calls run on a worker of its pool.

use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use serde_json::Value;

use super::route::{Affinity, affinity};
use super::wire::{AnnouncedTool, Job};
use crate::config::NetworkPolicy;
use crate::tool::{
    ApprovalRequirement, Capability, ErrorCategory, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSource, ToolSpec,
    is_read_only,
};

/// How a remote call ended: on which worker, with which outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteAnswer {
    /// The worker that ran it.
    pub worker: String,
    /// The tool's outcome there.
    pub outcome: Result<ToolOutput, ToolError>,
}

/// Hands calls to workers. Implemented by the actors crate over NATS JetStream.
pub trait RemoteCaller: Send + Sync {
    /// Runs `job` on a worker of `pool` (only on `target`, when given) and waits for its
    /// outcome. An error is the call's result: `unavailable` when nothing ran (no live worker,
    /// nothing took it), `outcome_unknown` when it started on a worker that was lost.
    ///
    /// # Cancel safety
    /// Dropping the future gives the call up: the worker is told to stop it, and no worker may
    /// start it any more.
    /// `progress` hears the tool's progress reports from the worker (progress, total,
    /// message), as an in-process tool's would be reported.
    fn call<'a>(
        &'a self,
        pool: &'a str,
        job: Job,
        target: Option<&'a str>,
        progress: Option<RemoteProgress>,
    ) -> BoxFuture<'a, Result<RemoteAnswer, ToolError>>;
    /// Whether `worker` was heard from recently.
    fn is_alive(&self, worker: &str) -> bool;
}

/// Where a remote call's progress reports go: progress, total, message.
pub type RemoteProgress = Arc<dyn Fn(f64, Option<f64>, Option<String>) + Send + Sync>;

/// The worker that holds a session's background tasks (kept in the session's state).
#[derive(Debug, Default)]
pub struct TaskOwner(Mutex<Option<String>>);

impl TaskOwner {
    /// The worker, if the session started a background task on one.
    pub fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Records the worker that started the session's newest task.
    pub fn set(&self, worker: String) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(worker);
    }
}

/// A routed tool: its definition (what the model sees, how it is approved) is the local tool's,
/// or a worker's announcement; its calls run on a worker of its pool.
pub struct RemoteTool {
    def: Arc<dyn ToolSpec>,
    pool: String,
    caller: Arc<dyn RemoteCaller>,
}

impl std::fmt::Debug for RemoteTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteTool")
            .field("name", &self.def.name())
            .field("pool", &self.pool)
            .finish_non_exhaustive()
    }
}

impl RemoteTool {
    /// `def` run by the workers of `pool`, reached through `caller`.
    pub fn new(def: Arc<dyn ToolSpec>, pool: impl Into<String>, caller: Arc<dyn RemoteCaller>) -> Self {
        Self {
            def,
            pool: pool.into(),
            caller,
        }
    }

    /// The pool that runs it.
    pub fn pool(&self) -> &str {
        &self.pool
    }
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// A key NATS accepts (`[-_=.a-zA-Z0-9]`), unique per call: the pool, the session, then random
/// bits. The pool comes first so that NATS permissions can confine a pool's workers to its
/// calls' records and subjects (`$KV.toolslot_calls.<pool>.>`, `toolslot.progress.<pool>.>`).
fn call_key(pool: &str, session: &str) -> String {
    let safe: String = session
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    format!(
        "{pool}.{}.{}",
        if safe.is_empty() { "_" } else { &safe },
        crate::output::random_hex(8)
    )
}

impl Tool for RemoteTool {
    fn name(&self) -> &str {
        self.def.name()
    }
    fn description(&self) -> &str {
        self.def.description()
    }
    fn input_schema(&self) -> Value {
        self.def.input_schema()
    }
    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let name = self.def.name();
            let owner = ctx.services.state().map(|s| s.get_or_default::<TaskOwner>());
            let held = owner.as_ref().and_then(|o| o.get());
            let aff = affinity(name, &input);
            let target = match aff {
                Affinity::Any => None,
                Affinity::PreferTaskOwner => held.filter(|w| self.caller.is_alive(w)),
                Affinity::TaskOwner => match held {
                    Some(w) => Some(w),
                    None => {
                        let id = input.get("task_id").and_then(Value::as_str).unwrap_or("");
                        return Err(ToolError::invalid(
                            "task_id",
                            format!(
                                "No background task `{id}`: this session has started none (exec_shell with \"background\": true starts one)."
                            ),
                        ));
                    }
                },
            };
            let timeout_ms = ctx.config.execution.call_timeout_ms;
            let horizon = if timeout_ms == 0 {
                ctx.config.remote.job_max_age_secs.saturating_mul(1000)
            } else {
                timeout_ms
            };
            let job = Job {
                key: call_key(&self.pool, &ctx.session_id),
                tool: name.to_string(),
                input,
                session: ctx.session_id.clone(),
                workspace: ctx.workspace.clone(),
                call_id: ctx.call_id.clone(),
                index: ctx.index,
                read_only: is_read_only(self.def.capabilities()),
                timeout_ms,
                not_after_ms: unix_ms().saturating_add(horizon),
                grant: ctx.grant,
                // The caller names where it hears answers.
                reply: None,
                hidden: ctx.services.hidden().map(|h| h.globs(name)).unwrap_or_default(),
            };
            let services = Arc::clone(&ctx.services);
            let (index, call_id) = (ctx.index, ctx.call_id.clone());
            let progress: RemoteProgress = Arc::new(move |p, t, m| services.progress(index, &call_id, p, t, m));
            let answer = self.caller.call(&self.pool, job, target.as_deref(), Some(progress)).await?;
            if aff == Affinity::PreferTaskOwner
                && answer.outcome.is_ok()
                && let Some(owner) = owner
            {
                owner.set(answer.worker.clone());
            }
            answer.outcome
        })
    }
}

impl ToolSpec for RemoteTool {
    fn capabilities(&self) -> &[Capability] {
        self.def.capabilities()
    }
    fn source(&self) -> ToolSource {
        self.def.source()
    }
    fn approval_requirement_for_input(&self, input: &Value, policy: NetworkPolicy) -> ApprovalRequirement {
        self.def.approval_requirement_for_input(input, policy)
    }
    fn check_input(&self, input: &Value) -> Result<(), ToolError> {
        self.def.check_input(input)
    }
    fn defer_loading(&self) -> bool {
        self.def.defer_loading()
    }
    fn supports_parallel(&self) -> bool {
        self.def.supports_parallel()
    }
    fn loop_exempt(&self) -> bool {
        self.def.loop_exempt()
    }
    fn approval_key(&self, input: &Value) -> String {
        self.def.approval_key(input)
    }
    fn field_aliases(&self) -> &[(&'static str, &'static str)] {
        self.def.field_aliases()
    }
}

/// A tool known only from a worker's announcement: the definition a [`RemoteTool`] wraps. It
/// never runs here.
#[derive(Debug)]
pub struct AnnouncedSpec(pub AnnouncedTool);

impl Tool for AnnouncedSpec {
    fn name(&self) -> &str {
        &self.0.name
    }
    fn description(&self) -> &str {
        &self.0.description
    }
    fn input_schema(&self) -> Value {
        self.0.input_schema.clone()
    }
    fn run<'a>(&'a self, _input: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        let name = self.0.name.clone();
        Box::pin(async move {
            Err(ToolError::refused(
                ErrorCategory::Unavailable,
                format!("`{name}` runs only on remote workers; nothing was run."),
            ))
        })
    }
}

impl ToolSpec for AnnouncedSpec {
    fn capabilities(&self) -> &[Capability] {
        &self.0.capabilities
    }
    fn source(&self) -> ToolSource {
        self.0.source
    }
    fn defer_loading(&self) -> bool {
        self.0.defer
    }
    fn supports_parallel(&self) -> bool {
        self.0.parallel
    }
    fn loop_exempt(&self) -> bool {
        self.0.loop_exempt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_keys_are_nats_keys_and_unique() {
        let a = call_key("shell", "ab/c d");
        let b = call_key("shell", "ab/c d");
        assert_ne!(a, b);
        assert!(a.starts_with("shell.ab_c_d."));
        assert!(a.bytes().all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(&c)), "{a}");
    }
}
