//! Background shell tasks: `exec_shell` with `"background": true` starts one and returns at
//! once; `shell_output` reads what it wrote since the last look; `kill_shell` stops it.
//!
//! The slot spawns no tasks, so nothing drains a background command's pipes: its stdout and
//! stderr go to a log file in the session's folder, and a poll reads the log from where the
//! last one stopped. A poll of a running task is a partial view: it is truncated like any
//! output but never saved as "the full output" (see [`crate::tool::ToolOutput::partial`]).
//! Finished tasks are forgotten once their output has been read, or when nobody looked at them
//! for `shell.background_stale_secs` (their log goes with them).

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};

use super::parse_input;
use super::shell_process::{kill_group, shell_command};
use crate::tool::{Capability, ErrorCategory, OutputKind, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSpec};

/// A session's background tasks.
#[derive(Debug, Default)]
pub struct TaskTable {
    inner: Mutex<Tasks>,
}

#[derive(Debug, Default)]
struct Tasks {
    next: u32,
    tasks: BTreeMap<String, Task>,
}

#[derive(Debug)]
struct Task {
    command: String,
    /// Dropping it kills the process (`kill_on_drop`); its group is killed explicitly.
    child: tokio::process::Child,
    pid: Option<u32>,
    log: PathBuf,
    read: u64,
    last_look: Instant,
    ended: Option<String>,
}

impl Drop for Task {
    fn drop(&mut self) {
        if self.ended.is_none() {
            kill_group(self.pid);
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

fn lock(t: &TaskTable) -> std::sync::MutexGuard<'_, Tasks> {
    // Each operation leaves the table whole; a panic in one leaves nothing half-done.
    t.inner.lock().unwrap_or_else(|p| p.into_inner())
}

impl Tasks {
    /// Records how each task ended, and forgets finished ones nobody looked at for `stale`.
    fn sweep(&mut self, stale: Duration) {
        for task in self.tasks.values_mut() {
            if task.ended.is_none()
                && let Ok(Some(status)) = task.child.try_wait()
            {
                task.ended = Some(match status.code() {
                    Some(c) => format!("exited with code {c}"),
                    None => "ended by a signal".into(),
                });
            }
        }
        self.tasks.retain(|_, t| t.ended.is_none() || t.last_look.elapsed() < stale);
    }
}

impl TaskTable {
    /// Starts `command` (sh -c) in the background, output to a log in `folder`.
    ///
    /// # Errors
    /// A `tool_error` when `max_running` tasks are running already or the process cannot
    /// start.
    pub fn start(&self, command: &str, ctx: &ToolContext, folder: &std::path::Path) -> Result<String, ToolError> {
        let cfg = &ctx.config.shell;
        let mut tasks = lock(self);
        tasks.sweep(Duration::from_secs(cfg.background_stale_secs));
        let running = tasks.tasks.values().filter(|t| t.ended.is_none()).count();
        if running >= cfg.background_max_tasks {
            return Err(ToolError::refused(
                ErrorCategory::Unavailable,
                format!(
                    "{running} background tasks are running, the most a session may have (shell.background_max_tasks); stop one with kill_shell or wait for one to finish"
                ),
            ));
        }
        tasks.next += 1;
        let id = format!("t{}", tasks.next);
        std::fs::create_dir_all(folder).map_err(|e| ToolError::tool(format!("cannot create the task folder: {e}")))?;
        let log = folder.join(format!("{id}-{}.log", crate::output::random_hex(4)));
        let file = std::fs::File::create(&log).map_err(|e| ToolError::tool(format!("cannot create the task's log: {e}")))?;
        let err = file
            .try_clone()
            .map_err(|e| ToolError::tool(format!("cannot open the task's log: {e}")))?;
        let mut cmd = shell_command(command, ctx);
        cmd.stdout(std::process::Stdio::from(file)).stderr(std::process::Stdio::from(err));
        let child = cmd.spawn().map_err(|e| {
            let _ = std::fs::remove_file(&log);
            ToolError::tool(format!("cannot start the shell: {e}"))
        })?;
        let pid = child.id();
        tasks.tasks.insert(
            id.clone(),
            Task {
                command: command.to_string(),
                child,
                pid,
                log,
                read: 0,
                last_look: Instant::now(),
                ended: None,
            },
        );
        Ok(id)
    }

    /// What task `id` wrote since the last look (at most `max` bytes; the rest waits for the
    /// next look), and whether it is still running.
    fn poll(&self, id: &str, max: u64, stale: Duration) -> Result<ToolOutput, ToolError> {
        let mut tasks = lock(self);
        tasks.sweep(stale);
        let task = tasks.tasks.get_mut(id).ok_or_else(|| unknown(id))?;
        task.last_look = Instant::now();
        let mut new = Vec::new();
        let size = std::fs::metadata(&task.log).map(|m| m.len()).unwrap_or(0);
        if size > task.read {
            let mut f = std::fs::File::open(&task.log).map_err(|e| ToolError::tool(format!("cannot read the task's log: {e}")))?;
            f.seek(SeekFrom::Start(task.read))
                .and_then(|_| f.take(max).read_to_end(&mut new))
                .map_err(|e| ToolError::tool(format!("cannot read the task's log: {e}")))?;
            task.read += new.len() as u64;
        }
        let more = size > task.read;
        let state = match &task.ended {
            None => "running".to_string(),
            Some(how) => how.clone(),
        };
        let header = format!("[task {id} (`{}`): {state}]", task.command);
        let body = if new.is_empty() {
            "(no new output)".to_string()
        } else {
            String::from_utf8_lossy(&new).into_owned()
        };
        let running = task.ended.is_none();
        let failed = task.ended.as_deref().is_some_and(|e| e != "exited with code 0");
        if !running && !more {
            // Everything it wrote has been read: it is done with.
            tasks.tasks.remove(id);
        }
        Ok(ToolOutput {
            content: body,
            is_error: failed,
            kind: OutputKind::Shell,
            trailer: Some(if more {
                format!("{header}\n[more output waits: call shell_output again]")
            } else {
                header
            }),
            partial: running || more,
            structured: None,
            blocks: Vec::new(),
        })
    }

    /// Stops task `id` and everything it started.
    fn kill(&self, id: &str) -> Result<String, ToolError> {
        let mut tasks = lock(self);
        let task = tasks.tasks.get_mut(id).ok_or_else(|| unknown(id))?;
        task.last_look = Instant::now();
        if task.ended.is_some() {
            return Ok(format!(
                "Task {id} had already ended; its remaining output can still be read with shell_output."
            ));
        }
        kill_group(task.pid);
        let _ = task.child.start_kill();
        task.ended = Some("killed".into());
        Ok(format!(
            "Task {id} (`{}`) was killed; what it wrote can still be read with shell_output.",
            task.command
        ))
    }

    /// How many tasks the table holds (running or unread).
    pub fn len(&self) -> usize {
        lock(self).tasks.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn unknown(id: &str) -> ToolError {
    ToolError::invalid(
        "task_id",
        format!(
            "No background task `{id}`: finished tasks are forgotten once their output has been read, or after shell.background_stale_secs without a look."
        ),
    )
}

/// The folder of a session's task logs.
pub fn task_folder(ctx: &ToolContext) -> PathBuf {
    ctx.config
        .overflow
        .dir_path()
        .join(crate::tool_name::sanitize_tool_name(&ctx.session_id))
        .join("tasks")
}

/// The session's task table (kept in the session's state, so closing the session kills its
/// tasks), or why there is none.
pub(super) fn tasks_of(ctx: &ToolContext) -> Result<std::sync::Arc<TaskTable>, ToolError> {
    ctx.services
        .state()
        .map(|s| s.get_or_default::<TaskTable>())
        .ok_or_else(|| ToolError::refused(ErrorCategory::Unavailable, "background tasks need a session that keeps them"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskInput {
    task_id: String,
}

/// The input schema of the tools that take a task id.
fn task_id_schema() -> Value {
    json!({"type": "object", "properties": {"task_id": {"type": "string", "minLength": 1, "description": "The id exec_shell returned"}}, "required": ["task_id"], "additionalProperties": false})
}

/// Reads a background task's new output.
#[derive(Debug, Default)]
pub struct ShellOutput;

impl Tool for ShellOutput {
    fn name(&self) -> &str {
        "shell_output"
    }
    fn description(&self) -> &str {
        "Read what a background exec_shell task wrote since you last looked, and whether it is still running."
    }
    fn input_schema(&self) -> Value {
        task_id_schema()
    }
    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let input: TaskInput = parse_input(input)?;
            let cfg = &ctx.config.shell;
            tasks_of(ctx)?.poll(
                &input.task_id,
                cfg.background_poll_max_bytes,
                Duration::from_secs(cfg.background_stale_secs),
            )
        })
    }
}

impl ToolSpec for ShellOutput {
    fn capabilities(&self) -> &[Capability] {
        &[Capability::ReadOnly]
    }
    fn supports_parallel(&self) -> bool {
        true
    }
}

/// Stops a background task.
#[derive(Debug, Default)]
pub struct KillShell;

impl Tool for KillShell {
    fn name(&self) -> &str {
        "kill_shell"
    }
    fn description(&self) -> &str {
        "Stop a background exec_shell task and everything it started."
    }
    fn input_schema(&self) -> Value {
        task_id_schema()
    }
    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let input: TaskInput = parse_input(input)?;
            tasks_of(ctx)?.kill(&input.task_id).map(ToolOutput::text)
        })
    }
}

impl ToolSpec for KillShell {
    fn capabilities(&self) -> &[Capability] {
        // It only stops what this session started: no approval, but not read-only.
        &[]
    }
}
