//! Where a session's events go: the running submission's stream, and live subscribers (UIs).

use std::sync::Mutex;

use tokio::sync::{broadcast, mpsc};
use toolslot::event::PipelineEvent;

/// A session's event sink. Every stage emits into it; the host reads the submission's stream
/// and, if it subscribed, the live one.
#[derive(Debug)]
pub struct EventSink {
    /// One lock for both sinks, taken once per event; only the session's own thread emits,
    /// so it is not contended.
    sinks: Mutex<Sinks>,
    /// How far a live subscriber may fall behind (`execution.live_buffer`).
    live_buffer: usize,
}

#[derive(Debug, Default)]
struct Sinks {
    /// The running submission's event stream.
    round: Option<mpsc::UnboundedSender<PipelineEvent>>,
    /// Every event of the session, for UIs; made on the first subscription, since most
    /// sessions never have a watcher and a channel's buffer costs memory per session.
    live: Option<broadcast::Sender<PipelineEvent>>,
}

impl EventSink {
    /// A sink whose live subscribers may fall `live_buffer` events behind.
    pub fn new(live_buffer: usize) -> Self {
        Self {
            sinks: Mutex::new(Sinks::default()),
            live_buffer: live_buffer.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sinks> {
        // A panic while it was held cannot leave it half-changed: each change is one store.
        self.sinks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends an event to the running submission's stream and to live subscribers.
    pub fn emit(&self, event: PipelineEvent) {
        let sinks = self.lock();
        if let Some(live) = sinks.live.as_ref()
            && live.receiver_count() > 0
        {
            let _ = live.send(event.clone());
        }
        if let Some(tx) = sinks.round.as_ref() {
            let _ = tx.send(event);
        }
    }

    /// A receiver of every event from now on. Subscribers that fall behind lose the oldest
    /// events; they never slow the pipeline.
    pub fn subscribe(&self) -> broadcast::Receiver<PipelineEvent> {
        self.lock()
            .live
            .get_or_insert_with(|| broadcast::channel(self.live_buffer).0)
            .subscribe()
    }

    /// Points the submission stream at `tx` (`None`: the submission is over, and its
    /// receiver ends once it has read what was sent).
    pub fn set_round(&self, tx: Option<mpsc::UnboundedSender<PipelineEvent>>) {
        self.lock().round = tx;
    }
}
