//! toolslot-actors — the toolslot pipeline as supervised actix actors, and the binary.
//!
//! The slot crate (`toolslot`) holds every decision as a plain function; this crate owns
//! state, ordering and lifecycle. Each session has five stages — [`stream_assembler`],
//! [`planner`], [`approval`], [`batch_executor`], [`post_processor`] — each an actor under a
//! supervisor, wired into a chain ([`stages`]): each stage forwards typed messages
//! ([`chain`]) to the next one's mailbox, and the tail's [`ledger`] completes each round.
//! A host holds the [`Dispatcher`]; a submission's start and cancellation are in
//! [`submission`].
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

pub mod approval;
pub mod audit;
pub mod batch_executor;
pub mod chain;
pub mod dispatcher;
pub mod hooking;
pub mod inputs;
pub mod ledger;
pub mod lsp;
pub mod mcp;
pub mod planner;
pub mod post_processor;
pub mod remote;
pub mod server;
pub mod session;
mod session_table;
pub mod sink;
mod stage;
pub mod stages;
pub mod stream_assembler;
pub mod subagent;
pub mod submission;
pub mod toolset;

pub use approval::HostDecision;
pub use dispatcher::{DispatchError, Dispatcher};
pub use session::{SessionOptions, Stage};
pub use stage::StageError;
pub use subagent::{AgentRunner, RecordedRunner, Turn};
pub use submission::RoundInput;
pub use toolset::{Toolset, ToolsetOptions, build_toolset, build_toolset_with, shutdown_servers};
