//! The economics of results: head/tail truncation, the overflow store, external content.
//!
//! A 2 MB build log would push the conversation out of the model's window, so long output
//! keeps its first and last bytes, rescues the lines that matter from the middle, and says
//! how much was cut; the full text goes to the overflow store, where retrieve_tool_result can
//! read it back in slices. A structured result too large to read whole is kept under a
//! handle and summarized by its shape (`handles`).

mod atomic;
mod capture;
mod envelope;
mod finish;
pub mod handles;
mod media;
mod overflow;
mod truncate;

pub use atomic::write_atomic;
pub use capture::{Capture, CaptureLimits, Captured, Tail, read_both};
pub use envelope::{neutralize, random_hex, wrap_external};
pub use finish::{FinishContext, Finished, Overflow, counts_as_failure, finish_call, needs_truncation};
pub use overflow::{OverflowError, OverflowStore, OverflowWriter, SavedObserver, Slice, is_handle};
pub use truncate::{Budget, Truncated, truncate};
