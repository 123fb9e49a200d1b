//! The keys a live worker holds, when each was last used, and how much it
//! is used lately.

use std::time::Duration;

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
    /// When the worker finished loading it: the jobs of it that came by
    /// then are the batch that load was for.
    ready: Option<Instant>,
    /// The tenant of its last job (`None`: a job without one, or none yet).
    pub(crate) tenant: Option<crate::Tenant>,
    /// Its jobs on this worker lately: a count that halves every `half_life`
    /// (as of `used`).
    demand: f64,
}

impl HeldKey {
    /// Its jobs lately, as of `now`.
    pub(crate) fn demand_at(&self, now: Instant, half_life: Duration) -> f64 {
        let age = now.saturating_duration_since(self.used).as_secs_f64();
        self.demand * (-age / half_life.as_secs_f64().max(1e-3) * std::f64::consts::LN_2).exp()
    }
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

    /// When the worker finished loading `key`, if it holds it, loaded by
    /// a load.
    pub(crate) fn ready(&self, key: &Key) -> Option<Instant> {
        let k = self.0.iter().find(|k| &k.key == key && !k.loading)?;
        k.ready
    }

    /// Whether it holds `key` loaded (a job of it runs at once).
    pub(crate) fn has_loaded(&self, key: &Key) -> bool {
        self.0.iter().any(|k| &k.key == key && !k.loading)
    }

    /// Its least used keys lately, `n` of them (on a tie, the least
    /// recently used first), leaving out keys loading and those `keep` says
    /// must stay.
    pub(crate) fn coldest(
        &self,
        n: usize,
        keep: impl Fn(&Key) -> bool,
        now: Instant,
        half_life: Duration,
    ) -> Option<Vec<&HeldKey>> {
        let mut free: Vec<&HeldKey> = self
            .0
            .iter()
            .filter(|k| !k.loading && !keep(&k.key))
            .collect();
        if free.len() < n {
            return None;
        }
        let demand = |k: &HeldKey| k.demand_at(now, half_life);
        free.sort_by(|a, b| demand(a).total_cmp(&demand(b)).then(a.used.cmp(&b.used)));
        free.truncate(n);
        Some(free)
    }

    /// Marks `key` used now, if it holds it; `counted` (with the half
    /// life) counts one more job of it.
    pub(crate) fn mark_used(&mut self, key: &Key, now: Instant, counted: Option<Duration>) {
        if let Some(k) = self.0.iter_mut().find(|k| &k.key == key) {
            if let Some(half_life) = counted {
                k.demand = k.demand_at(now, half_life) + 1.0;
            }
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
            ready: None,
            tenant: None,
            demand: 0.0,
        });
    }

    /// A job of `tenant` got the worker for `key`.
    pub(crate) fn set_tenant(&mut self, key: &crate::Key, tenant: Option<&crate::Tenant>) {
        if let Some(k) = self.0.iter_mut().find(|k| &k.key == key) {
            k.tenant = tenant.cloned();
        }
    }

    /// Whether it holds a key whose last job was of another tenant than
    /// `tenant`, used since `since`, for which `owed` holds.
    pub(crate) fn others_since(
        &self,
        tenant: Option<&crate::Tenant>,
        since: Option<Instant>,
        owed: impl Fn(Option<&crate::Tenant>) -> bool,
    ) -> bool {
        let lately = |k: &HeldKey| since.is_none_or(|s| k.used >= s);
        self.0
            .iter()
            .any(|k| k.tenant.as_ref() != tenant && lately(k) && owed(k.tenant.as_ref()))
    }

    /// `key` finished loading, `now`.
    pub(crate) fn loaded(&mut self, key: &Key, now: Instant) {
        if let Some(k) = self.0.iter_mut().find(|k| &k.key == key) {
            k.loading = false;
            k.ready = Some(now);
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
