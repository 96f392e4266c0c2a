//! What lies outside the process and is reached through a connection: MCP servers
//! ([`mcp`]), language servers ([`lsp`]) and the remote workers' bus ([`remote`]).
//!
//! The lowest room of the crate: nothing here knows the pipeline or the dispatcher. Each
//! source implements a trait of the slot (`McpCaller`, `RemoteCaller`) or is asked by the
//! pipeline for what it adds (diagnostics after an edit).

pub mod lsp;
pub mod mcp;
pub mod remote;
