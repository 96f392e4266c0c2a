//! The registry of a running host: generations that only ever grow.
//!
//! Tools can arrive after start-up (an MCP server sends `notifications/tools/list_changed`,
//! a server started on first use lists more than its cached list). Sessions must see them
//! without losing the catalog bytes a provider has cached, so a new tool makes a new
//! [`Registry`] generation with the tool appended; each session adopts the newest generation
//! at the start of its next round ([`crate::registry::Catalog::adopt`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use super::Registry;
use crate::notice::Notice;
use crate::tool::ToolSpec;

/// The newest registry generation, shared by every session of a host. Cloning shares it.
#[derive(Clone, Debug)]
pub struct LiveRegistry {
    current: Arc<RwLock<Arc<Registry>>>,
    /// The newest generation's number, readable without the lock: every session asks at
    /// every submission, and a lock (or a reference count) written by every worker thread is
    /// a cache line they all fight over.
    newest: Arc<AtomicU64>,
}

impl From<Arc<Registry>> for LiveRegistry {
    fn from(registry: Arc<Registry>) -> Self {
        Self {
            newest: Arc::new(AtomicU64::new(registry.generation())),
            current: Arc::new(RwLock::new(registry)),
        }
    }
}

impl From<Registry> for LiveRegistry {
    fn from(registry: Registry) -> Self {
        Arc::new(registry).into()
    }
}

impl LiveRegistry {
    /// The newest generation.
    pub fn current(&self) -> Arc<Registry> {
        // A poisoned lock still holds a whole generation: it is only ever replaced.
        Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// The newest generation's number.
    pub fn generation(&self) -> u64 {
        self.newest.load(Ordering::Acquire)
    }

    /// Appends the tools whose names are new (see [`Registry::appended`]) as the next
    /// generation. Returns the admission notices of the new tools, and whether anything was
    /// added.
    pub fn append(&self, tools: impl IntoIterator<Item = Arc<dyn ToolSpec>>) -> (bool, Vec<Notice>) {
        self.append_if(tools, |_| true)
    }

    /// As [`LiveRegistry::append`], only if `accept` takes the new tools' admission notices;
    /// otherwise nothing is added and the notices say why. A host registering its own tools
    /// refuses them all when one fails closed, rather than list a tool that can never run
    /// beside an error that says it was not registered.
    pub fn append_if(
        &self,
        tools: impl IntoIterator<Item = Arc<dyn ToolSpec>>,
        accept: impl FnOnce(&[Notice]) -> bool,
    ) -> (bool, Vec<Notice>) {
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        match current.appended(tools) {
            Some((_, notices)) if !accept(&notices) => (false, notices),
            Some((next, notices)) => {
                tracing::info!(generation = next.generation(), tools = next.names().len(), "registry grew");
                let generation = next.generation();
                *current = Arc::new(next);
                self.newest.store(generation, Ordering::Release);
                (true, notices)
            }
            None => (false, Vec::new()),
        }
    }
}
