//! MCP servers' tools in the slot: naming, capability policy, result mapping, the client.
//!
//! A server's tools become ordinary [`ToolSpec`](crate::tool::ToolSpec)s ([`McpTool`]) that
//! call through a [`McpCaller`]: the actors crate supplies one per server, a supervised actor
//! that starts, restarts and reconnects the server, so the slot never holds a process.
//! [`client::McpClient`] is the rmcp connection that actor drives.

mod cache;
pub mod client;
pub mod elicitation;
mod frame;
mod http;
pub mod lines;
mod naming;
mod policy;
mod result;
pub mod stdio;
mod tool;

pub use cache::ToolListCache;
pub use frame::TOO_DEEP;
pub use naming::{hashed_name, server_prefixes, tool_name};
pub use policy::capabilities_for;
pub use result::{describe_content, map_call_result};
pub use tool::{
    CallHooks, DISCOVERY_HELPERS, InputSink, ListMcpResources, ListingLimits, McpCallError, McpCaller, McpTool, McpToolDef, ProgressSink,
    ReadMcpResource, ResourceSource, entry_name, tool_from_entry, tools_from_listing,
};
