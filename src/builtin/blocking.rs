//! File work off the async thread, on a thread that is abandoned with its call.
//!
//! A file operation can block for ever: opening a FIFO nobody writes to, reading a device that
//! never ends, a hung network mount. On the async thread it would stall every session there,
//! and the call's timeout could never fire. On tokio's blocking pool it would pin a pool
//! thread, and the runtime (so the process) would wait for it at shutdown. Here it runs on a
//! detached thread of its own: when the call is dropped (its timeout, a cancelled round), the
//! call ends at once, the work is told to stop at its next check ([`Abandon`]), and nothing
//! waits for the thread. (This is a thread, not a task: the slot spawns no tasks.)

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::tool::ToolError;

/// Set when the call that started the work is gone: long work checks it between steps.
#[derive(Debug, Clone)]
pub(crate) struct Abandon(Arc<AtomicBool>);

impl Abandon {
    /// Whether nobody waits for the result any more.
    pub(crate) fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// The error to stop with once abandoned (nobody reads it).
    pub(crate) fn stopped() -> ToolError {
        ToolError::tool("stopped: the call ended before its file work")
    }
}

/// Sets the flag when the waiting future is dropped or finishes.
struct RaiseOnDrop(Arc<AtomicBool>);

impl Drop for RaiseOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs `work` on a thread of its own and waits for it; dropping the future abandons it.
///
/// # Errors
/// What `work` returns, or a tool error when no thread could be started or `work` panicked.
pub(crate) async fn run<T: Send + 'static>(work: impl FnOnce(&Abandon) -> Result<T, ToolError> + Send + 'static) -> Result<T, ToolError> {
    let flag = Arc::new(AtomicBool::new(false));
    let _raise = RaiseOnDrop(Arc::clone(&flag));
    let abandon = Abandon(flag);
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("toolslot-file".into())
        .spawn(move || {
            let _ = tx.send(work(&abandon));
        })
        .map_err(|e| ToolError::tool(format!("cannot start a thread for the file operation: {e}")))?;
    rx.await
        .map_err(|_| ToolError::tool("the file operation failed internally (it panicked); nothing can be assumed about it"))?
}
