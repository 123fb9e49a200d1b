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
    /// The tenant of its last job (`Some(None)`: a job without one;
    /// `None`: no job yet, as for a key loaded ahead).
    pub(crate) last_job: Option<Option<crate::Tenant>>,
    /// Its jobs on this worker lately: a count that halves every `half_life`
    /// (as of `used`).
    demand: f64,
}

impl HeldKey {
    /// Its jobs lately, as of `now`.
    pub(crate) fn demand_at(&self, now: Instant, half_life: Duration) -> f64 {
        faded(self.demand, self.used, now, half_life)
    }

    /// Whether it is *settling* (loading, or loaded less than `window`
    /// ago), and until when.
    pub(crate) fn settling(&self, now: Instant, window: Duration) -> Option<Settling> {
        if self.loading {
            return Some(Settling::Loading);
        }
        let until = self.ready? + window;
        (now < until).then_some(Settling::Until(until))
    }
}

/// A key not yet free to go: it serves its own jobs first. Ordered by how
/// long that lasts, a load still under way last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Settling {
    /// Loaded; settling until then.
    Until(Instant),
    /// Loading: settling until ready, and a while after.
    Loading,
}

/// `count` as of `at`, halved every `half_life` since.
fn faded(count: f64, at: Instant, now: Instant, half_life: Duration) -> f64 {
    let age = now.saturating_duration_since(at).as_secs_f64();
    count * (-age / half_life.as_secs_f64().max(1e-3) * std::f64::consts::LN_2).exp()
}

/// The counts of jobs of the keys the workers let go, unloaded or gone with
/// their worker, so that a key held again resumes its count rather than
/// start from none (a key asked for often but never for long, or whose
/// worker was recycled, would else always be the least used). Bounded:
/// keys come from the network, and past [`LetGo::MAX`] the smallest count
/// goes.
#[derive(Debug, Default)]
pub(crate) struct LetGo(std::collections::HashMap<Key, (f64, Instant)>);

impl LetGo {
    /// The most counts kept.
    pub(crate) const MAX: usize = 1024;

    /// Keeps the count of `held`, let go `now`.
    pub(crate) fn keep(&mut self, held: &HeldKey, now: Instant, half_life: Duration) {
        if self.0.len() >= Self::MAX && !self.0.contains_key(&held.key) {
            let least = self
                .0
                .iter()
                .min_by(|a, b| {
                    let (ca, cb) = (
                        faded(a.1.0, a.1.1, now, half_life),
                        faded(b.1.0, b.1.1, now, half_life),
                    );
                    ca.total_cmp(&cb)
                })
                .map(|(k, _)| k.clone());
            if let Some(k) = least {
                self.0.remove(&k);
            }
        }
        let count = held.demand_at(now, half_life);
        self.0.insert(held.key.clone(), (count, now));
    }

    /// The count `key` had when let go, as of `now` (none: 0), which it
    /// takes back.
    pub(crate) fn take(&mut self, key: &Key, now: Instant, half_life: Duration) -> f64 {
        self.0
            .remove(key)
            .map_or(0.0, |(count, at)| faded(count, at, now, half_life))
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
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

    /// Each key a job has used: the tenant of its last job, and when.
    pub(crate) fn uses(&self) -> impl Iterator<Item = (Option<&crate::Tenant>, Instant)> {
        (self.0.iter()).filter_map(|k| Some((k.last_job.as_ref()?.as_ref(), k.used)))
    }

    /// The last use of any of its keys.
    pub(crate) fn last_used(&self) -> Option<Instant> {
        self.0.iter().map(|k| k.used).max()
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
    /// recently used first), leaving out those `keep` says must stay. A key
    /// loading may be among them: its worker is busy, and only a job that
    /// claims a busy worker reads them (it takes the worker once ready).
    pub(crate) fn coldest(
        &self,
        n: usize,
        keep: impl Fn(&Key) -> bool,
        now: Instant,
        half_life: Duration,
    ) -> Option<Vec<&HeldKey>> {
        let mut free: Vec<&HeldKey> = self.0.iter().filter(|k| !keep(&k.key)).collect();
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

    /// Adds `key`, loaded or (for the job it is lent to) loading, with
    /// `demand` jobs counted already (a key loaded again resumes the count
    /// it had when let go).
    pub(crate) fn add(&mut self, key: &Key, now: Instant, loading: bool, demand: f64) {
        self.remove(key);
        self.0.push(HeldKey {
            key: key.clone(),
            used: now,
            loading,
            ready: None,
            last_job: None,
            demand,
        });
    }

    /// A job of `tenant` got the worker for `key`.
    pub(crate) fn set_tenant(&mut self, key: &crate::Key, tenant: Option<&crate::Tenant>) {
        if let Some(k) = self.0.iter_mut().find(|k| &k.key == key) {
            k.last_job = Some(tenant.cloned());
        }
    }

    /// Whether it holds a key whose last job was of another tenant than
    /// `tenant`, used after `since`, for which `owed` holds (a key no job
    /// has used is no other tenant's).
    pub(crate) fn others_since(
        &self,
        tenant: Option<&crate::Tenant>,
        since: Option<Instant>,
        owed: impl Fn(Option<&crate::Tenant>) -> bool,
    ) -> bool {
        self.uses()
            .any(|(other, used)| other != tenant && since.is_none_or(|s| used > s) && owed(other))
    }

    /// `key` finished loading, `now`.
    pub(crate) fn loaded(&mut self, key: &Key, now: Instant) {
        if let Some(k) = self.0.iter_mut().find(|k| &k.key == key) {
            k.loading = false;
            k.ready = Some(now);
        }
    }

    /// Lets go of `key`; gives what it held of it.
    pub(crate) fn remove(&mut self, key: &Key) -> Option<HeldKey> {
        let at = self.0.iter().position(|k| &k.key == key)?;
        Some(self.0.swap_remove(at))
    }

    /// The keys, for a status row.
    /// The count of jobs of `key`, if it holds it, as of `now`.
    pub(crate) fn count_of(&self, key: &Key, now: Instant, half_life: Duration) -> Option<f64> {
        self.0
            .iter()
            .find(|k| &k.key == key)
            .map(|k| k.demand_at(now, half_life))
    }

    /// The keys it holds, each with its count of jobs.
    pub(crate) fn held(&self) -> &[HeldKey] {
        &self.0
    }

    pub(crate) fn names(&self) -> Vec<Key> {
        let mut names: Vec<Key> = self.0.iter().map(|k| k.key.clone()).collect();
        names.sort();
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HALF_LIFE: Duration = Duration::from_secs(60);

    fn key(k: &str) -> Key {
        Key::new(k).unwrap()
    }

    /// A worker's keys holding `k`, with `jobs` jobs of it counted now.
    fn held(k: &str, jobs: usize, now: Instant) -> Keys {
        let mut keys = Keys::default();
        keys.add(&key(k), now, false, 0.0);
        for _ in 0..jobs {
            keys.mark_used(&key(k), now, Some(HALF_LIFE));
        }
        keys
    }

    #[test]
    fn a_key_let_go_resumes_its_count_halved_by_the_time_away() {
        let now = Instant::now();
        let mut let_go = LetGo::default();
        let gone = held("A", 8, now).remove(&key("A")).unwrap();
        let_go.keep(&gone, now, HALF_LIFE);
        let back = let_go.take(&key("A"), now + HALF_LIFE, HALF_LIFE);
        assert!((back - 4.0).abs() < 1e-9, "{back}");
        assert_eq!(
            let_go.take(&key("A"), now, HALF_LIFE),
            0.0,
            "taken back once"
        );
    }

    #[test]
    fn the_counts_of_keys_let_go_are_bounded_and_the_smallest_goes_first() {
        let now = Instant::now();
        let mut let_go = LetGo::default();
        for i in 0..LetGo::MAX + 10 {
            let k = format!("k{i}");
            let gone = held(&k, 1 + i % 7, now).remove(&key(&k)).unwrap();
            let_go.keep(&gone, now, HALF_LIFE);
        }
        assert_eq!(let_go.len(), LetGo::MAX);
        // Ten keys counted once went; every key counted more is kept.
        let kept = (0..LetGo::MAX + 10)
            .filter(|i| i % 7 != 0)
            .filter(|i| let_go.take(&key(&format!("k{i}")), now, HALF_LIFE) > 1.0)
            .count();
        assert_eq!(kept, (0..LetGo::MAX + 10).filter(|i| i % 7 != 0).count());
        assert_eq!(let_go.len(), LetGo::MAX - kept);
    }

    #[test]
    fn a_key_loading_or_just_loaded_is_settling() {
        let now = Instant::now();
        let window = Duration::from_millis(250);
        let mut keys = Keys::default();
        keys.add(&key("A"), now, true, 0.0);
        assert_eq!(keys.0[0].settling(now, window), Some(Settling::Loading));
        keys.loaded(&key("A"), now);
        let until = Settling::Until(now + window);
        assert_eq!(keys.0[0].settling(now, window), Some(until));
        assert!(until < Settling::Loading);
        assert_eq!(keys.0[0].settling(now + window, window), None);
    }
}
