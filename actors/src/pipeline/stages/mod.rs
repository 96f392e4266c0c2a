//! The five stages of a session's chain, each an actix actor under a supervisor, in the
//! order a round passes them: [`stream_assembler`] (the head), [`planner`], [`approval`],
//! [`batch_executor`], [`post_processor`] (the tail).
//!
//! A stage names only the messages of [`crate::pipeline::chain`] and holds a `Recipient` of
//! the next mailbox; no stage knows another's concrete type. Which stage follows which is
//! written once, in [`crate::pipeline::wiring`].

pub mod approval;
pub mod batch_executor;
pub mod planner;
pub mod post_processor;
pub mod stream_assembler;
