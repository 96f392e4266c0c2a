//! Planning a round: truncation gate, loop guard, approval policy and fingerprints, batches.
//!
//! Every function here is a plain decision over plain data; the actors crate calls them in
//! index order and owns the state they read and update.

pub mod approval;
pub mod batches;
pub mod call;
pub mod finalize;
pub mod handles;
pub mod loop_guard;
pub mod resolve;

pub use crate::canonical::canonical_json;
pub use call::{Action, PlanContext, PlannedCall, plan_call};
pub use finalize::{Finalized, RepairMark, finalize_call, parses_strictly};
