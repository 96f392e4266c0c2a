//! The stdio transport to an MCP server's process: JSON-RPC lines, read with bounds, and a
//! process group that ends with the connection.
//!
//! rmcp's own child-process transport drops a line over its length limit and an answer it
//! cannot parse, and the request then waits out its timeout as if the server "did not
//! answer"; it also kills only the server's own process, from a task that never runs once the
//! runtime is going down. This transport speaks the same lines with these differences:
//! - a line over `mcp.max_message_bytes` is skimmed for its id ([`super::frame::IdScanner`])
//!   without being held, and the request it answers ends at once with an error saying why;
//! - values nested deeper than `mcp.max_json_depth` are flattened to a marker
//!   ([`super::frame::flatten_deep`]), so one deep schema fails one tool, not the listing;
//! - an answer that does not fit the shape of its request ends that request at once;
//! - a `tools/list` answer reaches the client as raw JSON, so the tools of a listing are
//!   admitted one by one ([`super::tools_from_listing`]) rather than all or none;
//! - the server runs as the leader of its own process group; closing signals the group
//!   (stdin closed, then SIGTERM, then SIGKILL), and dropping the transport kills the group.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{CustomResult, ErrorCode, ErrorData, JsonRpcMessage, RequestId, ServerResult};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use serde_json::Value;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};

use super::frame::flatten_deep;
use super::lines::{BoundedLines, LineRead, write_line};
use crate::child_group::signal_group;

/// The JSON-RPC error code of an answer toolslot would not read (too large, unreadable): the
/// client reports it as its own finding, not as the server's words.
pub const UNREADABLE_ANSWER: i32 = -32_099;

/// The bounds of one connection.
#[derive(Debug, Clone, Copy)]
pub struct FrameLimits {
    /// Longest line read (bytes).
    pub max_message_bytes: usize,
    /// Deepest nesting kept.
    pub max_json_depth: usize,
    /// How long closing waits for the server at each step (stdin closed, SIGTERM).
    pub shutdown_grace: Duration,
}

/// Requests sent and not yet answered: their id (as JSON text) and method.
type Pending = Arc<Mutex<HashMap<String, String>>>;

/// The connection (see the module documentation).
pub struct StdioTransport {
    child: Option<Child>,
    pid: Option<u32>,
    stdout: BoundedLines<tokio::io::BufReader<ChildStdout>>,
    stdin: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    pending: Pending,
    limits: FrameLimits,
    queued: VecDeque<RxJsonRpcMessage<RoleClient>>,
    server: String,
    stopped: tokio::sync::watch::Sender<bool>,
}

impl std::fmt::Debug for StdioTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioTransport")
            .field("server", &self.server)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

/// Starts `program args` in folder `cwd` with `env` as server `server`: stdin and stdout are
/// the protocol, stderr is handed back to be read by the caller. The server keeps toolslot's
/// environment (it is a program the user configured), but a `PATH` not set in `env` keeps only
/// its absolute folders (`child_env::absolute_path`).
///
/// # Errors
/// The spawn's IO error.
pub fn spawn(
    server: &str,
    program: &str,
    args: &[String],
    env: &std::collections::BTreeMap<String, String>,
    cwd: &std::path::Path,
    limits: FrameLimits,
) -> std::io::Result<(StdioTransport, Option<ChildStderr>)> {
    let mut cmd = tokio::process::Command::new(program);
    if let Some(path) = std::env::var_os("PATH").filter(|_| !env.contains_key("PATH")) {
        cmd.env("PATH", crate::child_env::absolute_path(&path.to_string_lossy()));
    }
    cmd.args(args)
        .current_dir(cwd)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    #[cfg(target_os = "linux")]
    // SAFETY: prctl is async-signal-safe and touches only the child being made. If toolslot
    // itself is killed (SIGKILL, where no cleanup of ours runs), the server is killed too.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let pid = child.id();
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("the server's stdout was not piped"))?;
    let stdin = child.stdin.take();
    let stderr = child.stderr.take();
    Ok((
        StdioTransport {
            child: Some(child),
            pid,
            stdout: BoundedLines::new(tokio::io::BufReader::with_capacity(1 << 16, stdout), limits.max_message_bytes),
            stdin: Arc::new(tokio::sync::Mutex::new(stdin)),
            pending: Arc::new(Mutex::new(HashMap::new())),
            limits,
            queued: VecDeque::new(),
            server: server.to_string(),
            stopped: tokio::sync::watch::Sender::new(false),
        },
        stderr,
    ))
}

fn lock(p: &Pending) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
    // One insert or remove at a time: a poisoned lock still holds a whole map.
    p.lock().unwrap_or_else(|e| e.into_inner())
}

fn id_key(id: &Value) -> String {
    id.to_string()
}

impl StdioTransport {
    /// The server process's id.
    pub fn id(&self) -> Option<u32> {
        self.pid
    }

    /// Becomes `true` once the server is stopped (closed and reaped, or killed when the
    /// transport was dropped).
    pub fn stopped(&self) -> tokio::sync::watch::Receiver<bool> {
        self.stopped.subscribe()
    }

    /// The error that ends request `id` (if it is one of ours still waiting).
    fn end_request(&self, id: &Value, message: String) -> Option<RxJsonRpcMessage<RoleClient>> {
        lock(&self.pending).remove(&id_key(id))?;
        let id: RequestId = serde_json::from_value(id.clone()).ok()?;
        Some(JsonRpcMessage::error(
            ErrorData::new(ErrorCode(UNREADABLE_ANSWER), message, None),
            Some(id),
        ))
    }

    /// One line as a message, or `None` when it is to be skipped.
    fn message_of(&self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleClient>> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        let flat = flatten_deep(line, self.limits.max_json_depth);
        let value: Value = match serde_json::from_slice(&flat) {
            Ok(v) => v,
            Err(e) => {
                // Not JSON: nothing to answer, as every MCP SDK does with noise on stdout.
                tracing::debug!(server = %self.server, error = %e, "skipping a line that is not JSON");
                return None;
            }
        };
        let is_answer = value.get("result").is_some() || value.get("error").is_some();
        let answered = value
            .get("id")
            .filter(|_| is_answer)
            .and_then(|id| lock(&self.pending).get(&id_key(id)).cloned().map(|m| (id.clone(), m)));
        if let Some((id, method)) = &answered
            && method == "tools/list"
            && let Some(result) = value.get("result")
        {
            // Raw, so that each tool of the listing is admitted on its own.
            lock(&self.pending).remove(&id_key(id));
            let request_id: RequestId = serde_json::from_value(id.clone()).ok()?;
            return Some(JsonRpcMessage::response(
                ServerResult::CustomResult(CustomResult(result.clone())),
                request_id,
            ));
        }
        match serde_json::from_value::<RxJsonRpcMessage<RoleClient>>(value) {
            Ok(message) => {
                if let Some((id, _)) = &answered {
                    lock(&self.pending).remove(&id_key(id));
                }
                Some(message)
            }
            Err(e) => match answered {
                Some((id, method)) => self.end_request(&id, format!("the server's answer to {method} is not a valid one ({e})")),
                None => {
                    tracing::debug!(server = %self.server, error = %e, "skipping a message of an unknown shape");
                    None
                }
            },
        }
    }

    /// Closes stdin, then signals the group (SIGTERM, then SIGKILL), waiting the grace
    /// period at each step; the server is reaped.
    async fn stop(&mut self) {
        drop(self.stdin.lock().await.take());
        let Some(mut child) = self.child.take() else {
            self.stopped.send_replace(true);
            return;
        };
        let grace = self.limits.shutdown_grace;
        let exited = tokio::time::timeout(grace, child.wait()).await.is_ok();
        if !exited {
            signal_group(self.pid, libc::SIGTERM);
            if tokio::time::timeout(grace, child.wait()).await.is_err() {
                signal_group(self.pid, libc::SIGKILL);
                let _ = child.wait().await;
            }
        }
        // Whatever the server started and left behind goes with it.
        signal_group(self.pid, libc::SIGKILL);
        tracing::debug!(server = %self.server, pid = ?self.pid, "MCP server stopped");
        self.stopped.send_replace(true);
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        // Not closed (the connection was dropped, the runtime is going down): no waiting is
        // possible here, so the group is killed at once. The leader is not reaped yet, so its
        // group id cannot have been reused.
        if self.child.is_some() {
            signal_group(self.pid, libc::SIGKILL);
        }
        self.stopped.send_replace(true);
    }
}

impl rmcp::transport::Transport<RoleClient> for StdioTransport {
    type Error = std::io::Error;

    fn send(&mut self, item: TxJsonRpcMessage<RoleClient>) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let stdin = Arc::clone(&self.stdin);
        let encoded = serde_json::to_value(&item).map_err(std::io::Error::other);
        if let Ok(v) = &encoded
            && let (Some(id), Some(method)) = (v.get("id"), v.get("method").and_then(Value::as_str))
        {
            lock(&self.pending).insert(id_key(id), method.to_string());
        }
        async move {
            let bytes = serde_json::to_vec(&encoded?).map_err(std::io::Error::other)?;
            write_line(&stdin, bytes, "the server's stdin is closed").await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            if let Some(m) = self.queued.pop_front() {
                return Some(m);
            }
            match self.stdout.read().await {
                LineRead::Eof => return None,
                LineRead::Line => {
                    if let Some(m) = self.message_of(self.stdout.line()) {
                        return Some(m);
                    }
                }
                LineRead::Oversize(id, bytes) => {
                    let max = self.limits.max_message_bytes;
                    tracing::warn!(server = %self.server, bytes, max, "a message over mcp.max_message_bytes was dropped");
                    if let Some(id) = id
                        && let Some(m) = self.end_request(
                            &id,
                            format!("the server's answer is over mcp.max_message_bytes ({max} bytes); it was dropped unread"),
                        )
                    {
                        self.queued.push_back(m);
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.stop().await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> FrameLimits {
        FrameLimits {
            max_message_bytes: 1000,
            max_json_depth: 16,
            shutdown_grace: Duration::from_millis(200),
        }
    }

    /// A "server" that prints `lines` then sleeps.
    fn server(script: &str) -> StdioTransport {
        let (t, _) = spawn(
            "t",
            "sh",
            &["-c".into(), script.into()],
            &Default::default(),
            std::path::Path::new("/"),
            limits(),
        )
        .unwrap();
        t
    }

    fn pend(t: &StdioTransport, id: i64, method: &str) {
        lock(&t.pending).insert(id.to_string(), method.to_string());
    }

    #[tokio::test]
    async fn an_oversize_answer_ends_its_request_at_once() {
        use rmcp::transport::Transport;
        let mut t = server(
            "printf '{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"x\":\"'; head -c 5000 /dev/zero | tr '\\0' a; printf '\"}}\\n'; sleep 30",
        );
        pend(&t, 3, "tools/call");
        let m = tokio::time::timeout(Duration::from_secs(10), t.receive()).await.unwrap().unwrap();
        let (err, id) = m.into_error().unwrap();
        assert_eq!(id, Some(RequestId::Number(3)));
        assert_eq!(err.code, ErrorCode(UNREADABLE_ANSWER));
        assert!(err.message.contains("mcp.max_message_bytes"), "{}", err.message);
        t.close().await.unwrap();
    }

    #[tokio::test]
    async fn a_listing_arrives_raw_and_a_misshapen_answer_ends_its_request() {
        use rmcp::transport::Transport;
        let mut t = server(
            "echo '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[5,{\"name\":7}]}}'; echo 'noise'; echo '{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{},\"error\":{\"code\":1,\"message\":\"both\"}}'; sleep 30",
        );
        pend(&t, 1, "tools/list");
        pend(&t, 2, "tools/call");
        let (result, _) = t.receive().await.unwrap().into_response().unwrap();
        let ServerResult::CustomResult(CustomResult(raw)) = result else {
            panic!("not raw: {result:?}")
        };
        assert_eq!(raw["tools"][0], 5);
        let (err, _) = t.receive().await.unwrap().into_error().unwrap();
        assert!(err.message.contains("tools/call"), "{}", err.message);
        t.close().await.unwrap();
    }

    #[tokio::test]
    async fn closing_ends_a_server_that_ignores_stdin_and_what_it_started() {
        use rmcp::transport::Transport;
        let mut t = server("trap '' TERM; sleep 300 & sleep 300; wait");
        let pid = t.id().unwrap() as i32;
        t.close().await.unwrap();
        // The group's last members may take a moment to be reaped by whoever inherited them.
        let mut alive = true;
        for _ in 0..100 {
            let members = std::fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
                .filter_map(|stat| {
                    let fields: Vec<String> = stat.rsplit_once(')')?.1.split_whitespace().map(str::to_string).collect();
                    (fields.first()? != "Z" && fields.get(2)?.parse::<i32>().ok()? == pid).then_some(())
                })
                .count();
            if members == 0 {
                alive = false;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!alive, "the server's group outlived the close");
    }
}
