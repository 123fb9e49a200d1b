//! Closing: refuse new jobs, fail waiting ones, end every worker.

use super::effects::Effects;
use super::state::State;
use crate::event::Event;
use crate::slot::Held;
use crate::slot::{EndReason, SlotState, transitions as t};
use crate::worker::Worker;

impl<W: Worker> State<W> {
    /// Refuses new jobs, fails waiting ones, closes idle, kept and starting
    /// workers. Lent workers close when they come back. False when the pool
    /// was closed already.
    pub(crate) fn begin_close(&mut self, fx: &mut Effects<W>) -> bool {
        fx.ended = true;
        if self.closed {
            return false;
        }
        self.stop(fx);
        for i in 0..self.slots.len() {
            let closing = self.end_worker(i, |s| t::close_idle(s, EndReason::PoolClosed));
            fx.closes.extend(closing);
        }
        fx.emit(Event::Closed);
        true
    }

    /// The last pool handle is gone without a close: kill every worker now.
    pub(crate) fn kill_all(&mut self, fx: &mut Effects<W>) {
        self.stop(fx);
        self.kill_sides(fx);
        for i in 0..self.slots.len() {
            if let Some(cell) = self.slots.state(i).cell() {
                fx.kill(cell.killer.clone());
            }
            let closing = self.end_worker(i, |s| t::close_idle(s, EndReason::PoolClosed));
            fx.drops.extend(closing.map(|(worker, _)| worker));
        }
    }

    /// What closing and killing share: no new jobs, no waiting ones, no
    /// timer of the pool's own, no warm-up.
    fn stop(&mut self, fx: &mut Effects<W>) {
        self.closed = true;
        self.waiters.close();
        self.sizing_wake = None;
        self.start_retry = None;
        self.memory_tick = None;
        self.probe_tick = None;
        for i in 0..self.slots.len() {
            self.cancel_surge(fx, i);
            self.slots.apply(i, t::end_backoff);
            let aborted = self
                .slots
                .apply(i, |s| t::abort_start(s, EndReason::PoolClosed));
            fx.kills.extend(aborted.and_then(|a| a.killer));
        }
    }

    /// Whether every worker has ended.
    pub(crate) fn all_ended(&self) -> bool {
        (0..self.slots.len()).all(|i| self.slots.side(i).is_none())
            && self.slots.states(self.slots.len()).all(|s| match s {
                SlotState::Empty { .. } => true,
                SlotState::Starting { .. } => false,
                other => other.cell().is_some_and(|c| c.is_dead()),
            })
    }

    /// Kills the workers jobs still hold, and those closing (the grace of
    /// `close` is over).
    pub(crate) fn kill_lent(&self, fx: &mut Effects<W>) {
        self.kill_sides(fx);
        for s in self.slots.states(self.slots.len()) {
            if let SlotState::Ready {
                held: Held::Lent, ..
            }
            | SlotState::LentGone { .. }
            | SlotState::Closing { .. } = s
                && let Some(cell) = s.cell()
            {
                fx.kill(cell.killer.clone());
            }
        }
    }
}
