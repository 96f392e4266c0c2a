//! Background shell tasks: `exec_shell` with `"background": true` starts one and returns at
//! once; `shell_output` reads what it wrote since the last look; `kill_shell` stops it.
//!
//! A task's stdout and stderr go into one pipe, drained into a log file in the session's folder
//! by a keeper: work the slot hands its host to run ([`crate::tool::SessionServices::run_detached`]),
//! since the slot spawns no tasks. The keeper enforces the caps as they are reached, not when
//! someone looks: a log past `shell.background_max_log_bytes`, or a task running past
//! `shell.background_max_secs`, is killed with its whole process group, and the next poll says
//! why. A poll reads the log from where the last one stopped. A poll of a running task is a
//! partial view: it is truncated like any output but never saved as "the full output" (see
//! [`crate::tool::ToolOutput::partial`]).
//! Finished tasks are forgotten once their output has been read, or when nobody looked at them
//! for `shell.background_stale_secs` (their log goes with them).

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;

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
    pid: Option<u32>,
    log: PathBuf,
    read: u64,
    last_look: Instant,
    /// How it ended, written by its keeper (or by kill_shell).
    ended: Arc<Mutex<Option<String>>>,
    /// Dropped with the task (forgotten, or the session closed): its keeper then kills what
    /// is left of it and stops.
    _stop: tokio::sync::oneshot::Sender<()>,
    /// The sandbox's private temporary folder, removed with the task (after its kill).
    _sandbox: crate::sandbox::Guard,
}

impl Task {
    fn ended(&self) -> Option<String> {
        lock_ended(&self.ended).clone()
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        if self.ended().is_none() {
            kill_group(self.pid);
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

fn lock_ended(e: &Mutex<Option<String>>) -> std::sync::MutexGuard<'_, Option<String>> {
    // One assignment at a time: a poisoned lock still holds a whole value.
    e.lock().unwrap_or_else(|p| p.into_inner())
}

/// Records how a task ended, unless something already did (a kill is not overwritten by the
/// exit status the kill caused).
fn record_end(ended: &Mutex<Option<String>>, how: String) {
    let mut e = lock_ended(ended);
    if e.is_none() {
        *e = Some(how);
    }
}

/// What a keeper enforces.
#[derive(Debug, Clone, Copy)]
struct Caps {
    log_bytes: u64,
    run_time: Option<Duration>,
}

/// Drains a task's output pipe into its log, within the caps, until the task is over.
async fn keep(
    mut child: tokio::process::Child,
    mut pipe: tokio::net::unix::pipe::Receiver,
    mut log: std::fs::File,
    caps: Caps,
    ended: Arc<Mutex<Option<String>>>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let pid = child.id();
    // Dropped before the task is over (the host's runtime is going down): the group goes.
    let guard = crate::child_group::GroupGuard(pid);
    let deadline = async {
        match caps.run_time {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    let mut buf = vec![0u8; 1 << 16];
    let mut written: u64 = 0;
    let mut open = true;
    let mut exited = false;
    let killed = loop {
        if !open && exited {
            break None;
        }
        tokio::select! {
            _ = &mut stop => break Some("killed".to_string()),
            _ = &mut deadline => {
                break Some(format!(
                    "killed: it ran past shell.background_max_secs ({} s)",
                    caps.run_time.map_or(0, |d| d.as_secs())
                ));
            }
            status = child.wait(), if !exited => {
                exited = true;
                record_end(&ended, match status.ok().and_then(|s| s.code()) {
                    Some(c) => format!("exited with code {c}"),
                    None => "ended by a signal".into(),
                });
            }
            n = pipe.read(&mut buf), if open => match n {
                Ok(n) if n > 0 => {
                    let room = caps.log_bytes.saturating_sub(written);
                    let part = &buf[..n.min(usize::try_from(room).unwrap_or(usize::MAX))];
                    // A log that cannot be written (a full disk) loses output, not the task.
                    let _ = log.write_all(part);
                    written += part.len() as u64;
                    if part.len() < n {
                        break Some(format!(
                            "killed: its output passed shell.background_max_log_bytes ({} bytes)",
                            caps.log_bytes
                        ));
                    }
                }
                _ => open = false,
            },
        }
    };
    if let Some(how) = killed {
        // The group goes whether or not its shell is still there: what it started may be.
        if lock_ended(&ended).is_none() || open {
            kill_group(pid);
        }
        record_end(&ended, how);
        let _ = child.wait().await;
    }
    guard.disarm();
}

fn lock(t: &TaskTable) -> std::sync::MutexGuard<'_, Tasks> {
    // Each operation leaves the table whole; a panic in one leaves nothing half-done.
    t.inner.lock().unwrap_or_else(|p| p.into_inner())
}

impl Tasks {
    /// Forgets finished tasks nobody looked at for `stale`.
    fn sweep(&mut self, stale: Duration) {
        self.tasks.retain(|_, t| t.ended().is_none() || t.last_look.elapsed() < stale);
    }
}

impl TaskTable {
    /// Starts `command` (sh -c) in the background, output to a log in `folder`, drained by a
    /// keeper the session's host runs.
    ///
    /// # Errors
    /// A `tool_error` when `max_running` tasks are running already, the process cannot
    /// start, or the host cannot run the keeper.
    pub fn start(&self, command: &str, ctx: &ToolContext, folder: &std::path::Path) -> Result<String, ToolError> {
        let cfg = &ctx.config.shell;
        let mut tasks = lock(self);
        tasks.sweep(Duration::from_secs(cfg.background_stale_secs));
        let running = tasks.tasks.values().filter(|t| t.ended().is_none()).count();
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
        // One pipe for both streams keeps their lines in the order they were written.
        let (reader, writer) = std::io::pipe().map_err(|e| ToolError::tool(format!("cannot make the task's pipe: {e}")))?;
        let err = writer
            .try_clone()
            .map_err(|e| ToolError::tool(format!("cannot make the task's pipe: {e}")))?;
        let pipe = tokio::net::unix::pipe::Receiver::from_owned_fd(std::os::fd::OwnedFd::from(reader))
            .map_err(|e| ToolError::tool(format!("cannot read the task's pipe: {e}")))?;
        let crate::sandbox::Sandboxed {
            command: mut cmd,
            guard: mut sandbox,
            ..
        } = shell_command(command, ctx, false).inspect_err(|_| {
            let _ = std::fs::remove_file(&log);
        })?;
        cmd.stdout(std::process::Stdio::from(writer)).stderr(std::process::Stdio::from(err));
        let child = cmd.spawn().map_err(|e| {
            let _ = std::fs::remove_file(&log);
            ToolError::tool(format!("cannot start the shell: {e}"))
        })?;
        sandbox.spawned();
        // The writing ends now live in the child alone, so the pipe ends when its writers do.
        drop(cmd);
        let pid = child.id();
        let ended = Arc::new(Mutex::new(None));
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let caps = Caps {
            log_bytes: cfg.background_max_log_bytes,
            run_time: (cfg.background_max_secs > 0).then(|| Duration::from_secs(cfg.background_max_secs)),
        };
        let keeper = keep(child, pipe, file, caps, Arc::clone(&ended), stopped);
        if ctx.services.run_detached(Box::pin(keeper)).is_err() {
            kill_group(pid);
            let _ = std::fs::remove_file(&log);
            return Err(ToolError::refused(
                ErrorCategory::Unavailable,
                "background tasks need a host that runs their output keeper; run the command in the foreground",
            ));
        }
        tasks.tasks.insert(
            id.clone(),
            Task {
                command: command.to_string(),
                pid,
                log,
                read: 0,
                last_look: Instant::now(),
                ended,
                _stop: stop,
                _sandbox: sandbox,
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
        let ended = task.ended();
        let state = match &ended {
            None => "running".to_string(),
            Some(how) => how.clone(),
        };
        let header = format!("[task {id} (`{}`): {state}]", task.command);
        let body = if new.is_empty() {
            "(no new output)".to_string()
        } else {
            String::from_utf8_lossy(&new).into_owned()
        };
        let running = ended.is_none();
        let failed = ended.as_deref().is_some_and(|e| e != "exited with code 0");
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
            cut: None,
            structured: None,
            blocks: Vec::new(),
        })
    }

    /// Stops task `id` and everything it started.
    fn kill(&self, id: &str) -> Result<String, ToolError> {
        let mut tasks = lock(self);
        let task = tasks.tasks.get_mut(id).ok_or_else(|| unknown(id))?;
        task.last_look = Instant::now();
        if task.ended().is_some() {
            return Ok(format!(
                "Task {id} had already ended; its remaining output can still be read with shell_output."
            ));
        }
        kill_group(task.pid);
        record_end(&task.ended, "killed".into());
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
