//! Planning a round: truncation gate, loop guard, approval policy and fingerprints, batches.

mod canonical;

pub use canonical::canonical_json;
