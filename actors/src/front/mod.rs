//! The front ends: [`server`] (`toolslot serve`, the HTTP API and the approval console),
//! [`mcp_server`] (`toolslot mcp`, toolslot as an MCP server) and [`cli`] (the `toolslot`
//! command line, which starts the servers among other things) and [`embed`] (the pipeline
//! in another program's process, under the Python package). They only drive the
//! [`crate::host`] room; no decision is made here.

pub mod cli;
pub mod embed;
pub mod mcp_server;
pub mod server;
pub mod telemetry;
