//! The dispatcher's open sessions, by id, in shards.
//!
//! Every host call (a submission, an answer, a cancellation) looks its session up here, from
//! whichever thread the host runs on. One lock for the whole table made every submission of
//! every worker thread queue on the same lock; with the table split by id, threads working on
//! different sessions rarely meet. Written here rather than taken from a concurrent-map crate:
//! it is a fixed array of locked maps, and the only operations are insert, get and remove.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// How many shards: well above the number of threads that may look up at once.
const SHARDS: usize = 64;

/// One shard: the sessions whose ids fall in it.
type Shard<T> = Mutex<HashMap<String, Arc<T>>>;

/// Open sessions by id.
pub struct SessionTable<T> {
    shards: Box<[Shard<T>]>,
}

impl<T> Default for SessionTable<T> {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }
}

impl<T> SessionTable<T> {
    fn shard(&self, id: &str) -> MutexGuard<'_, HashMap<String, Arc<T>>> {
        // Ids are random; any spread of their bytes is even. A map left poisoned by a panic
        // holds whole entries (each change is one insert or remove).
        let h = id.bytes().fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
        self.shards[h % SHARDS].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a session.
    pub fn insert(&self, id: String, value: Arc<T>) {
        let mut shard = self.shard(&id);
        shard.insert(id, value);
    }

    /// The session `id`.
    pub fn get(&self, id: &str) -> Option<Arc<T>> {
        self.shard(id).get(id).cloned()
    }

    /// Removes the session `id`.
    pub fn remove(&self, id: &str) -> Option<Arc<T>> {
        self.shard(id).remove(id)
    }

    /// How many sessions are open.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).len()).sum()
    }

    /// The ids of the open sessions, in no order.
    pub fn ids(&self) -> Vec<String> {
        self.shards
            .iter()
            .flat_map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).keys().cloned().collect::<Vec<_>>())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_found_removed_and_counted_across_shards() {
        let t: SessionTable<usize> = SessionTable::default();
        for i in 0..200 {
            t.insert(format!("{i:032x}"), Arc::new(i));
        }
        assert_eq!(t.len(), 200);
        assert_eq!(t.get(&format!("{:032x}", 7)).as_deref(), Some(&7));
        assert_eq!(t.remove(&format!("{:032x}", 7)).as_deref(), Some(&7));
        assert!(t.get(&format!("{:032x}", 7)).is_none());
        let mut ids = t.ids();
        ids.sort();
        assert_eq!(ids.len(), 199);
    }
}
