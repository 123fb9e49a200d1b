//! The keys a live worker holds, and when each was last used.

use tokio::time::Instant;

use crate::key::Key;

/// One key a worker holds, or is loading for the job it is lent to.
#[derive(Debug, Clone)]
pub(crate) struct HeldKey {
    pub(crate) key: Key,
    /// When a job of the key last got or gave back the worker.
    pub(crate) used: Instant,
    /// Set while the worker loads it.
    pub(crate) loading: bool,
}

/// A worker's keys, in no order (a handful: `keys_per_worker`).
#[derive(Debug, Default)]
pub(crate) struct Keys(Vec<HeldKey>);

impl Keys {
    /// Keys loaded or loading.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it holds `key`, loaded or loading.
    pub(crate) fn holds(&self, key: &Key) -> bool {
        self.0.iter().any(|k| &k.key == key)
    }

    /// Whether it holds `key` loaded (a job of it runs at once).
    pub(crate) fn has_loaded(&self, key: &Key) -> bool {
        self.0.iter().any(|k| &k.key == key && !k.loading)
    }

    /// Its least recently used keys, `n` of them, oldest first, leaving out
    /// those `keep` says must stay.
    pub(crate) fn coldest(&self, n: usize, keep: impl Fn(&Key) -> bool) -> Option<Vec<&HeldKey>> {
        let mut free: Vec<&HeldKey> = self.0.iter().filter(|k| !keep(&k.key)).collect();
        if free.len() < n {
            return None;
        }
        free.sort_by_key(|k| k.used);
        free.truncate(n);
        Some(free)
    }

    /// Marks `key` used now, if it holds it.
    pub(crate) fn mark_used(&mut self, key: &Key, now: Instant) {
        if let Some(k) = self.0.iter_mut().find(|k| &k.key == key) {
            k.used = now;
        }
    }

    /// Adds `key`, loaded or (for the job it is lent to) loading.
    pub(crate) fn add(&mut self, key: &Key, now: Instant, loading: bool) {
        self.remove(key);
        self.0.push(HeldKey {
            key: key.clone(),
            used: now,
            loading,
        });
    }

    /// `key` finished loading.
    pub(crate) fn loaded(&mut self, key: &Key) {
        if let Some(k) = self.0.iter_mut().find(|k| &k.key == key) {
            k.loading = false;
        }
    }

    pub(crate) fn remove(&mut self, key: &Key) {
        self.0.retain(|k| &k.key != key);
    }

    /// The keys, for a status row.
    pub(crate) fn names(&self) -> Vec<Key> {
        let mut names: Vec<Key> = self.0.iter().map(|k| k.key.clone()).collect();
        names.sort();
        names
    }
}
