//! `max_memory`: the workers' memory, sampled off the lock, and the
//! retirement of a worker that grew past the limit (their GPUs are read at
//! the same tick: `gpus.rs`).

use super::effects::{Effects, Wake};
use super::state::State;
use crate::event::RetireReason;
use crate::slot::SlotState;
use crate::worker::Worker;

impl<W: Worker> State<W> {
    /// Arms the next memory sample (or none, without `max_memory`).
    pub(crate) fn arm_memory(&mut self, fx: &mut Effects<W>) {
        let read = self.opts.max_memory.is_some()
            || self.opts.key_memory_budget.is_some()
            || self.gpus.is_some();
        self.memory_tick = (read && !self.closed)
            .then(|| fx.wake_at(self.now + self.opts.memory_check_every, Wake::Memory));
    }

    /// Time to sample: the meters of idle and lent workers are read off the
    /// lock, and reported to [`on_memory`](Self::on_memory).
    pub(crate) fn on_memory_tick(&mut self, fx: &mut Effects<W>) {
        self.arm_memory(fx);
        self.sample_gpus(fx);
        for i in 0..self.slots.len() {
            if let SlotState::Ready { live, .. } = self.slots.state(i)
                && let Some(meter) = &live.cell.meter
            {
                fx.meters.push((i, self.slots.generation(i), meter.clone()));
            }
        }
    }

    /// Memory samples came back: an idle worker over `max_memory` is
    /// retired now, a lent one when its job returns.
    pub(crate) fn on_memory(
        &mut self,
        fx: &mut Effects<W>,
        samples: Vec<(usize, u64, Option<u64>)>,
    ) {
        for (i, generation, bytes) in samples {
            if i >= self.slots.len() || self.slots.generation(i) != generation {
                continue;
            }
            // Over it: replaced warm first if a surge is allowed (the
            // worker keeps serving meanwhile), else retired now if idle, or
            // when its job returns.
            let reason = RetireReason::MaxMemory;
            if self.note_memory(i, bytes)
                && !self.closed
                && !self.replace_later(fx, i, reason)
                && self.slots.state(i).is_idle()
            {
                self.retire_idle(fx, i, reason);
            }
        }
        self.fit_key_budget(fx);
    }

    /// Records a sample of the worker of slot `i`; whether its memory is
    /// over `max_memory`.
    pub(crate) fn note_memory(&mut self, i: usize, bytes: Option<u64>) -> bool {
        let limit = self.opts.max_memory;
        self.slots.edit(i, |s| {
            let Some(live) = s.live_mut() else {
                return false;
            };
            if bytes.is_some() {
                live.record.memory = bytes;
            }
            limit.is_some_and(|l| live.record.memory.is_some_and(|m| m > l))
        })
    }
}
