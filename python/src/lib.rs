//! `toolslot._native`: the Python binding of the embedded pipeline
//! (`toolslot_actors::front::embed`), a front end beside the CLI and the server over the same
//! dispatcher.
//!
//! This layer only converts: Python values to the embedding's options, events to JSON text
//! (read into typed events by `toolslot/_events.py`), and every failure to a
//! `toolslot.ToolslotError` subclass. The Python API users see is in `toolslot/`.
//!
//! # Panics
//! None crosses into Python: every entry point runs under [`guard`], which turns a panic into
//! `toolslot.InternalError`, and a panic on the runtime thread ends the runtime, which every
//! later call reports as `toolslot.StoppedError`.

mod bench;
mod errors;
mod round;
mod slot;

use pyo3::prelude::*;

/// The module `toolslot._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<slot::NativeSlot>()?;
    m.add_class::<round::NativeRound>()?;
    m.add_class::<round::NativeCall>()?;
    m.add_function(wrap_pyfunction!(round::results_as_messages, m)?)?;
    m.add_function(wrap_pyfunction!(bench::bench_rust_rounds, m)?)?;
    errors::register(m)?;
    Ok(())
}

/// Runs `f`, turning a panic into `toolslot.InternalError`, so that none unwinds into Python.
pub(crate) fn guard<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        Err(errors::InternalError::new_err(format!("toolslot failed inside: {what}")))
    })
}
