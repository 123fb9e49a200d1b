//! Keys kept warm: each key of `min_workers_per_key` is loaded ahead of
//! jobs onto that many workers, and never unloaded for another key while
//! it has no more (the keyed order's `kept` keys).

use super::effects::Effects;
use super::state::State;
use crate::error::Error;
use crate::event::Event;
use crate::key::{Key, KeyBinding};
use crate::worker::Worker;

impl<W: Worker> State<W> {
    /// Loads each key kept warm onto idle workers (one with room for a key,
    /// else the one whose other keys were used least recently) until it
    /// has its `min_workers_per_key` workers. A key whose load failed is
    /// not tried again until the pool is reconfigured.
    pub(crate) fn keep_keys_warm(&mut self, fx: &mut Effects<W>) {
        if self.closed || self.opts.key_binding != KeyBinding::Load {
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

    /// A key kept warm could not be loaded: say so, and stop trying it.
    pub(crate) fn warm_key_failed(&mut self, fx: &mut Effects<W>, key: Key, err: &Error) {
        fx.emit(Event::Warning {
            message: format!("key {key:?} of min_workers_per_key was not loaded ahead: {err}"),
        });
        self.warm_failed.insert(key);
    }
}
