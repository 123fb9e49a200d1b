//! After a worker ends: the rest or back-off of its slot, and the startup's
//! refill of the empty slots.

use std::time::Duration;

use super::effects::{Effects, Wake};
use super::state::State;
use crate::backoff;
use crate::event::Event;
use crate::slot::{Rest, SlotState, transitions as t};
use crate::startup::{SlotPhase, Starts};
use crate::worker::Worker;

impl<W: Worker> State<W> {
    /// Leaves the empty slot `i` resting for `delay`: after it, the startup
    /// (or, under `OnDemand`, the next job) starts it again.
    pub(super) fn rest_until(&mut self, fx: &mut Effects<W>, i: usize, delay: Duration) {
        let wake = Wake::Rested {
            slot: i,
            generation: self.slots.generation(i),
        };
        let timer = fx.wake_at(self.now + delay, wake);
        self.slots.apply(i, |s| t::back_off(s, timer));
    }

    /// A slot rested after the pool's own limit retired its worker young:
    /// start it again whatever the startup, as the retirement would have.
    pub(crate) fn on_rested(&mut self, fx: &mut Effects<W>, i: usize, generation: u64) {
        if self.slots.generation(i) != generation || self.closed {
            return;
        }
        self.slots.apply(i, t::end_backoff);
        if i < self.slots.size() && self.slots.state(i).is_empty() && self.may_try_start() {
            self.start_slot(fx, i, None);
        }
    }

    /// For eager startups: start slot `i` again after its back-off. A slot
    /// above the capacity is never refilled, so it rests for nothing (its
    /// exit still counts as an early one).
    pub(crate) fn schedule_refill(&mut self, fx: &mut Effects<W>, i: usize) {
        if self.closed || !self.startup.is_eager() {
            return;
        }
        self.slots.apply(i, t::end_backoff);
        if i >= self.slots.capacity() {
            return;
        }
        let early_exits = self.slots.early_exits(i);
        let delay = backoff::delay(early_exits);
        if delay.is_zero() {
            return;
        }
        let wake = Wake::Backoff {
            slot: i,
            generation: self.slots.generation(i),
        };
        let timer = fx.wake_at(self.now + delay, wake);
        self.slots.apply(i, |s| t::back_off(s, timer));
        fx.emit(Event::Backoff {
            slot: i,
            delay,
            early_exits,
        });
    }

    /// The back-off of slot `i` ended.
    pub(crate) fn on_backoff_done(&mut self, fx: &mut Effects<W>, i: usize, generation: u64) {
        if self.slots.generation(i) != generation {
            return;
        }
        self.slots.apply(i, t::end_backoff);
        self.kick_startup(fx);
    }

    /// A slot became empty: let the startup refill and the jobs take it.
    pub(crate) fn after_empty(&mut self, fx: &mut Effects<W>) {
        // A waiting keyed job takes the slot first: in a `spawn` pool, for
        // a worker of its key, not one the startup would start for none.
        if self.waiters.any_keyed() {
            self.pump(fx);
        }
        self.kick_startup(fx);
        self.pump(fx);
        self.keep_spares(fx);
    }

    /// Asks the startup which running slots to fill now.
    pub(crate) fn kick_startup(&mut self, fx: &mut Effects<W>) {
        if self.closed || !self.startup.is_eager() {
            return;
        }
        let size = self.slots.size();
        let phases: Vec<SlotPhase> = self
            .slots
            .states(size)
            .map(|s| match s {
                SlotState::Empty {
                    rest: Rest::Wanted, ..
                } => SlotPhase::Wanted,
                SlotState::Empty { .. } => SlotPhase::Resting,
                SlotState::Starting { .. } => SlotPhase::Starting,
                _ => SlotPhase::Up,
            })
            .collect();
        let wanted: Vec<usize> = match self.startup.next(&phases, self.ever_ready) {
            Starts::None => Vec::new(),
            Starts::One(i) if phases.get(i) == Some(&SlotPhase::Wanted) => vec![i],
            Starts::One(_) => Vec::new(),
            Starts::AllWanted => (0..size)
                .filter(|&i| phases[i] == SlotPhase::Wanted)
                .collect(),
        };
        for i in wanted {
            // A tripped breaker lets one trial start at a time.
            // A GPU with room is found as it starts: without one the slot
            // rests and looks again.
            if !self.may_try_start() || !self.sizing.may_start(&self.view()) {
                break;
            }
            self.start_slot(fx, i, None);
        }
    }
}
