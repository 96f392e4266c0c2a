//! toolslot-actors — the toolslot pipeline as supervised actix actors, and the binary.
//!
//! The slot crate (`toolslot`) holds every decision as a plain function; this crate owns
//! state, ordering and lifecycle: one set of stage actors per session behind the
//! `Dispatcher` handle a host holds.

#![warn(missing_docs)]
