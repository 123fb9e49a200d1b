//! Keys kept warm (each key of `min_workers_per_key` is loaded ahead of
//! jobs onto that many workers, and never unloaded for another key while
//! it has no more), and the key memory budget (`key_memory_budget`).

use std::collections::BTreeMap;

use super::effects::Effects;
use super::state::State;
use crate::error::Error;
use crate::event::Event;
use crate::key::{Key, KeyBinding};
use crate::slot::{Held, SlotState};
use crate::worker::Worker;

impl<W: Worker> State<W> {
    /// Loads each key kept warm onto idle workers (one with room for a key,
    /// else the one whose other keys were used least recently) until it
    /// has its `min_workers_per_key` workers. A key whose load failed is
    /// not tried again until the pool is reconfigured.
    pub(crate) fn keep_keys_warm(&mut self, fx: &mut Effects<W>) {
        if self.closed {
            return;
        }
        if self.opts.key_binding == KeyBinding::Spawn {
            self.keep_spawned_warm(fx);
            return;
        }
        let wanted: Vec<(Key, usize)> = self
            .opts
            .min_workers_per_key
            .iter()
            .filter(|(k, _)| !self.warm_failed.contains(*k))
            .map(|(k, m)| (k.clone(), *m))
            .collect();
        for (key, min) in wanted {
            while self.holders(&key) < min {
                let Some((i, unload)) = self.warm_place(&key) else {
                    break;
                };
                let granted = self.lend_to_load(fx, i, key.clone(), unload);
                fx.key_loads.push(granted);
            }
        }
    }

    /// Keys kept warm with `spawn`: a worker started for each in an empty
    /// running slot (as the sizing allows), else an idle worker of a key
    /// not kept warm retired to make room, one at a time (its slot then
    /// starts for the key, on the next look).
    fn keep_spawned_warm(&mut self, fx: &mut Effects<W>) {
        let wanted: Vec<(Key, usize)> = (self.opts.min_workers_per_key.iter())
            .filter(|(k, _)| !self.warm_failed.contains(*k))
            .map(|(k, m)| (k.clone(), *m))
            .collect();
        for (key, min) in wanted {
            while self.holders(&key) < min {
                if let Some(i) = crate::dispatch::startable(&self.slots)
                    && self.may_try_start()
                    && self.sizing.may_start(&self.view())
                {
                    self.start_slot(fx, i, None);
                    let started = matches!(self.slots.state(i), SlotState::Starting { key: Some(k), .. } if *k == key);
                    if !started {
                        // No GPU with room: the slot looks again later.
                        return;
                    }
                    continue;
                }
                let moving = self.slots.states(self.slots.len()).any(|s| {
                    matches!(
                        s,
                        SlotState::Closing {
                            reason: crate::slot::EndReason::Retired(
                                crate::event::RetireReason::KeyMoved
                            ),
                            ..
                        }
                    )
                });
                if !moving
                    && let Some(v) = self.victim(&key, false, None)
                    && v.idle
                {
                    self.retire_idle(fx, v.slot, crate::event::RetireReason::KeyMoved);
                }
                return;
            }
        }
    }

    /// In a `spawn` pool, the first key kept warm with fewer workers than
    /// `min_workers_per_key` asks.
    pub(crate) fn warm_key_wanted(&self) -> Option<Key> {
        if self.opts.key_binding != KeyBinding::Spawn {
            return None;
        }
        (self.opts.min_workers_per_key.iter())
            .find(|(k, m)| !self.warm_failed.contains(*k) && self.holders(k) < **m)
            .map(|(k, _)| k.clone())
    }

    /// A key kept warm could not be loaded (or, with `spawn`, a worker
    /// could not start for it): say so, and stop trying it ahead.
    pub(crate) fn warm_key_failed(&mut self, fx: &mut Effects<W>, key: Key, err: &Error) {
        fx.emit(Event::Warning {
            message: format!("key {key:?} of min_workers_per_key was not loaded ahead: {err}"),
        });
        self.warm_failed.insert(key);
    }
}

impl<W: Worker> State<W> {
    /// Over `key_memory_budget`: idle workers let go of keys, the least
    /// recently used first, until the workers' memory, less an even share
    /// of each worker's memory per key let go, fits. With `spawn`, the idle
    /// worker itself goes. A key kept warm stays.
    pub(crate) fn fit_key_budget(&mut self, fx: &mut Effects<W>) {
        let Some(budget) = self.opts.key_memory_budget else {
            return;
        };
        let mut held: u64 = (0..self.slots.len())
            .filter_map(|i| match self.slots.state(i) {
                SlotState::Ready { live, .. } => live.record.memory,
                _ => None,
            })
            .sum();
        // The idle workers' keys, the least recently used first, each with
        // its share of its worker's memory.
        let mut keys = Vec::new();
        for i in 0..self.slots.size() {
            let SlotState::Ready {
                live,
                held: Held::Idle { .. },
            } = self.slots.state(i)
            else {
                continue;
            };
            let n = live.record.keys.len();
            let kept = |k: &Key| self.opts.min_workers_per_key.contains_key(k);
            let share = live.record.memory.unwrap_or(0) / n.max(1) as u64;
            let going = live
                .record
                .keys
                .coldest(n, kept, self.now, self.half_life());
            for k in going.unwrap_or_default() {
                keys.push((k.used, i, k.key.clone(), share));
            }
        }
        keys.sort();
        let mut going: BTreeMap<usize, Vec<Key>> = BTreeMap::new();
        for (_, i, key, share) in keys {
            if held <= budget {
                break;
            }
            held = held.saturating_sub(share);
            going.entry(i).or_default().push(key);
        }
        for (i, keys) in going {
            if self.opts.key_binding == KeyBinding::Spawn {
                self.retire_idle(fx, i, crate::event::RetireReason::MaxMemory);
                continue;
            }
            self.let_go_of(i, &keys);
            if let Some(granted) = self.take_slot(i) {
                fx.key_unloads.push((granted, keys));
            }
        }
    }
}
