//! Eviction: an idle worker whose eviction came due goes, unless the
//! eviction's floor, `min_idle` or a key kept warm keeps it.

use tokio::time::Instant;

use super::effects::Effects;
use super::state::State;
use crate::event::Event;
use crate::slot::Held;
use crate::slot::{EndReason, SlotState, transitions as t};
use crate::worker::Worker;

impl<W: Worker> State<W> {
    /// The eviction of the worker that turned idle in slot `i` at `since`
    /// is due.
    pub(crate) fn on_evict(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        generation: u64,
        since: Instant,
    ) {
        let is_this_idle = self.slots.generation(i) == generation
            && i < self.slots.size()
            && matches!(self.slots.state(i), SlotState::Ready { held: Held::Idle { since: s, .. }, .. } if *s == Some(since));
        // A worker being replaced goes when its replacement is ready.
        if !is_this_idle || self.closed || self.slots.side(i).is_some() {
            return;
        }
        let up = self
            .slots
            .states(self.slots.size())
            .filter(|s| matches!(s, SlotState::Starting { .. } | SlotState::Ready { .. }))
            .count();
        // A spare `min_idle` keeps stays too, and a worker that holds a key
        // kept warm at its minimum: evicting either would only start or
        // load another in its place.
        let c = self.slots.counts();
        let spare = c.idle + c.starting <= self.opts.min_idle.unwrap_or(0);
        if up <= self.eviction.floor() || spare || self.holds_warm_key(i) {
            // At the floor: keep it, and let a new idle period begin.
            let now = self.now;
            let started = self.slots.state(i).cell().map_or(now, |c| c.started);
            let evict = self.arm_eviction(fx, i, now, started);
            self.slots.edit(i, |s| t::rearm(s, Some(now), evict));
            return;
        }
        let pid = self.pid_of(i);
        if let Some(closing) = self.end_worker(i, |s| t::close_idle(s, EndReason::Evicted)) {
            fx.emit(Event::Evicted {
                slot: i,
                pid,
                idle_for: self.now.saturating_duration_since(since),
            });
            fx.closes.push(closing);
        }
    }

    /// Sets the eviction timers of the idle running workers again (a new
    /// eviction); a worker that turned idle when nothing read the time
    /// counts from now. Returns how many.
    pub(crate) fn rearm_evictions(&mut self, fx: &mut Effects<W>) -> usize {
        let mut count = 0;
        for i in 0..self.slots.size() {
            let (since, started) = match self.slots.state(i) {
                SlotState::Ready {
                    live,
                    held: Held::Idle { since, .. },
                } => (since.unwrap_or(self.now), live.cell.started),
                _ => continue,
            };
            let evict = (self.eviction.may_evict())
                .then(|| self.arm_eviction(fx, i, since, started))
                .flatten();
            self.slots.edit(i, |s| t::rearm(s, Some(since), evict));
            count += 1;
        }
        count
    }

    /// Whether the worker of slot `i` holds a key `min_workers_per_key`
    /// keeps warm, on no more workers than that.
    fn holds_warm_key(&self, i: usize) -> bool {
        let SlotState::Ready { live, .. } = self.slots.state(i) else {
            return false;
        };
        (self.opts.min_workers_per_key.iter())
            .any(|(k, &m)| live.record.keys.holds(k) && self.holders(k) <= m)
    }
}
