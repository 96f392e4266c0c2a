//! Repair of what a shaky model broke: argument text ([`args`]) and tool names ([`names`]).
//!
//! Repair runs before schema validation, not after: a validation error about a trailing
//! comma teaches the model nothing it meant. The cost is that a repair can hide a real
//! mistake, so every repair is reported with the ladder step that was used.

pub mod args;
pub mod names;
mod tolerant;

pub use args::{RepairStep, Repaired, repair_arguments};
pub use names::{NameResolution, resolve_name};
