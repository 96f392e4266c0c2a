//! Per-session memory shared by tools and the pipeline: files read, activated tools, saved
//! outputs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use crate::output::{OverflowStore, is_handle};
use crate::registry::{Catalog, LiveRegistry, Registry};
use crate::tool::{SessionServices, SessionState, ToolError, ToolFinder};

/// What one session remembers. Cheap to share (`Arc`); every method takes `&self`.
#[derive(Debug)]
pub struct SessionMemory {
    id: String,
    live: LiveRegistry,
    files: Mutex<HashMap<PathBuf, SystemTime>>,
    catalog: Mutex<Catalog>,
    /// Tools appended by a refresh and not yet announced.
    added: Mutex<Vec<String>>,
    /// Whether the tools' once-per-session notices were handed out.
    told: std::sync::atomic::AtomicBool,
    /// Notices the host of the session is told with them (an untrusted project policy).
    to_tell: Mutex<Vec<crate::notice::Notice>>,
    /// State tools keep per session (background shell tasks); dropping the memory (the
    /// session closed) drops it, which kills those tasks.
    state: SessionState,
    overflow: Arc<OverflowStore>,
}

/// Locks a mutex, recovering the data if a panicking holder poisoned it: the maps here stay
/// consistent after any single insert, so a poisoned lock holds nothing half-done.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl SessionMemory {
    /// A fresh session memory, on the newest generation of `registry`.
    pub fn new(id: String, registry: impl Into<LiveRegistry>, overflow: Arc<OverflowStore>) -> Self {
        let live = registry.into();
        let catalog = live.current().catalog();
        Self {
            id,
            live,
            files: Mutex::new(HashMap::new()),
            catalog: Mutex::new(catalog),
            added: Mutex::new(Vec::new()),
            told: std::sync::atomic::AtomicBool::new(false),
            to_tell: Mutex::new(Vec::new()),
            state: SessionState::default(),
            overflow,
        }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The registry generation the session's tools come from.
    pub fn registry(&self) -> Arc<Registry> {
        Arc::clone(lock(&self.catalog).registry())
    }

    /// Moves the session to the newest registry generation, if there is one: tools added
    /// since are appended to its catalog. Called between rounds, so a round sees one
    /// generation throughout. The names that became visible are kept for
    /// [`SessionMemory::take_added`].
    pub fn refresh(&self) {
        // Most submissions find nothing new: a look at a number, not a lock shared by every
        // session.
        if lock(&self.catalog).registry().generation() == self.live.generation() {
            return;
        }
        let current = self.live.current();
        let mut catalog = lock(&self.catalog);
        if Arc::ptr_eq(catalog.registry(), &current) {
            return;
        }
        let before = catalog.generation();
        *catalog = catalog.adopt(current);
        let names = catalog.visible_names();
        let added = catalog.generation() - before;
        lock(&self.added).extend_from_slice(&names[names.len() - added..]);
    }

    /// What the session's tools want it told once (exec_shell without a sandbox), then what
    /// [`SessionMemory::tell_once`] added, the first time this is called; nothing after.
    pub fn take_session_notices(&self) -> Vec<crate::notice::Notice> {
        if self.told.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Vec::new();
        }
        let mut notices: Vec<crate::notice::Notice> = self
            .registry()
            .iter()
            .filter_map(|t| t.spec.session_notice())
            .map(|m| crate::notice::Notice::new(crate::notice::NoticeKind::SandboxUnavailable, m))
            .collect();
        notices.append(&mut lock(&self.to_tell));
        notices
    }

    /// Adds `notices` to those the session is told once, at its first submission (the
    /// session's policy's, when it opens). Added after that, they are never told.
    pub fn tell_once(&self, notices: impl IntoIterator<Item = crate::notice::Notice>) {
        lock(&self.to_tell).extend(notices);
    }

    /// The tools that became visible since the last call, in catalog order.
    pub fn take_added(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.added))
    }

    /// The session's current catalog (resident plus activated tools).
    pub fn catalog(&self) -> Catalog {
        lock(&self.catalog).clone()
    }

    /// Reads the session's current catalog in place: a clone costs reference counts that
    /// every session shares (the registry's), which the pipeline avoids once per round.
    pub fn with_catalog<R>(&self, f: impl FnOnce(&Catalog) -> R) -> R {
        f(&lock(&self.catalog))
    }

    /// The overflow store.
    pub fn overflow(&self) -> &Arc<OverflowStore> {
        &self.overflow
    }
}

impl SessionServices for SessionMemory {
    fn file_read_state(&self, path: &Path) -> Option<SystemTime> {
        lock(&self.files).get(path).copied()
    }
    fn record_file_state(&self, path: &Path, modified: SystemTime) {
        lock(&self.files).insert(path.to_path_buf(), modified);
    }
    fn activate_tools(&self, names: &[String]) {
        let mut catalog = lock(&self.catalog);
        *catalog = catalog.activate(names);
    }
    fn search_index(&self) -> Option<Arc<dyn ToolFinder>> {
        let index = lock(&self.catalog).registry().search_index()?;
        Some(index)
    }
    fn load_overflow(&self, id: &str) -> Result<String, ToolError> {
        let loaded = if is_handle(id) {
            self.overflow.load_handle(&self.id, id)
        } else {
            self.overflow.load(&self.id, id)
        };
        loaded.map_err(|e| ToolError::invalid("ref", e.to_string()))
    }
    fn state(&self) -> Option<&SessionState> {
        Some(&self.state)
    }
    fn output_file(&self) -> Option<Box<dyn crate::tool::OutputFile>> {
        Some(Box::new(self.overflow.writer(&self.id)))
    }
}
