//! A key that failed is not tried again at once: after a key's load
//! failed (or, with `spawn`, the start of a worker for it), a job of the
//! key that no worker holding it can serve fails at once with that failure
//! for 1 s, then 2, 4 … 60 s after each failure in a row, and no worker
//! lets go of a key or is moved for it. Keys come from the network: one
//! that names nothing would otherwise cost a worker's key (or a worker)
//! for each of its jobs. A key that loads clears its record.

use std::collections::HashMap;

use tokio::time::Instant;

use super::effects::Effects;
use super::state::State;
use crate::Key;
use crate::backoff;
use crate::error::Error;
use crate::slot::SlotState;
use crate::worker::Worker;

/// The keys that failed lately (at most [`Refusals::MAX`]).
#[derive(Debug, Default)]
pub(crate) struct Refusals(HashMap<Key, Refusal>);

#[derive(Debug)]
struct Refusal {
    /// Failures in a row.
    failures: u32,
    /// Its jobs fail at once until then.
    until: Instant,
    /// Where it failed, and what the worker said.
    slot: usize,
    message: String,
    /// The start of a worker for it failed (`spawn`), not a load.
    start: bool,
}

impl Refusals {
    /// The most keys remembered; past it, the one whose refusal ends
    /// first goes.
    const MAX: usize = 1024;

    /// The key failed `now` in `slot` with `message`.
    pub(crate) fn failed(
        &mut self,
        key: &Key,
        now: Instant,
        slot: usize,
        message: &str,
        start: bool,
    ) {
        if self.0.len() >= Self::MAX && !self.0.contains_key(key) {
            let first = self
                .0
                .iter()
                .min_by_key(|(_, r)| r.until)
                .map(|(k, _)| k.clone());
            if let Some(k) = first {
                self.0.remove(&k);
            }
        }
        let failures = self.0.get(key).map_or(0, |r| r.failures).saturating_add(1);
        let refusal = Refusal {
            failures,
            until: now + backoff::delay(failures),
            slot,
            message: message.to_owned(),
            start,
        };
        self.0.insert(key.clone(), refusal);
    }

    /// The key loaded (or a worker started for it): it is tried at once.
    pub(crate) fn loaded(&mut self, key: &Key) {
        self.0.remove(key);
    }

    /// The refusal of `key` if it lasts past `now`.
    fn active(&self, key: &Key, now: Instant) -> Option<&Refusal> {
        self.0.get(key).filter(|r| now < r.until)
    }
}

impl Refusal {
    /// What a job of `key` fails with `now`.
    fn error(&self, key: &Key, now: Instant) -> Error {
        let left = self.until.saturating_duration_since(now).as_secs_f64();
        let tries = match self.failures {
            1 => "last try".to_owned(),
            n => format!("last {n} tries"),
        };
        let message = format!(
            "{} (the key's {tries} failed: it is tried again in {left:.1} s)",
            self.message
        );
        if self.start {
            Error::warmup(self.slot, message, None)
        } else {
            Error::LoadFailed {
                slot: self.slot,
                key: key.clone(),
                message,
            }
        }
    }
}

impl<W: Worker> State<W> {
    /// Whether a job of `key` that wants a place of its own may get one:
    /// `Err` (what it fails with) while the key is refused and no worker
    /// holds it; `Ok(false)` while it is refused but held (the job waits
    /// for a holder); else `Ok(true)`.
    pub(super) fn may_place(&self, key: &Key) -> Result<bool, Error> {
        let Some(refusal) = self.refusals.active(key, self.now) else {
            return Ok(true);
        };
        if self.holders(key) > 0 {
            return Ok(false);
        }
        Err(refusal.error(key, self.now))
    }

    /// The load of `key` in slot `i` failed with `message`.
    pub(crate) fn key_load_failed(&mut self, i: usize, key: &Key, message: &str) {
        self.refusals.failed(key, self.now, i, message, false);
    }

    /// The start of a worker for `key` in slot `i`, awaited by the waiting
    /// job `awaited_by`, failed with `message`: the key is refused, and a
    /// key kept warm is not started ahead again until reconfigured. Gives
    /// the job that gets the failure: one of that key, or any for a start
    /// for no key. Another (a job of no key, or of another, that took the
    /// start for a place) waits for another place: the failure may be the
    /// key's.
    pub(super) fn key_start_failed(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        key: Option<Key>,
        message: &str,
        awaited_by: Option<u64>,
    ) -> Option<u64> {
        let Some(key) = key else {
            return awaited_by;
        };
        self.refusals.failed(&key, self.now, i, message, true);
        let theirs = awaited_by.filter(|&id| self.waiters.key_of(id) == Some(&key));
        if let Some(id) = awaited_by.filter(|_| theirs.is_none()) {
            self.waiters.set_bound(id, None);
        }
        if self.opts.min_workers_per_key.contains_key(&key) && !self.warm_failed.contains(&key) {
            let err = Error::warmup(i, message, None);
            self.warm_key_failed(fx, key, &err);
        }
        theirs
    }

    /// The worker of slot `i` is ready: a key it was started for is tried
    /// at once from now on.
    pub(super) fn key_started(&mut self, i: usize) {
        if let SlotState::Ready { live, .. } = self.slots.state(i)
            && let Some(key) = live.spawned_for.clone()
        {
            self.refusals.loaded(&key);
        }
    }
}
