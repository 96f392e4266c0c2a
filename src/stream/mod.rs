//! From provider bytes to assembled tool calls.
//!
//! [`sse::SseParser`] frames bytes into events, a [`dialect::Decoder`] turns each into
//! normalized [`StreamEvent`]s, and the [`Assembler`] buffers argument fragments per call and
//! reports each call when its arguments are complete and each round when it ends.

pub mod assembler;
pub mod dialect;
pub mod event;
pub mod shape;
pub mod sse;

pub use assembler::{Assembler, AssemblyEvent, RawCall, RoundEnd};
pub use dialect::Dialect;
pub use event::{StopReason, StreamEvent};
