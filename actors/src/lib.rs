//! toolslot-actors — the toolslot pipeline as supervised actix actors, and the binary.
//!
//! The slot crate (`toolslot`) holds every decision as a plain function; this crate owns
//! state, ordering and lifecycle. Each session has five stages — [`stream_assembler`],
//! [`planner`], [`approval`], [`batch_executor`], [`post_processor`] — each an actor under a
//! supervisor, driven round by round by [`round::run_submission`] behind the
//! [`Dispatcher`] handle a host holds.
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
pub mod batch_executor;
pub mod dispatcher;
pub mod mcp;
pub mod planner;
pub mod post_processor;
pub mod remote;
pub mod round;
pub mod server;
pub mod session;
mod stage;
pub mod stream_assembler;
pub mod subagent;
pub mod toolset;

pub use approval::HostDecision;
pub use dispatcher::{DispatchError, Dispatcher};
pub use round::RoundInput;
pub use session::{SessionOptions, Stage};
pub use stage::StageError;
pub use subagent::{AgentRunner, RecordedRunner, Turn};
pub use toolset::{Toolset, build_toolset, shutdown_servers};
