//! What a host holds: the [`dispatcher::Dispatcher`] (sessions spread over worker threads,
//! each session's stages started through [`crate::pipeline::wiring`]) and the
//! [`toolset::Toolset`] it is handed (built-ins, extensions, MCP servers, and sub-agents,
//! which are child sessions on the same dispatcher and so sit above it).
//!
//! Order inside the room: `session_table`, `workspace` ← `dispatcher` ← `subagent` ← `toolset`.

pub mod dispatcher;
mod session_table;
pub mod subagent;
pub mod toolset;
pub mod workspace;
