//! Which keys go for another key: the worker whose keys to let go are
//! used least lately (their decayed count of jobs, then their last use),
//! and a place for a key kept warm (ADR 0062).

use std::time::Duration;

use super::effects::{Effects, Wake};
use super::state::State;
use crate::key::{Key, KeyBinding};
use crate::slot::{Held, Keys, Settling, SlotState};
use crate::tenant::Tenant;
use crate::worker::Worker;

/// How fast a key's count of jobs on a worker fades.
const KEY_HALF_LIFE: Duration = Duration::from_secs(60);

/// A worker whose keys may go for another key.
#[derive(Debug, Clone)]
pub(super) struct Victim {
    pub(super) slot: usize,
    /// Whether it is idle (else a job holds it).
    pub(super) idle: bool,
    /// The keys to let go: their decayed count of jobs, their last use.
    pub(super) demand: f64,
    pub(super) last: Option<tokio::time::Instant>,
    pub(super) unload: Vec<Key>,
    /// The longest a key to let go is settling (loading, or loaded less
    /// than `max_key_wait` ago): it serves its own jobs first.
    pub(super) settling: Option<Settling>,
    /// The last use of any of its keys: for a busy worker, about when its
    /// job in hand got it.
    pub(super) used: Option<tokio::time::Instant>,
}

impl Victim {
    /// Whether it can take a key now: idle, and nothing to let go settling.
    pub(super) fn free(&self) -> bool {
        self.idle && self.settling.is_none()
    }
}

impl<W: Worker> State<W> {
    /// An idle worker to load a key kept warm onto, among those that do not
    /// hold it yet: one with room, else the one whose keys to let go were
    /// used least recently.
    pub(super) fn warm_place(&self, key: &Key) -> Option<(usize, Vec<Key>)> {
        let room = |s: &SlotState<W>| matches!(s, SlotState::Ready { live, held: Held::Idle { .. } } if live.record.keys.len() < self.opts.keys_per_worker && !live.record.keys.holds(key));
        match self.slots.states(self.slots.size()).position(room) {
            Some(i) => Some((i, Vec::new())),
            None => self.victim(key, false, None).map(|v| (v.slot, v.unload)),
        }
    }

    /// Whether a worker's `keys` keep it for other tenants than `tenant`: it
    /// holds a key another tenant used lately (within ten `max_key_wait`s),
    /// and that tenant has had no more than its share lately. A tenant's
    /// load, which holds the worker for the load and the job, does not go
    /// there: the other tenant's next job would wait behind it (ADR 0065).
    pub(super) fn guards_others(&self, keys: &Keys, tenant: Option<&Tenant>) -> bool {
        let since = self
            .now
            .checked_sub(self.opts.max_key_wait.saturating_mul(10));
        let shares = &self.waiters.shares;
        keys.others_since(tenant, since, |other| shares.owed(other, tenant))
    }

    /// While jobs wait, a look at them again when the next hold of a
    /// tenant on a worker's keys ([`guards_others`](Self::guards_others))
    /// lapses: a job it keeps off the worker would otherwise wait for an
    /// event that may never come.
    pub(super) fn arm_guard_lapse(&mut self, fx: &mut Effects<W>) {
        let lately = self.opts.max_key_wait.saturating_mul(10);
        let waiting = self.waiters.tenants();
        let next = self
            .slots
            .states(self.slots.size())
            .filter_map(|s| match s {
                SlotState::Ready { live, .. } => Some(live.record.keys.uses()),
                _ => None,
            })
            .flatten()
            .filter(|(t, _)| waiting.iter().any(|w| w != t))
            .map(|(_, used)| used + lately)
            .filter(|&at| at > self.now)
            .min();
        if self.guard_lapse.as_ref().map(|(at, _)| *at) != next {
            self.guard_lapse = next.map(|at| (at, fx.wake_at(at, Wake::KeyWait)));
        }
    }

    /// How fast a key's count of jobs fades: a minute, so that a key whose
    /// jobs come every few seconds is still counted as used when the next
    /// one comes (a shorter count ranks keys by their last use alone).
    pub(super) fn half_life(&self) -> Duration {
        KEY_HALF_LIFE
    }

    /// The running worker whose keys to let go for `key` are used least
    /// lately (their decayed count of jobs; on a tie, the least recently
    /// used), among the idle ones, and the busy ones too with `busy`. Keys
    /// that `min_workers_per_key` keeps do not go (but see
    /// [`victim_among`](Self::victim_among)). For a job of `tenant`
    /// (`Some`), a worker that another tenant's keys make its own
    /// ([`guards_others`](Self::guards_others)) is left out.
    pub(super) fn victim(
        &self,
        key: &Key,
        busy: bool,
        tenant: Option<Option<&Tenant>>,
    ) -> Option<Victim> {
        self.victim_among(key, busy, tenant, |_| true)
    }

    /// As [`victim`](Self::victim), among the workers `among` accepts. For
    /// an overdue job (`busy`), keys kept warm may go too when no running
    /// worker has any other key to let go: the starvation bound comes
    /// before `min_workers_per_key`, which loads them again once a worker
    /// is idle.
    pub(super) fn victim_among(
        &self,
        key: &Key,
        busy: bool,
        tenant: Option<Option<&Tenant>>,
        among: impl Fn(&Victim) -> bool,
    ) -> Option<Victim> {
        let warm_may_go = busy
            && self
                .victim_scan(key, true, tenant, |_| true, false)
                .is_none();
        self.victim_scan(key, busy, tenant, among, warm_may_go)
    }

    /// The scan of [`victim_among`](Self::victim_among); keys kept warm go
    /// only with `warm_may_go`.
    fn victim_scan(
        &self,
        key: &Key,
        busy: bool,
        tenant: Option<Option<&Tenant>>,
        among: impl Fn(&Victim) -> bool,
        warm_may_go: bool,
    ) -> Option<Victim> {
        let cap = match self.opts.key_binding {
            KeyBinding::Load => self.opts.keys_per_worker,
            _ => 0,
        };
        let kept = |k: &Key| {
            k == key
                || !warm_may_go
                    && self
                        .opts
                        .min_workers_per_key
                        .get(k)
                        .is_some_and(|&m| self.holders(k) <= m)
        };
        let (now, half_life) = (self.now, self.half_life());
        let mut best: Option<Victim> = None;
        for i in 0..self.slots.size() {
            let (live, idle) = match self.slots.state(i) {
                SlotState::Ready {
                    live,
                    held: Held::Idle { .. },
                } => (live, true),
                SlotState::Ready { live, .. } if busy && live.record.probe.is_none() => {
                    (live, false)
                }
                _ => continue,
            };
            let keys = &live.record.keys;
            // A worker that holds the key already is no place to load it.
            if keys.holds(key) || tenant.is_some_and(|t| self.guards_others(keys, t)) {
                continue;
            }
            let n = (keys.len() + 1).saturating_sub(cap).min(keys.len());
            let Some(go) = keys.coldest(n, kept, now, half_life) else {
                continue;
            };
            let v = Victim {
                slot: i,
                idle,
                demand: go.iter().map(|k| k.demand_at(now, half_life)).sum(),
                last: go.iter().map(|k| k.used).max(),
                unload: go.iter().map(|k| k.key.clone()).collect(),
                settling: go
                    .iter()
                    .filter_map(|k| k.settling(now, self.opts.max_key_wait))
                    .max(),
                used: keys.last_used(),
            };
            if !among(&v) {
                continue;
            }
            let better = |b: &Victim| {
                v.demand
                    .total_cmp(&b.demand)
                    .then(v.last.cmp(&b.last))
                    .then(b.idle.cmp(&v.idle))
                    .is_lt()
            };
            if best.as_ref().is_none_or(better) {
                best = Some(v);
            }
        }
        best
    }
}
