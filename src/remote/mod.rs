//! Remote tools: calls of routed tools run on worker processes instead of beside the pipeline.
//!
//! The slot holds the decisions and the data: which pool a tool is routed to ([`route`]),
//! what travels between a dispatcher and a worker ([`wire`]) and how it is signed ([`seal`]), and [`RemoteTool`], the
//! `ToolSpec` whose `run` hands the call to a [`RemoteCaller`]. The caller (NATS JetStream
//! work queues, call records and the object store) lives in the actors crate, as MCP's
//! `McpCaller` does: the slot holds no connection and spawns nothing.

pub mod route;
pub mod seal;
pub mod session_record;
mod tool;
pub mod wire;

pub use route::{Affinity, Routes, affinity};
pub use tool::{AnnouncedSpec, RemoteAnswer, RemoteCaller, RemoteProgress, RemoteTool, TaskOwner};
