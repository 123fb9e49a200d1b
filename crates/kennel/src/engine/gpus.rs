//! `gpus_per_worker`: a new worker starts only on a GPU with room for it,
//! and `max_gpu_memory` retires a worker whose processes grew past it on
//! its GPU (ADR 0067). The placement itself is [`GpuPlacer`]'s.
//!
//! [`GpuPlacer`]: crate::gpu::placer::GpuPlacer

use std::time::Duration;

use super::effects::Effects;
use super::state::State;
use crate::event::RetireReason;
use crate::gpu::GpuPlace;
use crate::gpu::placer::GpuPlacer;
use crate::slot::{SlotState, Slots};
use crate::worker::Worker;

/// How often a start that found no GPU with room looks again (the worker
/// it replaces may still be letting go of its memory).
pub(crate) const GPU_RECHECK: Duration = Duration::from_secs(1);

/// Whether the worker of slot `i` and `generation` lives (a surge
/// replacement warming beside the slot's worker included).
fn alive<W>(slots: &Slots<W>, i: usize, generation: u64) -> bool {
    if i >= slots.len() {
        return false;
    }
    let own = slots.generation(i) == generation
        && !matches!(
            slots.state(i),
            SlotState::Empty { .. } | SlotState::LentGone { .. }
        );
    own || slots.side_generation(i) == Some(generation)
}

/// Whether a GPU has room for a new worker (or workers are not placed).
pub(crate) fn gpu_has_room<W>(gpus: &mut Option<GpuPlacer>, slots: &Slots<W>) -> bool {
    gpus.as_mut().is_none_or(|g| {
        g.choose(|i, generation| alive(slots, i, generation))
            .is_some()
    })
}

impl<W: Worker> State<W> {
    /// Whether a new worker may start now: the sizing allows it, and a GPU
    /// has room for it where workers are placed on GPUs.
    pub(crate) fn may_start_worker(&mut self) -> bool {
        self.sizing.may_start(&self.view()) && gpu_has_room(&mut self.gpus, &self.slots)
    }

    /// The GPU a new worker goes to: `Ok(None)` where workers are not
    /// placed, `Err(())` when no GPU has room now.
    pub(crate) fn place_gpu(&mut self) -> Result<Option<GpuPlace>, ()> {
        let Some(gpus) = &mut self.gpus else {
            return Ok(None);
        };
        let slots = &self.slots;
        match gpus.choose(|i, generation| alive(slots, i, generation)) {
            Some(place) => Ok(Some(place)),
            None => Err(()),
        }
    }

    /// A start in the empty slot `i` found no GPU with room: the slot rests
    /// and tries again, and a job that waited for it waits for any worker.
    pub(crate) fn wait_for_gpu(&mut self, fx: &mut Effects<W>, i: usize, awaited_by: Option<u64>) {
        if let Some(id) = awaited_by {
            self.waiters.set_bound(id, None);
        }
        if self.slots.state(i).is_empty() && !self.closed {
            self.rest_until(fx, i, GPU_RECHECK);
        }
    }

    /// Whether the worker of slot `i` held more than `max_gpu_memory` on
    /// its GPU when last sampled.
    pub(crate) fn over_gpu_memory(&self, i: usize) -> bool {
        let Some(limit) = self.opts.max_gpu_memory else {
            return false;
        };
        match self.slots.state(i) {
            SlotState::Ready { live, .. } => live
                .record
                .gpu
                .as_ref()
                .is_some_and(|g| g.memory.is_some_and(|m| m > limit)),
            _ => false,
        }
    }

    /// Reads the GPUs (with the memory sample): each placed worker's row
    /// shows its device and memory there, and a worker over
    /// `max_gpu_memory` is retired as one over `max_memory` is.
    pub(crate) fn sample_gpus(&mut self, fx: &mut Effects<W>) {
        let Some(gpus) = &self.gpus else {
            return;
        };
        let Some(read) = gpus.read() else {
            return;
        };
        let limit = self.opts.max_gpu_memory;
        let mut over = Vec::new();
        for i in 0..self.slots.len() {
            let generation = self.slots.generation(i);
            let Some(usage) = gpus.usage(&read, i, generation) else {
                continue;
            };
            let bytes = usage.memory;
            let placed = self.slots.edit(i, |s| match s.live_mut() {
                Some(live) => {
                    live.record.gpu = Some(usage);
                    true
                }
                None => false,
            });
            if placed && limit.is_some_and(|l| bytes.is_some_and(|b| b > l)) {
                over.push(i);
            }
        }
        let reason = RetireReason::MaxGpuMemory;
        for i in over {
            if !self.closed && !self.replace_later(fx, i, reason) && self.slots.state(i).is_idle() {
                self.retire_idle(fx, i, reason);
            }
        }
    }
}
