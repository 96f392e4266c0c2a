//! A thread's own connection to a streamable HTTP server.
//!
//! A server's connection lives where its actor lives (the thread that started the servers),
//! and so do rmcp's tasks for it: a call from a session on another thread (every session of
//! `toolslot serve` lives on an HTTP worker or a dispatcher arbiter) wakes that thread to send
//! the request, and is woken again with the answer. On a virtual machine the wake-up of an idle
//! core is the dearest part of a call (BENCHMARKS.md, "A connection per thread"). So a thread
//! that calls a streamable HTTP server opens a session of its own with it, once, in the
//! background while its first calls go over the shared connection; its later calls go over
//! its own, whose tasks run on the caller's thread.
//!
//! Only while the shared connection is open: the actor alone starts, restarts and stops a
//! server, and a thread's connection is bound to the shared one it was opened beside (a
//! restart opens new ones). Never for a stdio server, whose second connection would be a
//! second process.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use toolslot::config::{McpConfig, McpServerConfig};
use toolslot::mcp::client::{ConnectOptions, McpClient, Remembered, connect};

/// How a thread opens its own connection to one server.
pub(super) struct Opener {
    cfg: McpServerConfig,
    mcp: McpConfig,
    startup: Duration,
    elicitation: bool,
    /// The thread the shared connection's tasks run on, which needs no second one.
    home: std::thread::ThreadId,
    /// The sessions of every connection opened so far, which [`Opener::end_all`] ends: a
    /// connection's own tasks end its session only if its thread's runtime lets them run,
    /// and an HTTP worker's has stopped by the time toolslot stops its servers.
    opened: Mutex<Vec<Remembered>>,
}

impl Opener {
    /// The opener of `cfg`'s threads' connections, when it is a streamable HTTP server and
    /// `mcp.http_connection_per_thread` is on; made on the thread its actor starts on.
    pub(super) fn of(cfg: &McpServerConfig, mcp: &McpConfig, elicitation: bool) -> Option<Arc<Self>> {
        (cfg.url.is_some() && mcp.http_connection_per_thread).then(|| {
            Arc::new(Self {
                cfg: cfg.clone(),
                mcp: mcp.clone(),
                startup: cfg.startup_timeout(mcp),
                elicitation,
                home: std::thread::current().id(),
                opened: Mutex::default(),
            })
        })
    }

    /// This thread's connection beside `shared`, when it is open; otherwise it is opened in
    /// the background (once at a time, and not again before `mcp.restart_backoff_ms` after a
    /// failure) and the caller goes on with `shared`.
    pub(super) fn here(self: &Arc<Self>, shared: &Arc<McpClient>) -> Option<Arc<McpClient>> {
        // The shared connection's own thread wakes no other to use it.
        if std::thread::current().id() == self.home {
            return None;
        }
        // A connection's tasks run where they are spawned: a thread with no runtime has
        // nowhere to run them, and on a runtime of many threads they would not stay on this one.
        let runtime = tokio::runtime::Handle::try_current()
            .ok()
            .filter(|r| r.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread)?;
        let beside = Arc::downgrade(shared);
        HERE.with(|here| {
            let mut here = here.borrow_mut();
            // The name is copied once per thread, not on every call.
            if !here.contains_key(&self.cfg.name) {
                here.insert(self.cfg.name.clone(), Slot::Failed { until: Instant::now() });
            }
            let slot = here.get_mut(&self.cfg.name)?;
            match slot {
                Slot::Open { client, beside: b } if b.ptr_eq(&beside) && !client.is_closed() => return Some(Arc::clone(client)),
                Slot::Connecting { beside: b } if b.ptr_eq(&beside) => return None,
                Slot::Failed { until } if Instant::now() < *until => return None,
                _ => {}
            }
            if let Slot::Open { client, .. } = std::mem::replace(slot, Slot::Connecting { beside: beside.clone() }) {
                // Bound to a shared connection that is gone, or closed itself: its session
                // at the server is ended.
                runtime.spawn(async move { client.close().await });
            }
            let opener = Arc::clone(self);
            // `spawn` on the runtime of an actix arbiter (one thread) keeps the connection's
            // tasks on this thread, which is the point.
            runtime.spawn(async move {
                let options = ConnectOptions {
                    elicitation: opener.elicitation,
                    ..ConnectOptions::of(&opener.mcp, opener.startup, None)
                };
                let opened = connect(&opener.cfg, options).await;
                HERE.with(|here| {
                    let mut here = here.borrow_mut();
                    let Some(slot) = here.get_mut(&opener.cfg.name) else { return };
                    if !matches!(slot, Slot::Connecting { beside: b } if b.ptr_eq(&beside)) {
                        return;
                    }
                    *slot = match opened {
                        Ok(client) => {
                            if let Some(session) = client.remembered() {
                                let mut opened = opener.opened.lock().unwrap_or_else(|p| p.into_inner());
                                // Those of connections closed since (replaced after a restart).
                                opened.retain(Remembered::is_open);
                                opened.push(session);
                            }
                            Slot::Open {
                                client: Arc::new(client),
                                beside,
                            }
                        }
                        Err(reason) => {
                            tracing::debug!(server = %opener.cfg.name, %reason, "a thread's own connection failed; its calls use the shared one");
                            Slot::Failed {
                                until: Instant::now() + Duration::from_millis(opener.mcp.restart_backoff_ms),
                            }
                        }
                    };
                });
            });
            None
        })
    }

    /// Ends the session of every connection the threads opened (`DELETE`, those not ended
    /// already), at most `mcp.shutdown_grace_ms` in all: what toolslot does when it stops the
    /// server.
    pub(super) async fn end_all(&self) {
        let sessions = std::mem::take(&mut *self.opened.lock().unwrap_or_else(|p| p.into_inner()));
        let within = Duration::from_millis(self.mcp.shutdown_grace_ms);
        futures::future::join_all(sessions.iter().map(|s| s.end(within))).await;
    }

    /// Forgets this thread's connection after it failed a call, so the next call opens
    /// another; the shared connection is the actor's to judge.
    pub(super) fn forget_here(&self, failed: &Arc<McpClient>) {
        HERE.with(|here| {
            let mut here = here.borrow_mut();
            if let Some(slot) = here.get_mut(&self.cfg.name)
                && matches!(slot, Slot::Open { client, .. } if Arc::ptr_eq(client, failed))
            {
                *slot = Slot::Failed { until: Instant::now() };
            }
        });
    }
}

/// One server's connection on one thread.
enum Slot {
    /// Being opened beside this shared connection (weak: the allocation outlives it, so
    /// no later connection can be mistaken for it).
    Connecting { beside: Weak<McpClient> },
    /// Open beside this shared connection.
    Open { client: Arc<McpClient>, beside: Weak<McpClient> },
    /// Not to be opened again before then.
    Failed { until: Instant },
}

thread_local! {
    /// This thread's own connections, by server name.
    static HERE: RefCell<HashMap<String, Slot>> = RefCell::new(HashMap::new());
}
