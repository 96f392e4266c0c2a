//! The pipeline: a session's chain of five supervised stages, and what they share.
//!
//! ```text
//! host ─Submit─▶ StreamAssembler ─Assembled─▶ Planner ─Planned─▶ Approval ─Planned─▶ BatchExecutor ─Outcomes─▶ PostProcessor ─events─▶ host
//!                                                │                                         ▲
//!                                                └─────────────── Speculate ───────────────┘
//! ```
//!
//! Read in this order:
//! - [`chain`]: the messages between the stages (and into the head), the vocabulary of the
//!   whole room;
//! - [`session`]: what a session's stages share ([`session::SessionShared`]), with the pieces it
//!   holds: [`sink`] (where events go), [`turn`] (which submission holds the session),
//!   [`audit`] (the session's ledger of decisions), [`inputs`] (MCP servers' questions);
//! - [`stage`]: the panic boundary every stage's handler runs in;
//! - [`stages`]: the five stages, each of which only moves data between slot functions, with
//!   [`hooking`] (pre and post hooks, used by approval and the executor) and [`round_ledger`]
//!   (the tail's per-round bookkeeping that completes each round with exactly one result per
//!   call; not the audit ledger);
//! - [`wiring`]: the one place that knows every concrete stage and starts the chain;
//! - [`submission`]: a submission's start, cancellation and close, from the host's side.
//!
//! Nothing here knows the dispatcher or the front ends (`crate::host`, `crate::front`).

pub mod audit;
pub mod chain;
pub mod hooking;
pub mod inputs;
pub mod round_ledger;
pub mod session;
pub mod sink;
pub(crate) mod stage;
pub mod stages;
pub mod submission;
pub mod turn;
pub mod wiring;
