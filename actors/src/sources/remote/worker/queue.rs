//! A worker's pulls from one of its queues, over an inbox it keeps. async-nats' `fetch` and
//! `batch` subscribe to a new inbox for every pull and unsubscribe after it: a subscribe and an
//! unsubscribe that the server (and the worker) handled on every call. A pull here is the same
//! request (JetStream's `CONSUMER.MSG.NEXT`), answered on the queue's own inbox, and read to
//! its end as async-nats reads a batch: until it has brought as many calls as it asked for or
//! the server says it has no more (`404`, `408`), so no reply of one pull is left for the next.

use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::consumer::pull::BatchConfig;
use async_nats::jetstream::{self, Context};
use async_nats::{StatusCode, Subject, Subscriber};
use futures::StreamExt;

use super::super::broker::Broker;

/// How long past a pull's own wait its end may take to arrive before the pull is given up (a
/// reply lost with the connection). async-nats allows a batch the same.
const LATE_END: Duration = Duration::from_secs(5);

/// One of a worker's queues, with the inbox its pulls are answered on.
pub(super) struct Queue {
    consumer: PullConsumer,
    context: Context,
    inbox: Subject,
    replies: Subscriber,
}

impl Queue {
    /// Subscribes to the queue's inbox on `broker`'s connection, once.
    pub(super) async fn open(consumer: PullConsumer, broker: &Broker) -> Result<Self, String> {
        let inbox = Subject::from(broker.client.new_inbox());
        let replies = broker.client.subscribe(inbox.clone()).await.map_err(|e| e.to_string())?;
        Ok(Self {
            consumer,
            context: broker.js.clone(),
            inbox,
            replies,
        })
    }

    /// Asks for up to `max` calls, those queued now (`wait` none) or arriving within `wait`,
    /// and hands each to `take` as it arrives.
    pub(super) async fn pull(
        &mut self,
        max: usize,
        wait: Option<Duration>,
        mut take: impl FnMut(jetstream::Message),
    ) -> Result<(), String> {
        let request = BatchConfig {
            batch: max,
            expires: wait,
            no_wait: wait.is_none(),
            ..BatchConfig::default()
        };
        self.consumer
            .request_batch(request, self.inbox.clone())
            .await
            .map_err(|e| e.to_string())?;
        let until = tokio::time::Instant::now() + wait.unwrap_or_default() + LATE_END;
        let mut left = max;
        while left > 0 {
            let reply = tokio::select! {
                reply = self.replies.next() => reply.ok_or("the queue's inbox was closed")?,
                () = tokio::time::sleep_until(until) => return Err("the pull's end never came".into()),
            };
            match reply.status.unwrap_or(StatusCode::OK) {
                StatusCode::OK => {
                    left -= 1;
                    take(jetstream::Message {
                        message: reply,
                        context: self.context.clone(),
                    });
                }
                StatusCode::IDLE_HEARTBEAT => {}
                StatusCode::NOT_FOUND | StatusCode::TIMEOUT => return Ok(()),
                status => return Err(format!("the server ended the pull ({status}: {:?})", reply.description)),
            }
        }
        Ok(())
    }
}
