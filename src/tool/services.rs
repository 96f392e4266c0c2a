//! The small services a tool may ask its host for, as plain types and traits of the tool
//! layer, so the trait layer names nothing above it (the registry's index, the output store,
//! a built-in's own state).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One ranked match of a tool search.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SearchHit {
    /// Tool name.
    pub name: String,
    /// Relevance score (higher is better; only the order means anything).
    pub score: f64,
    /// The first sentence of the description.
    pub summary: String,
}

/// Ranks the session's deferred tools for a query (tool_search); the registry's search index
/// implements it.
pub trait ToolFinder: Send + Sync {
    /// At most `top` matches for `query`, best first.
    fn search(&self, query: &str, top: usize) -> Vec<SearchHit>;
}

/// A file the output of a running call is streamed into, for retrieve_tool_result to read
/// back; the overflow store makes them.
pub trait OutputFile: Send {
    /// Appends `bytes` (the file is created on the first write).
    ///
    /// # Errors
    /// The write's IO error (a full disk); nothing more should be written then.
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()>;
    /// Makes what was written readable, under the ref it returns. A file dropped uncommitted
    /// is removed.
    ///
    /// # Errors
    /// The IO error of the final sync or rename.
    fn commit(self: Box<Self>) -> std::io::Result<String>;
}

/// Work that outlives the call that started it (a background task's log pump and watchdog),
/// handed to the host to run: the slot itself spawns no tasks.
pub type Detached = futures::future::BoxFuture<'static, ()>;

/// State a tool keeps per session, one value per type, created on first use and dropped with
/// the session.
///
/// Built-ins that need memory across calls (background shell tasks) keep it here rather than
/// in a field of the session that would have to know their types; dropping the session drops
/// the values, so whatever they hold (child processes) ends with it.
#[derive(Default)]
pub struct SessionState {
    values: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl SessionState {
    /// The session's value of type `T`, created with `T::default()` on first use.
    pub fn get_or_default<T: Any + Send + Sync + Default>(&self) -> Arc<T> {
        // Inserting is the only change made under the lock, so a poisoned lock holds a whole map.
        let mut values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        let value = values.entry(TypeId::of::<T>()).or_insert_with(|| Arc::new(T::default()));
        match Arc::clone(value).downcast::<T>() {
            Ok(v) => v,
            // Unreachable: the entry for `TypeId::of::<T>()` only ever holds a `T`. Replace
            // rather than panic, should that ever change.
            Err(_) => {
                let fresh = Arc::new(T::default());
                *value = fresh.clone();
                fresh
            }
        }
    }
}

impl std::fmt::Debug for SessionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.values.lock().map_or(0, |v| v.len());
        f.debug_struct("SessionState").field("values", &n).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Counter(std::sync::atomic::AtomicUsize);

    #[test]
    fn one_value_per_type_per_session() {
        let state = SessionState::default();
        state
            .get_or_default::<Counter>()
            .0
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(state.get_or_default::<Counter>().0.load(std::sync::atomic::Ordering::SeqCst), 1);
        let other = SessionState::default();
        assert_eq!(other.get_or_default::<Counter>().0.load(std::sync::atomic::Ordering::SeqCst), 0);
    }
}
