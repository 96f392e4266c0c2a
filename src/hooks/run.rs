//! Running one hook: its program in the sandbox, the call on its stdin, bounded in time and
//! output.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::answer::{Answer, Ending, read};
use crate::config::{Config, HookEvent};
use crate::policy::Hook;
use crate::sandbox::Request;

/// Runs `hook` with `payload` (the call, as JSON) on its stdin, in the sandbox: every folder
/// readable, nothing writable, no network, the filtered environment of every program the model
/// drives, its own process group (killed whole when its time is up).
pub async fn run_one(hook: &Hook, event: HookEvent, payload: &[u8], workspace: &Path, config: &Config) -> Answer {
    let (program, args) = match hook.config.command.split_first() {
        Some(p) => p,
        None => return Answer::Failed("it has no command".into()),
    };
    // A hook judges a call; it has no business changing files or reaching the network, and
    // the input it reads was written by the model.
    let secrets = crate::sandbox::secret_paths(&config.shell, workspace);
    let mut sandboxed = match crate::sandbox::command(&Request::granted_nothing(program, args, workspace, &config.shell, &secrets)) {
        Ok(s) => s,
        Err(e) => return Answer::Failed(format!("its sandbox could not be set up: {e}")),
    };
    let mut child = match sandboxed
        .command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Answer::Failed(format!("`{program}` cannot start: {e}")),
    };
    sandboxed.guard.spawned();
    let pid = child.id();
    let max = config.policy.hook_max_output_bytes;
    let timeout = hook.config.timeout_ms.unwrap_or(config.policy.hook_timeout_ms);
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let work = async {
        let feed = async {
            if let Some(mut stdin) = stdin {
                // A hook that does not read its input may still answer.
                let _ = stdin.write_all(payload).await;
                let _ = stdin.shutdown().await;
            }
        };
        let (_, out, err) = tokio::join!(feed, bounded(stdout, max), bounded(stderr, max));
        let status = child.wait().await;
        (out, err, status)
    };
    let ended = if timeout == 0 {
        Some(work.await)
    } else {
        tokio::time::timeout(Duration::from_millis(timeout), work).await.ok()
    };
    let Some((out, err, status)) = ended else {
        kill_group(pid);
        return Answer::Failed(format!("it did not answer within {timeout} ms"));
    };
    let (Some(out), Some(err)) = (out, err) else {
        kill_group(pid);
        return Answer::Failed(format!("its output is longer than policy.hook_max_output_bytes ({max})"));
    };
    let ending = match status {
        Ok(s) => match s.code() {
            Some(code) => Ending::Exited(code),
            None => Ending::Signalled,
        },
        Err(e) => return Answer::Failed(format!("waiting for it failed: {e}")),
    };
    read(event, ending, &out, &err)
}

/// Everything `pipe` holds, or `None` past `max` bytes.
async fn bounded(pipe: Option<impl AsyncRead + Unpin>, max: usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    if let Some(p) = pipe {
        let mut limited = p.take(max as u64 + 1);
        if limited.read_to_end(&mut out).await.is_err() {
            return Some(out);
        }
    }
    (out.len() <= max).then_some(out)
}

/// Ends the hook and everything it started: the sandbox put it in a session of its own.
fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: killpg only sends a signal, to the group the hook leads.
        unsafe {
            libc::killpg(pid, libc::SIGKILL);
        }
    }
}
