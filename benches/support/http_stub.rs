//! A plain HTTP/1.1 endpoint for benches and tests: it reads each request whole (head, then a
//! `content-length` body), answers every one with the same bytes and keeps the connection, and
//! counts the connections it accepted. Shared by `benches/telemetry_cost.rs` (an OTLP endpoint
//! that discards) and the unit tests of `src/mcp/http.rs` (which count connections).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Serves `response` to every request on a port of its own; returns `http://ADDR` and the
/// count of connections accepted so far.
pub fn serve(response: &'static [u8]) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port for the endpoint");
    let url = format!("http://{}", listener.local_addr().expect("its address"));
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    std::thread::spawn(move || {
        for mut conn in listener.incoming().map_while(Result::ok) {
            count.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let Ok(read) = conn.try_clone() else { return };
                let mut reader = BufReader::new(read);
                while let Some(length) = head(&mut reader) {
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() || conn.write_all(response).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, accepted)
}

/// Reads a request's head up to its blank line; its `content-length` (0 when none), or `None`
/// once the connection closed.
fn head(reader: &mut impl BufRead) -> Option<usize> {
    let mut length = 0;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        if line == "\r\n" {
            return Some(length);
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
    }
}
