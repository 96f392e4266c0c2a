//! Per-session memory shared by tools and the pipeline: files read, activated tools, saved
//! outputs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use crate::output::{OverflowError, OverflowStore};
use crate::registry::{Catalog, Registry, SearchIndex};
use crate::tool::SessionServices;

/// What one session remembers. Cheap to share (`Arc`); every method takes `&self`.
#[derive(Debug)]
pub struct SessionMemory {
    id: String,
    registry: Arc<Registry>,
    files: Mutex<HashMap<PathBuf, SystemTime>>,
    catalog: Mutex<Catalog>,
    overflow: Arc<OverflowStore>,
}

/// Locks a mutex, recovering the data if a panicking holder poisoned it: the maps here stay
/// consistent after any single insert, so a poisoned lock holds nothing half-done.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl SessionMemory {
    /// A fresh session memory.
    pub fn new(id: String, registry: Arc<Registry>, overflow: Arc<OverflowStore>) -> Self {
        let catalog = registry.catalog();
        Self {
            id,
            registry,
            files: Mutex::new(HashMap::new()),
            catalog: Mutex::new(catalog),
            overflow,
        }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The registry the session's tools come from.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The session's current catalog (resident plus activated tools).
    pub fn catalog(&self) -> Catalog {
        lock(&self.catalog).clone()
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
    fn search_index(&self) -> Option<Arc<SearchIndex>> {
        self.registry.search_index()
    }
    fn load_overflow(&self, id: &str) -> Result<String, OverflowError> {
        self.overflow.load(&self.id, id)
    }
}
