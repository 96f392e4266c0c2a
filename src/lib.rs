//! toolslot — the slot: host-agnostic governance of an LLM agent's tool calls.
//!
//! An agent service streams a model's response in; toolslot assembles every tool call,
//! repairs what a shaky model broke, refuses forgeries, guards against loops, asks for
//! approval where a call could do harm, runs calls (read-only ones in parallel), truncates
//! huge outputs without losing them, and hands back exactly one result per call.
//!
//! # Brief overview
//! This crate is the *slot*: plain functions and types, no actors, no task spawning.
//! Tools of every source implement [`tool::ToolSpec`] and are admitted by a
//! [`registry::RegistryBuilder`] into a [`registry::Registry`], whose
//! [`registry::Catalog`] is what the model sees. The pipeline that drives rounds through
//! these functions lives in the `toolslot-actors` crate.
//!
//! See docs/ARCHITECTURE.md for the map.

#![warn(missing_docs)]

pub mod builtin;
pub mod canonical;
pub mod child_env;
pub mod child_group;
pub mod config;
pub mod event;
pub mod extension;
pub mod forgery;
pub mod hex;
pub mod hooks;
pub mod ledger;
pub mod lsp;
pub mod mcp;
pub mod notice;
pub mod observe;
pub mod output;
pub mod paths;
pub mod plan;
pub mod policy;
pub mod project_policy;
pub mod registry;
pub mod regular_file;
pub mod remote;
pub mod repair;
pub mod results;
pub mod sandbox;
pub mod schema;
pub mod session;
pub mod shell;
pub mod stream;
pub mod telemetry;
pub mod tls;
pub mod tool;
pub mod tool_name;
