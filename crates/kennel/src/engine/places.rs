//! Where a keyed job's key goes when no worker holding it is idle: a free
//! place, a cold worker for a hot key, or the worker an overdue job claims
//! (ADR 0062).
//!
//! A job that has waited `max_key_wait` with no worker holding its key (or
//! a hot key's) looks at every running worker, idle or not, and claims the
//! one whose keys to let go are used least lately, if no other overdue job
//! claimed it (else the least used one unclaimed, if its keys are used
//! about as little; else none, and it waits behind the others' claims). It
//! takes it once it is free: its job in hand done, and a key it loads or
//! has just loaded ready for `max_key_wait` (a load serves the jobs of its
//! key first). Waiting for that worker rather than taking whatever is idle
//! keeps a key in steady use where it is: the switches fall on the workers
//! that switch anyway.
//!
//! Two ways out keep the wait short: an idle worker free now whose keys
//! are used at most [`FREE_NOW`] times as much (and one job more), and at
//! most [`FREE_NOW_JOBS`] jobs more, is taken at once; and from twice
//! `max_key_wait`, if the worker claimed runs a job that got it
//! `max_key_wait` ago or more, the best idle worker is, so that a long job
//! elsewhere does not hold the key up.

use std::time::Duration;

use super::effects::{Effects, Wake};
use super::state::State;
use super::victims::Victim;
use crate::dispatch::startable;
use crate::key::{Key, KeyBinding};
use crate::slot::{Held, Settling, SlotState};
use crate::tenant::Tenant;
use crate::worker::Worker;

/// Where a job of a key goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Place {
    /// The idle worker of this slot, after it loads the key (unloading these
    /// first).
    Load(usize, Vec<Key>),
    /// The idle worker of this slot ends, and one started for the key takes
    /// its slot (`spawn`).
    Respawn(usize),
    /// The worker starting in this slot, for no job yet.
    Starting(usize),
    /// A new worker in this empty running slot.
    Start(usize),
}

/// How many times more an idle worker's keys may be used than those of
/// the worker claimed, for an overdue job to take the idle one now.
const FREE_NOW: f64 = 5.0;

/// And how many jobs more at most: a key in steady use stays where it is
/// however much the claimed worker's keys are used too.
const FREE_NOW_JOBS: f64 = 16.0;

impl<W: Worker> State<W> {
    /// A place for `key`, for waiting job `id` (none: a job just come)
    /// that has `waited` so long: a free one, else, once it is overdue,
    /// the worker it claims ([`claimed_place`](Self::claimed_place)).
    /// Before, a key that no worker holds takes no other key's worker (more
    /// of its jobs come meanwhile to share its load, and the keys that would
    /// go serve on); a hot key takes an idle worker whose keys went unused
    /// for `max_key_wait` (cold).
    pub(super) fn place_for(
        &mut self,
        fx: &mut Effects<W>,
        key: &Key,
        waited: Duration,
        tenant: Option<&Tenant>,
        id: Option<u64>,
    ) -> Option<Place> {
        let size = self.slots.size();
        let load = self.opts.key_binding == KeyBinding::Load;
        let room = |s: &SlotState<W>| matches!(s, SlotState::Ready { live, held: Held::Idle { .. } } if live.record.keys.len() < self.opts.keys_per_worker && !self.guards_others(&live.record.keys, tenant));
        if load && let Some(i) = self.slots.states(size).position(room) {
            return Some(Place::Load(i, Vec::new()));
        }
        let unawaited = |s: &SlotState<W>| {
            matches!(
                s,
                SlotState::Starting {
                    awaited_by: None,
                    ..
                }
            )
        };
        if load && let Some(i) = self.slots.states(size).position(unawaited) {
            return Some(Place::Starting(i));
        }
        if let Some(i) = startable(&self.slots)
            && self.job_may_start()
            && self.may_start_worker()
        {
            return Some(Place::Start(i));
        }
        if let Some(id) = id
            && waited >= self.opts.max_key_wait
        {
            return self.claimed_place(fx, id, key, waited, tenant);
        }
        if self.holders(key) == 0 {
            return None;
        }
        let v = self.victim(key, false, Some(tenant))?;
        let cold = v
            .last
            .is_none_or(|at| at + self.opts.max_key_wait <= self.now);
        cold.then(|| self.place_at(v))
    }

    /// The place a key takes on the worker of victim `v`.
    fn place_at(&self, v: Victim) -> Place {
        if self.opts.key_binding == KeyBinding::Load {
            Place::Load(v.slot, v.unload)
        } else {
            Place::Respawn(v.slot)
        }
    }

    /// The place of overdue job `id` of `key`, which has `waited` so long:
    /// the worker it claimed once that is free, or one free now (see the
    /// module's rules). `None` while it waits for its claim.
    pub(super) fn claimed_place(
        &mut self,
        fx: &mut Effects<W>,
        id: u64,
        key: &Key,
        waited: Duration,
        tenant: Option<&Tenant>,
    ) -> Option<Place> {
        let wait = self.opts.max_key_wait;
        let others = self.waiters.claimed_but(id);
        let unclaimed = |v: &Victim| !others.contains(&v.slot);
        let best = self.victim_among(key, true, Some(tenant), |_| true);
        let close = |v: &Victim, to: &Victim| {
            v.demand <= (to.demand * FREE_NOW + 1.0).min(to.demand + FREE_NOW_JOBS)
        };
        // Its claim, else the best worker if unclaimed, else the best
        // unclaimed one if it is used about as little (else it claims none
        // and waits behind the others' claims).
        let claimed = self
            .waiters
            .claim_of(id)
            .and_then(|slot| self.victim_among(key, true, Some(tenant), |v| v.slot == slot));
        let v = claimed.or_else(|| {
            let best = best.as_ref()?;
            if unclaimed(best) {
                return Some(best.clone());
            }
            self.victim_among(key, true, Some(tenant), unclaimed)
                .filter(|v| close(v, best))
        });
        if let Some(v) = v.as_ref().filter(|v| v.free()) {
            self.waiters.set_claim(id, None);
            return Some(self.place_at(v.clone()));
        }
        let Some(reference) = v.as_ref().or(best.as_ref()) else {
            self.waiters.set_claim(id, None);
            return None;
        };
        let in_hand_since = reference
            .used
            .filter(|_| !reference.idle && reference.settling.is_none());
        let long = waited >= wait * 2 && in_hand_since.is_some_and(|at| at + wait <= self.now);
        let now_free = self
            .victim_among(key, false, Some(tenant), unclaimed)
            .filter(|a| a.free());
        if let Some(a) = now_free
            && (long || close(&a, reference))
        {
            self.waiters.set_claim(id, None);
            return Some(self.place_at(a));
        }
        let Some(v) = v else {
            self.waiters.set_claim(id, None);
            return None;
        };
        // Look again when the claimed worker's key is ready for others, or
        // when its job in hand has run for `max_key_wait` (a worker given
        // back looks again by itself).
        let next = match v.settling {
            Some(Settling::Until(at)) => Some(at),
            Some(Settling::Loading) => None,
            None => in_hand_since.map(|at| at + wait),
        };
        let timer = next
            .filter(|&at| at > self.now)
            .map(|at| fx.wake_at(at, Wake::KeyWait));
        self.waiters.set_claim(id, Some((v.slot, timer)));
        None
    }
}
