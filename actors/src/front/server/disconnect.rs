//! A round whose client went away: its answer stream dropped becomes the cancellation of its
//! submission, after a grace for a client that follows the session's events instead.
//!
//! actix-web learns that a client left only when a write to it fails (a pending stream is not
//! dropped otherwise), so a round's answer stream writes an SSE comment after
//! `server.stream_keepalive_ms` of silence. When actix then drops the stream before its end,
//! [`RoundStream`]'s `Drop` starts the grace on the session's thread: once
//! `server.disconnect_grace_ms` has passed with the submission still running and nobody reading
//! `GET /v1/sessions/{id}/events`, the submission is cancelled by its number (never the next
//! one). While a reader stays, the grace starts over each time it passes.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::web::Bytes;
use futures::Stream;

use crate::host::dispatcher::Dispatcher;
use crate::pipeline::turn::SubmissionState;

/// Who reads each session's live events (`GET /v1/sessions/{id}/events`) now.
#[derive(Debug, Default)]
pub struct Watchers {
    counts: Mutex<HashMap<String, usize>>,
}

impl Watchers {
    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        // Each change is one insert or remove: a panic cannot leave it half-changed.
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts a reader of session `id` until the returned guard is dropped.
    pub fn watch(self: &Arc<Self>, id: &str) -> Watching {
        *self.counts().entry(id.to_string()).or_insert(0) += 1;
        Watching {
            watchers: Arc::clone(self),
            id: id.to_string(),
        }
    }

    /// Whether anyone reads session `id`'s live events.
    pub fn watched(&self, id: &str) -> bool {
        self.counts().get(id).is_some_and(|n| *n > 0)
    }
}

/// A reader of a session's live events, counted while it lives.
#[derive(Debug)]
pub struct Watching {
    watchers: Arc<Watchers>,
    id: String,
}

impl Drop for Watching {
    fn drop(&mut self) {
        let mut counts = self.watchers.counts();
        if let Some(n) = counts.get_mut(&self.id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.id);
            }
        }
    }
}

/// What to cancel when a round's answer stream is dropped before its end.
pub struct Abandon {
    /// The dispatcher holding the session.
    pub dispatcher: Arc<Dispatcher>,
    /// Readers of live events, which keep the round running.
    pub watchers: Arc<Watchers>,
    /// The session.
    pub session: String,
    /// The submission the stream answers.
    pub number: u64,
    /// `server.disconnect_grace_ms`.
    pub grace: Duration,
    /// `server.stream_keepalive_ms`: a reader that left is noticed no sooner.
    pub recheck: Duration,
}

impl Abandon {
    /// Waits out the grace (again while someone reads the session's events, or while the
    /// submission still waits for its turn), then cancels the submission if it still runs.
    async fn run(self) {
        let mut wait = self.grace;
        loop {
            tokio::time::sleep(wait).await;
            // Checked again no more often than the keep-alive notices a reader leaving.
            wait = self.grace.max(self.recheck);
            match self.dispatcher.submission_state(&self.session, self.number) {
                Err(_) | Ok(SubmissionState::Over) => return,
                Ok(SubmissionState::Waiting) => continue,
                Ok(SubmissionState::Running) => {}
            }
            if self.watchers.watched(&self.session) {
                continue;
            }
            if let Ok(true) = self.dispatcher.cancel_submission(&self.session, self.number) {
                tracing::info!(session = %self.session, submission = self.number, "round cancelled: its client went away");
            }
            return;
        }
    }
}

/// A round's answer stream: the events as SSE frames, a comment after each silence of the
/// keep-alive period, and, when dropped before its end, the grace that ends in cancellation.
pub struct RoundStream<S> {
    inner: S,
    keepalive: Option<(Duration, Pin<Box<tokio::time::Sleep>>)>,
    ended: bool,
    abandon: Option<Abandon>,
}

impl<S> RoundStream<S> {
    /// `inner`'s frames, a comment after `keepalive` of silence (zero: none), and `abandon`
    /// started if the stream is dropped before `inner` ends (`None`: nothing is cancelled).
    pub fn new(inner: S, keepalive: Duration, abandon: Option<Abandon>) -> Self {
        Self {
            inner,
            keepalive: (!keepalive.is_zero()).then(|| (keepalive, Box::pin(tokio::time::sleep(keepalive)))),
            ended: false,
            abandon,
        }
    }
}

/// The comment written after a silence: clients ignore it (SSE comments carry no event).
const KEEPALIVE: &[u8] = b": keepalive\n\n";

impl<S> Stream for RoundStream<S>
where
    S: Stream<Item = Result<Bytes, actix_web::Error>> + Unpin,
{
    type Item = Result<Bytes, actix_web::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_next(cx) {
            Poll::Ready(Some(item)) => {
                if let Some((period, sleep)) = this.keepalive.as_mut() {
                    sleep.as_mut().reset(tokio::time::Instant::now() + *period);
                }
                Poll::Ready(Some(item))
            }
            Poll::Ready(None) => {
                this.ended = true;
                Poll::Ready(None)
            }
            Poll::Pending => {
                let Some((period, sleep)) = this.keepalive.as_mut() else {
                    return Poll::Pending;
                };
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                sleep.as_mut().reset(tokio::time::Instant::now() + *period);
                Poll::Ready(Some(Ok(Bytes::from_static(KEEPALIVE))))
            }
        }
    }
}

impl<S> Drop for RoundStream<S> {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        if let Some(abandon) = self.abandon.take() {
            tracing::info!(session = %abandon.session, submission = abandon.number, "a round's client went away");
            // On the session's thread: a drop cannot wait, and the HTTP worker's runtime may be
            // stopping.
            let dispatcher = Arc::clone(&abandon.dispatcher);
            let session = abandon.session.clone();
            let _ = dispatcher.run_beside(&session, abandon.run());
        }
    }
}
