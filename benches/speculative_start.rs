//! Speculative start: a paced stream (fixed bytes per millisecond) with a read-only call early
//! in the response and text after it; the time from the stream's last byte to the round's
//! results, with speculative start on and off, side by side in one run.
//!
//! `cargo bench --bench speculative_start -- [--bytes-per-ms N] [--text-bytes N] [--runs N]`

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolslot::event::PipelineEvent;
use toolslot_actors::{Dispatcher, RoundInput, SessionOptions};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// An Anthropic response: one call to `sleep20ms` (a slow read), then `text_bytes` of text.
fn body(text_bytes: usize) -> Vec<u8> {
    let mut out = format!(
        "event: message_start\ndata: {}\n\n",
        json!({"type": "message_start", "message": {}})
    );
    out.push_str(&format!("event: content_block_start\ndata: {}\n\n", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_0", "name": "sleep20ms", "input": {}}})));
    out.push_str(&format!(
        "event: content_block_delta\ndata: {}\n\n",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"i\": 1}"}})
    ));
    out.push_str(&format!(
        "event: content_block_stop\ndata: {}\n\n",
        json!({"type": "content_block_stop", "index": 0})
    ));
    out.push_str(&format!(
        "event: content_block_start\ndata: {}\n\n",
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}})
    ));
    let piece = "While that runs, here is my reasoning about the next step. ";
    let mut written = 0;
    while written < text_bytes {
        out.push_str(&format!(
            "event: content_block_delta\ndata: {}\n\n",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": piece}})
        ));
        written += piece.len();
    }
    out.push_str(&format!(
        "event: content_block_stop\ndata: {}\n\n",
        json!({"type": "content_block_stop", "index": 1})
    ));
    out.push_str(&format!(
        "event: message_delta\ndata: {}\n\nevent: message_stop\ndata: {}\n\n",
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}}),
        json!({"type": "message_stop"})
    ));
    out.into_bytes()
}

/// Sends `body` at `rate` bytes per millisecond; returns last byte → round_complete.
async fn one(d: &Dispatcher, s: &str, body: &[u8], rate: usize) -> Duration {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Result<Vec<u8>, std::io::Error>>();
    let stream = Box::pin(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)));
    let mut events = d.submit_round(s, RoundInput::Bytes(stream)).expect("a free session");
    let chunks: Vec<Vec<u8>> = body.chunks(rate.max(1)).map(<[u8]>::to_vec).collect();
    let pacer = actix_rt::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(1));
        for c in chunks {
            tick.tick().await;
            let _ = tx.send(Ok(c));
        }
        Instant::now()
    });
    let mut done = None;
    while let Some(e) = events.recv().await {
        if let PipelineEvent::RoundComplete { results, .. } = e {
            assert_eq!(results.len(), 1);
            assert!(!results[0].is_error, "{}", results[0].content);
            done = Some(Instant::now());
        }
    }
    let last_byte = pacer.await.expect("the pacer finishes");
    done.expect("a round_complete").saturating_duration_since(last_byte)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let rate = arg("--bytes-per-ms", 200);
    let text = arg("--text-bytes", 12_000);
    let runs = arg("--runs", 15);
    let dir = tempfile::tempdir().expect("a temporary folder");
    let body = body(text);
    let system = actix_rt::System::new();
    let mut medians = Vec::new();
    for speculative in [true, false] {
        let mut cfg = (*support::config(&dir.path().join("overflow"), 0)).clone();
        cfg.execution.speculative_start = speculative;
        let cfg = Arc::new(cfg);
        let registry = support::registry(&cfg);
        let times = system.block_on(async {
            let d = Dispatcher::new(Arc::clone(&cfg), registry);
            let s = d.open_session(SessionOptions {
                workspace: Some(dir.path().to_path_buf()),
                ..Default::default()
            });
            let mut times = Vec::new();
            for _ in 0..runs {
                times.push(one(&d, &s, &body, rate).await);
            }
            times
        });
        let m = median(times);
        println!(
            "speculative_start={speculative}: last byte → results, median of {runs}: {m:.2?} ({} bytes at {rate} B/ms)",
            body.len()
        );
        medians.push(m);
    }
    println!("off/on = {:.1}x", medians[1].as_secs_f64() / medians[0].as_secs_f64().max(1e-6));
}
