//! The Rust side of `benches/python_round.py`: the same rounds through the same embedded
//! front end, driven from Rust, with host tool calls answered in Rust, so the bench's ratio is
//! what Python (the GIL, events as objects, the tool call into Python) adds.

use std::time::Instant;

use pyo3::prelude::*;
use toolslot_actors::front::embed::Item;

use crate::errors::{same_process, to_py};
use crate::guard;
use crate::slot::NativeSlot;

/// Runs `rounds` rounds of `body` in `session` from Rust, answering every host tool call with
/// an empty result; the seconds they took, all together.
#[pyfunction]
pub fn bench_rust_rounds(py: Python<'_>, slot: PyRef<'_, NativeSlot>, session: &str, body: Vec<u8>, rounds: usize) -> PyResult<f64> {
    guard(|| {
        same_process(slot.pid)?;
        let embedded = &slot.embedded;
        py.detach(|| {
            let start = Instant::now();
            for _ in 0..rounds {
                let round = embedded.submit(session, None)?;
                round.push(body.clone());
                round.finish();
                while let Some(item) = round.next() {
                    match item {
                        Item::Call(call) => call.finish(Ok(String::new())),
                        Item::Event(_) => {}
                    }
                }
            }
            Ok(start.elapsed().as_secs_f64())
        })
        .map_err(to_py)
    })
}
