//! Prometheus metrics of the server, counted from the events that pass through it.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use toolslot::event::PipelineEvent;
use toolslot::notice::NoticeKind;

/// Upper bounds (seconds) of the latency histograms: from a no-op round to a long build.
const BUCKETS: &[f64] = &[0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0];

#[derive(Default)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, secs: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS.len()];
        }
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                self.counts[i] += 1;
            }
        }
        self.sum += secs;
        self.count += 1;
    }

    fn render(&self, name: &str, out: &mut String) {
        let _ = writeln!(out, "# TYPE {name} histogram");
        for (i, b) in BUCKETS.iter().enumerate() {
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {}", self.counts.get(i).copied().unwrap_or(0));
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum {}", self.sum);
        let _ = writeln!(out, "{name}_count {}", self.count);
    }
}

/// The server's counters.
#[derive(Default)]
pub struct Metrics {
    rounds: AtomicU64,
    restarts: AtomicU64,
    omitted_bytes: AtomicU64,
    overflow_bytes: AtomicU64,
    calls: Mutex<BTreeMap<(String, &'static str), u64>>,
    round_latency: Mutex<Histogram>,
    call_latency: Mutex<Histogram>,
    approval_wait: Mutex<Histogram>,
}

impl Metrics {
    /// Counts one event of a round.
    pub fn observe(&self, event: &PipelineEvent) {
        match event {
            PipelineEvent::CallFinished {
                name,
                is_error,
                duration_ms,
                ..
            } => {
                let outcome = if *is_error { "error" } else { "ok" };
                *self
                    .calls
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry((name.to_string(), outcome))
                    .or_default() += 1;
                self.call_latency
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .observe(*duration_ms as f64 / 1000.0);
            }
            PipelineEvent::RoundComplete { .. } => {
                self.rounds.fetch_add(1, Ordering::Relaxed);
            }
            PipelineEvent::Notice(n) => match n.kind {
                NoticeKind::ActorRestarted => {
                    self.restarts.fetch_add(1, Ordering::Relaxed);
                }
                NoticeKind::OutputTruncated => {
                    // The notice says "…: N bytes (M lines) left out; S bytes saved in full".
                    let number_before = |marker: &str| {
                        n.message
                            .split(marker)
                            .next()
                            .and_then(|t| t.rsplit(' ').next())
                            .and_then(|b| b.parse::<u64>().ok())
                            .unwrap_or(0)
                    };
                    self.omitted_bytes.fetch_add(number_before(" bytes ("), Ordering::Relaxed);
                    self.overflow_bytes.fetch_add(number_before(" bytes saved"), Ordering::Relaxed);
                }
                _ => {}
            },
            _ => {}
        }
    }

    /// Records a round's wall time.
    pub fn round_took(&self, d: Duration) {
        self.round_latency
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .observe(d.as_secs_f64());
    }

    /// Records how long an approval waited for the host.
    pub fn approval_waited(&self, d: Duration) {
        self.approval_wait
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .observe(d.as_secs_f64());
    }

    /// The Prometheus text exposition.
    pub fn render(&self, open_sessions: usize) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# TYPE toolslot_open_sessions gauge\ntoolslot_open_sessions {open_sessions}");
        let _ = writeln!(
            out,
            "# TYPE toolslot_rounds_total counter\ntoolslot_rounds_total {}",
            self.rounds.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# TYPE toolslot_actor_restarts_total counter\ntoolslot_actor_restarts_total {}",
            self.restarts.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# TYPE toolslot_output_omitted_bytes_total counter\ntoolslot_output_omitted_bytes_total {}",
            self.omitted_bytes.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# TYPE toolslot_overflow_bytes_total counter\ntoolslot_overflow_bytes_total {}",
            self.overflow_bytes.load(Ordering::Relaxed)
        );
        let _ = writeln!(out, "# TYPE toolslot_calls_total counter");
        for ((tool, outcome), n) in self.calls.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = writeln!(out, "toolslot_calls_total{{tool=\"{tool}\",outcome=\"{outcome}\"}} {n}");
        }
        self.round_latency
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .render("toolslot_round_seconds", &mut out);
        self.call_latency
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .render("toolslot_call_seconds", &mut out);
        self.approval_wait
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .render("toolslot_approval_wait_seconds", &mut out);
        if let Some((exported, failed, dropped, queued)) = crate::front::telemetry::span_counts() {
            let _ = writeln!(
                out,
                "# TYPE toolslot_telemetry_spans_exported_total counter\ntoolslot_telemetry_spans_exported_total {exported}\n\
                 # TYPE toolslot_telemetry_spans_failed_total counter\ntoolslot_telemetry_spans_failed_total {failed}\n\
                 # TYPE toolslot_telemetry_spans_dropped_total counter\ntoolslot_telemetry_spans_dropped_total {dropped}\n\
                 # TYPE toolslot_telemetry_spans_undelivered gauge\ntoolslot_telemetry_spans_undelivered {queued}"
            );
        }
        out
    }
}
