//! The sizing's decisions: wake-ups, a new running size, kept workers let
//! go when memory runs short.

use super::effects::{Effects, Wake};
use super::state::State;
use crate::event::{Event, RetireReason};
use crate::sizing::{SizingDecision, SizingInput};
use crate::slot::{SlotState, transitions as t};
use crate::worker::Worker;

impl<W: Worker> State<W> {
    /// Asks the sizing what it wants now, and does it.
    pub(crate) fn wake_sizing(&mut self, fx: &mut Effects<W>) {
        let view = self.view();
        let decision = self.sizing.observe(&view, SizingInput::Wake);
        self.apply_sizing(fx, decision);
    }

    /// The sizing asked to be woken, and is.
    pub(crate) fn on_sizing_wake(&mut self, fx: &mut Effects<W>) {
        self.sizing_wake = None;
        if !self.closed {
            self.wake_sizing(fx);
        }
    }

    pub(crate) fn apply_sizing(&mut self, fx: &mut Effects<W>, decision: SizingDecision) {
        for step in decision.steps {
            fx.emit(Event::SizingStep(step));
        }
        if let Some(trial) = decision.trial {
            fx.emit(Event::SizingTrial(trial));
        }
        if let Some(at) = decision.wake_at {
            self.sizing_wake = Some(fx.wake_at(at, Wake::Sizing));
        }
        if let Some(size) = decision.size {
            if size > self.slots.size() {
                self.kept_limit = usize::MAX;
            }
            self.resize(fx, size);
        }
        if let Some(limit) = decision.close_kept_above {
            self.kept_limit = limit.max(self.slots.size());
            for i in self.kept_limit..self.slots.len() {
                self.retire_idle(fx, i, RetireReason::Memory);
            }
        }
    }

    /// Changes the running size: fewer keeps workers alive (kept), more uses
    /// kept workers first. Returns the slots whose worker it began to
    /// replace (`replace_on_resize`).
    pub(crate) fn resize(&mut self, fx: &mut Effects<W>, size: usize) -> Vec<usize> {
        let size = size.clamp(1, self.slots.capacity());
        let old = self.slots.size();
        if size == old {
            return Vec::new();
        }
        self.slots.resize(size);
        if size < old {
            for i in size..old {
                // A kept worker needs no replacement.
                self.cancel_surge(fx, i);
                self.slots.apply(i, t::end_backoff);
                // A kept worker is never evicted.
                self.slots.edit(i, |s| t::rearm(s, None, None));
                if let SlotState::Starting {
                    awaited_by: Some(id),
                    ..
                } = *self.slots.state(i)
                {
                    self.waiters.set_bound(id, None);
                    self.slots.apply(i, |s| t::await_by(s, None));
                }
            }
        } else {
            for i in old..size {
                // Through Lent, as `place` wants it.
                if let Some((worker, _)) = self.slots.apply(i, t::lend_idle) {
                    self.place(fx, i, worker, None);
                }
            }
        }
        let replaced = self.replace_resized(fx);
        self.kick_startup(fx);
        self.pump(fx);
        replaced
    }
}
