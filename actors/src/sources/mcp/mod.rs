//! MCP servers as supervised actors, and their tools in the registry.
//!
//! Each configured server is one [`McpServerActor`] under a supervisor (`server.rs`). It owns
//! the connection and its lifecycle: Idle, Starting, Ready, Failed. A call to a server that is
//! not running starts it (after a backoff that doubles with each failed start), and calls that
//! arrive meanwhile share that one start. A call in flight when the server dies is never
//! replayed blindly: read-only tools are retried once, others get an error saying the outcome
//! is unknown. While a server is down its tools answer "unavailable"; the catalog keeps its
//! shape.
//!
//! Every listing of a server's tools (at each start, and on `notifications/tools/list_changed`)
//! goes to the [`ToolIntake`] (`intake.rs`), which appends the tools it has not seen to the
//! host's [`LiveRegistry`](toolslot::registry::LiveRegistry) and keeps the listing, so that
//! next time an optional server can start on first use (`start.rs`). [`McpServerHandle`]
//! (`handle.rs`) is what the tools call through.

mod handle;
mod intake;
mod per_thread;
mod server;
mod start;

pub use handle::McpServerHandle;
pub use intake::ToolIntake;
pub use server::{GetClient, McpServerActor, Relist, ReportDead, ServerState, Status};
pub use start::{McpSet, start_servers};
