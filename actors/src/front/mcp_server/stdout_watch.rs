//! Whether an MCP client on stdio has gone: its end of our stdout closed.
//!
//! rmcp reads stdin's end as "no more requests" and gives the calls in flight up to five
//! seconds to answer before it cancels them: a client may close its side of stdin and still
//! read the answers (`echo request | toolslot mcp`). A client that has also closed its end of
//! stdout will read nothing more, and a command it started would otherwise run on (and act)
//! after the person quit the app. A pipe tells: `poll` reports an error on our end of it once
//! the reader is gone.

/// Resolves when the reader of stdout has closed its end (a pipe or a socket); never for a
/// file, or when stdout cannot be watched.
pub async fn stdout_closed() {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let watcher = std::thread::Builder::new().name("stdout-watch".into()).spawn(move || {
        let mut fd = libc::pollfd {
            fd: libc::STDOUT_FILENO,
            // No event asked for: poll reports an error or a hang-up whatever is asked.
            events: 0,
            revents: 0,
        };
        loop {
            // SAFETY: one valid pollfd, for the call's duration.
            let ready = unsafe { libc::poll(&mut fd, 1, -1) };
            if ready > 0 && fd.revents & (libc::POLLERR | libc::POLLHUP) != 0 {
                let _ = tx.send(());
                return;
            }
            if ready < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return;
            }
            if ready > 0 && fd.revents & libc::POLLNVAL != 0 {
                return;
            }
        }
    });
    if watcher.is_err() || rx.await.is_err() {
        std::future::pending::<()>().await;
    }
}
