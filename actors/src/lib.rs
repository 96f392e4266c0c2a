//! toolslot-actors — the toolslot pipeline as supervised actix actors, and the binary.
//!
//! The slot crate (`toolslot`) holds every decision as a plain function; this crate owns
//! state, ordering and lifecycle. Its rooms, lowest first (a room imports only from rooms
//! below it; `tests/suite/tidy.rs` enforces it):
//!
//! 1. [`sources`]: what lies outside the process: MCP servers, language servers, the remote
//!    workers' bus.
//! 2. [`pipeline`]: a session's five stages — stream assembler, planner, approval, batch
//!    executor, post-processor — each an actor under a supervisor, wired into one chain
//!    ([`pipeline::wiring`]), the messages between them ([`pipeline::chain`]), the session's
//!    shared state and its submissions.
//! 3. [`host`]: what a host holds: the [`Dispatcher`] that spreads sessions over threads, and
//!    the [`Toolset`] it is given (built-ins, extensions, MCP servers, sub-agents).
//! 4. [`front`]: the front ends, `toolslot serve` (HTTP) and the command line.
//!
//! # Example
//! ```no_run
//! use std::sync::Arc;
//! use toolslot::{config::Config, registry::RegistryBuilder};
//! use toolslot_actors::{Dispatcher, RoundInput, SessionOptions};
//!
//! actix_rt::System::new().block_on(async {
//!     let cfg = Arc::new(Config::builtin());
//!     let registry = Arc::new(RegistryBuilder::new(cfg.clone()).extend(toolslot::builtin::enabled(&cfg)).build());
//!     let dispatcher = Dispatcher::new(cfg, registry);
//!     let session = dispatcher.open_session(SessionOptions::default());
//!     let body = b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n".to_vec();
//!     let stream = futures::stream::iter([Ok(body)]);
//!     let mut events = dispatcher.submit_round(&session, RoundInput::Bytes(Box::pin(stream))).unwrap();
//!     while let Some(event) = events.recv().await {
//!         println!("{}", serde_json::to_string(&event).unwrap());
//!     }
//! });
//! ```

#![warn(missing_docs)]

pub mod front;
pub mod host;
pub mod pipeline;
pub mod sources;

pub use host::dispatcher::{DispatchError, Dispatcher};
pub use host::subagent::{AgentRunner, RecordedRunner, Turn};
pub use host::toolset::{Toolset, ToolsetOptions, build_toolset, build_toolset_with, shutdown_servers};
pub use pipeline::chain::RoundInput;
pub use pipeline::session::{SessionOptions, Stage};
pub use pipeline::stage::StageError;
pub use pipeline::stages::approval::HostDecision;
pub use pipeline::turn::SubmissionState;
