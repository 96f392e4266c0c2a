//! Remote execution over NATS JetStream: the dispatcher's [`RemoteHub`] and `toolslot worker`.
//!
//! Only execution moves: the pipeline stays in the dispatcher, and a routed tool's call is
//! handed by its `RemoteTool` (in the slot) to the hub, which queues it for a worker of the
//! tool's pool and waits for its record. See docs/ARCHITECTURE.md, "Distributed".

pub mod broker;
mod hub;
pub mod records;
pub mod sessions;
mod trace;
mod worker;
mod worker_session;

pub use broker::{Broker, BrokerError};
pub use hub::RemoteHub;
pub use sessions::{DurableSession, LeaseError, SessionStore};
pub use worker::{WorkerError, WorkerOptions, run_worker};
