//! The bounded queue between the layer and the export thread, and that thread.
//!
//! Why not the SDK's `BatchSpanProcessor`: it takes the SDK's `SpanData` (see `record.rs` why
//! toolslot's spans are not that) and pays a channel send per span. Here a span's end is a
//! push under an uncontended lock; the export thread takes the whole queue at once (handing
//! the emptied vector back, so pushes do not grow a new one) when a batch is full or the delay
//! has passed. A full queue drops the span and counts it: a slow or dead collector never
//! makes a pipeline thread wait. Exported records come back blank to a free list the layer
//! records new spans into: a span then costs no allocation, and no memory made on a pipeline
//! thread is freed on the export thread (where glibc would take the pipeline's arena lock).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::Stats;
use super::layer::SpanSink;
use super::record::{Sample, SpanRecord};

/// What sends a batch: the OTLP encoder and its HTTP client; and what records samples.
pub(super) trait Export: Send + 'static {
    /// Sends `batch`; the error says why it was not delivered.
    fn export(&mut self, batch: &[SpanRecord]) -> Result<(), String>;
    /// Records histogram samples queued since the last call.
    fn record(&mut self, _samples: &[Sample]) {}
}

/// The queue's limits (`[telemetry]` `max_queue_size`, `max_export_batch_size`,
/// `schedule_delay_ms`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub max_queue: usize,
    pub batch: usize,
    pub delay: Duration,
}

/// A record whose text grew past this (content captured) is freed instead of kept for reuse.
/// The free list holds at most one batch of records.
const KEEP_TEXT: usize = 4096;

struct Queue {
    spans: Vec<SpanRecord>,
    /// Histogram samples, recorded at each wake-up whatever their number.
    samples: Vec<Sample>,
    /// Blank records for new spans.
    free: Vec<SpanRecord>,
    /// An emptied vector handed back by the export thread.
    spare: Vec<SpanRecord>,
    closing: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    /// Wakes the export thread (a full batch, closing).
    wake: Condvar,
    limits: Limits,
    stats: Arc<Stats>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A panic while holding this lock leaves a queue that is still whole.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The span sink the layer writes to.
pub(super) struct Batcher {
    shared: Arc<Shared>,
    done: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
}

impl Batcher {
    /// Starts the export thread.
    pub fn start(exporter: impl Export, limits: Limits, stats: Arc<Stats>) -> std::io::Result<Batcher> {
        let limits = Limits {
            max_queue: limits.max_queue.max(1),
            batch: limits.batch.clamp(1, limits.max_queue.max(1)),
            delay: limits.delay,
        };
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                spans: Vec::with_capacity(limits.batch),
                samples: Vec::new(),
                spare: Vec::with_capacity(limits.batch),
                free: Vec::new(),
                closing: false,
            }),
            wake: Condvar::new(),
            limits,
            stats,
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let inner = Arc::clone(&shared);
        std::thread::Builder::new().name("otlp-export".into()).spawn(move || {
            run(&inner, exporter);
            let _ = tx.send(());
        })?;
        Ok(Batcher {
            shared,
            done: Mutex::new(Some(rx)),
        })
    }

    /// Queues an ended span, or drops it (counted) when the queue is full.
    pub fn push(&self, span: SpanRecord) {
        let stats = &self.shared.stats;
        stats.ended.fetch_add(1, Ordering::Relaxed);
        let mut q = self.shared.lock();
        if q.closing || q.spans.len() >= self.shared.limits.max_queue {
            drop(q);
            stats.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        q.spans.push(span);
        // The thread sleeps untimed while the queue is empty, and is woken early for a full batch.
        let wake = q.spans.len() == 1 || q.spans.len() == self.shared.limits.batch;
        drop(q);
        if wake {
            self.shared.wake.notify_one();
        }
    }

    /// Queues a histogram sample (dropped past `max_queue` waiting samples, as spans are).
    pub fn sample(&self, sample: Sample) {
        let mut q = self.shared.lock();
        if q.closing || q.samples.len() >= self.shared.limits.max_queue {
            return;
        }
        q.samples.push(sample);
        let first = q.samples.len() == 1 && q.spans.is_empty();
        drop(q);
        if first {
            self.shared.wake.notify_one();
        }
    }

    /// A blank record, reused where one is free.
    pub fn blank(&self) -> SpanRecord {
        self.shared.lock().free.pop().unwrap_or_else(|| SpanRecord::blank(""))
    }

    /// Sends what is queued and stops the export thread, waiting at most `timeout` for it.
    pub fn shutdown(&self, timeout: Duration) {
        self.shared.lock().closing = true;
        self.shared.wake.notify_one();
        let rx = self.done.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(rx) = rx {
            let _ = rx.recv_timeout(timeout);
        }
    }
}

impl SpanSink for Batcher {
    fn end(&self, span: SpanRecord) {
        self.push(span);
    }
    fn blank(&self) -> SpanRecord {
        Batcher::blank(self)
    }
}

/// The export thread: a batch when one is full, the queue when the delay passed, everything
/// when closing.
fn run(shared: &Shared, mut exporter: impl Export) {
    let limits = shared.limits;
    let mut q = shared.lock();
    loop {
        while q.spans.is_empty() && q.samples.is_empty() && !q.closing {
            q = shared.wake.wait(q).unwrap_or_else(|p| p.into_inner());
        }
        if q.spans.is_empty() && q.samples.is_empty() {
            return;
        }
        // The delay runs from the first span queued.
        let deadline = Instant::now() + limits.delay;
        while q.spans.len() < limits.batch && !q.closing {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            q = shared.wake.wait_timeout(q, left).map_or_else(|p| p.into_inner().0, |(g, _)| g);
        }
        let samples = std::mem::take(&mut q.samples);
        let mut batch = std::mem::take(&mut q.spare);
        if q.spans.len() <= limits.batch {
            std::mem::swap(&mut batch, &mut q.spans);
        } else {
            batch.extend(q.spans.drain(..limits.batch));
        }
        drop(q);
        exporter.record(&samples);
        drop(samples);
        let n = batch.len() as u64;
        match exporter.export(&batch) {
            Ok(()) => shared.stats.exported.fetch_add(n, Ordering::Relaxed),
            Err(e) => {
                if let Ok(mut last) = shared.stats.last_error.lock() {
                    *last = Some(e);
                }
                shared.stats.failed.fetch_add(n, Ordering::Relaxed)
            }
        };
        // Blank again, outside the lock; one grown large by captured content is freed instead.
        batch.retain_mut(|r| {
            r.reset();
            r.text.capacity() <= KEEP_TEXT
        });
        // The larger list becomes the free list by a swap: nothing is copied under the lock,
        // which the pipeline's threads wait on.
        q = shared.lock();
        if batch.len() > q.free.len() {
            std::mem::swap(&mut batch, &mut q.free);
        }
        drop(q);
        // The smaller list's records are freed here, outside the lock; its vector is kept
        // as the next batch's when it is the roomier.
        batch.clear();
        q = shared.lock();
        if q.spare.capacity() < batch.capacity() {
            q.spare = batch;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::StatusRecord;
    use super::*;

    struct Collect(Arc<Mutex<Vec<usize>>>, bool);

    impl Export for Collect {
        fn export(&mut self, batch: &[SpanRecord]) -> Result<(), String> {
            self.0.lock().unwrap().push(batch.len());
            if self.1 { Err("collector down".into()) } else { Ok(()) }
        }
    }

    fn span() -> SpanRecord {
        let mut s = SpanRecord::blank("s");
        s.flags = 1;
        s
    }

    fn limits(max_queue: usize, batch: usize) -> Limits {
        Limits {
            max_queue,
            batch,
            delay: Duration::from_secs(3600),
        }
    }

    #[test]
    fn full_batches_go_at_once_and_the_rest_at_shutdown() {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let stats = Arc::new(Stats::default());
        let b = Batcher::start(Collect(Arc::clone(&sent), false), limits(100, 4), Arc::clone(&stats)).unwrap();
        for _ in 0..10 {
            b.push(span());
        }
        b.shutdown(Duration::from_secs(10));
        let batches = sent.lock().unwrap().clone();
        assert_eq!(batches.iter().sum::<usize>(), 10, "{batches:?}");
        assert!(batches.iter().all(|&n| n <= 4), "{batches:?}");
        assert_eq!(stats.exported(), 10);
    }

    #[test]
    fn exported_records_come_back_blank_with_their_room() {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let b = Batcher::start(Collect(Arc::clone(&sent), false), limits(100, 1), Arc::new(Stats::default())).unwrap();
        let mut s = span();
        let t = s.keep("a tool's name");
        s.attributes.push(super::super::record::Attr {
            key: "k",
            value: super::super::record::Val::Str(t),
        });
        b.push(s);
        let back = loop {
            let r = b.blank();
            if r.text.capacity() > 0 {
                break r;
            }
            std::thread::yield_now();
        };
        assert!(back.text.is_empty() && back.attributes.is_empty() && back.attributes.capacity() > 0);
        assert_eq!(back.status, StatusRecord::Unset);
        b.shutdown(Duration::from_secs(10));
    }

    /// Says when an export starts, and holds it until the test lets it go.
    struct Gate(std::sync::mpsc::Sender<()>, std::sync::mpsc::Receiver<()>);

    impl Export for Gate {
        fn export(&mut self, _: &[SpanRecord]) -> Result<(), String> {
            let _ = self.0.send(());
            let _ = self.1.recv();
            Ok(())
        }
    }

    #[test]
    fn a_full_queue_drops_and_counts_while_the_collector_is_slow() {
        let (go, gate) = std::sync::mpsc::channel();
        let (started, starts) = std::sync::mpsc::channel();
        let stats = Arc::new(Stats::default());
        let b = Batcher::start(Gate(started, gate), limits(2, 1), Arc::clone(&stats)).unwrap();
        b.push(span());
        // The thread takes that one and waits in the export.
        starts.recv().unwrap();
        b.push(span());
        b.push(span());
        b.push(span());
        assert_eq!(stats.dropped(), 1, "the queue holds two while the export is stuck");
        for _ in 0..3 {
            go.send(()).unwrap();
        }
        b.shutdown(Duration::from_secs(10));
        assert_eq!((stats.ended(), stats.exported(), stats.dropped()), (4, 3, 1));
        b.push(span());
        assert_eq!(stats.dropped(), 2, "a span after shutdown is dropped and counted");
    }

    #[test]
    fn a_failed_export_is_counted_with_its_reason() {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let stats = Arc::new(Stats::default());
        let b = Batcher::start(Collect(Arc::clone(&sent), true), limits(100, 50), Arc::clone(&stats)).unwrap();
        b.push(span());
        b.push(span());
        b.shutdown(Duration::from_secs(10));
        assert_eq!((stats.failed(), stats.exported()), (2, 0));
        assert_eq!(stats.last_error.lock().unwrap().as_deref(), Some("collector down"));
    }
}
