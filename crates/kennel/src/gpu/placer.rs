//! The placement of a pool's workers on the computer's GPUs: which device a
//! new worker goes to, whether one has room now, and what each holds.
//!
//! Each worker placed holds its device from its start until it has ended
//! *and* the driver lists none of its processes there: a replacement waits
//! for the memory of the worker it replaces, not for its exit alone. A
//! device takes [`per_device`](GpusPerWorker::per_device) workers; a
//! worker that gets a device of its own goes only where no other process
//! (another pool's, another user's) computes; with a share, a worker
//! starts only where its `memory` is free as measured, less
//! what the workers already there reserved and have not yet taken. Among
//! the devices with room, the one with the fewest of the pool's workers
//! (then the most free memory, then the first) is chosen: the workers
//! spread before they pack.

use std::sync::Arc;

use super::{GpuPlace, GpuUse, GpusPerWorker};
use crate::computer::{Computer, Gpu};
use crate::error::BuildError;
use crate::options::Options;

/// A worker placed on a device.
#[derive(Debug)]
struct Hold {
    slot: usize,
    generation: u64,
    place: GpuPlace,
    /// Its process, once it is ready (its memory is counted by it).
    pid: Option<u32>,
}

/// The pool's placements on the GPUs of its computer.
pub(crate) struct GpuPlacer {
    computer: Arc<dyn Computer>,
    per_worker: GpusPerWorker,
    /// The devices workers may use (`gpus`); empty: all.
    only: Vec<String>,
    holds: Vec<Hold>,
}

impl std::fmt::Debug for GpuPlacer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuPlacer")
            .field("per_worker", &self.per_worker)
            .field("only", &self.only)
            .field("holds", &self.holds)
            .finish_non_exhaustive()
    }
}

impl GpuPlacer {
    /// A placer for the options' `gpus_per_worker` (none: no placer) on
    /// `computer`, and the most workers its devices take.
    ///
    /// # Errors
    ///
    /// `gpus_per_worker` on a computer without GPUs (with the reason), and
    /// a `gpus` entry that names no device.
    pub(crate) fn new(
        computer: Arc<dyn Computer>,
        opts: &Options,
    ) -> Result<Option<(Self, usize)>, BuildError> {
        let Some(per_worker) = opts.gpus_per_worker else {
            return Ok(None);
        };
        let placer = Self {
            computer,
            per_worker,
            only: opts.gpus.clone(),
            holds: Vec::new(),
        };
        let places = placer.places()?;
        Ok(Some((placer, places)))
    }

    /// The most workers the devices take; checks the options against the
    /// devices.
    fn places(&self) -> Result<usize, BuildError> {
        let gpus = self.computer.gpus().map_err(|e| {
            BuildError::new(
                "gpus_per_worker",
                format!("this machine has no GPU to place workers on: {e} (allowed: leave it out where there is no GPU)"),
            )
        })?;
        if let Some(name) = self
            .only
            .iter()
            .find(|n| !gpus.iter().any(|g| &g.id == *n || &g.uuid == *n))
        {
            let have: Vec<&str> = gpus.iter().map(|g| g.id.as_str()).collect();
            return Err(BuildError::new(
                "gpus",
                format!(
                    "no GPU {name:?} on this machine (allowed: its ids {}, or their UUIDs)",
                    have.join(", ")
                ),
            ));
        }
        let devices = gpus.iter().filter(|g| self.allowed(g)).count();
        Ok((devices * self.per_worker.per_device()).max(1))
    }

    /// New options on a live pool: later workers are placed by them; the
    /// running ones keep their devices.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub(crate) fn reconfigure(&mut self, opts: &Options) -> Result<usize, BuildError> {
        let before = (self.per_worker, std::mem::take(&mut self.only));
        if let Some(per_worker) = opts.gpus_per_worker {
            self.per_worker = per_worker;
        }
        self.only = opts.gpus.clone();
        self.places()
            .inspect_err(|_| (self.per_worker, self.only) = before)
    }

    fn allowed(&self, gpu: &Gpu) -> bool {
        self.only.is_empty() || self.only.iter().any(|n| *n == gpu.id || *n == gpu.uuid)
    }

    /// The device a new worker would be placed on now, if one has room.
    /// `alive` tells whether the worker of a slot and generation lives:
    /// holds of ended workers whose processes left the device are let go
    /// first.
    pub(crate) fn choose(&mut self, alive: impl Fn(usize, u64) -> bool) -> Option<GpuPlace> {
        let gpus = self.computer.gpus().ok()?;
        self.let_go(&gpus, alive);
        let mut best: Option<(&Gpu, usize, u64)> = None;
        for gpu in gpus.iter().filter(|g| self.allowed(g)) {
            let holders = self
                .holds
                .iter()
                .filter(|h| h.place.uuid == gpu.uuid)
                .count();
            let free = self.unreserved(gpu);
            if holders >= self.per_worker.per_device() || free < self.per_worker.memory() {
                continue;
            }
            if self.per_worker == GpusPerWorker::Devices(1) && self.others_on(gpu) {
                // A device of its own: no other process computes there.
                continue;
            }
            if best.is_none_or(|(_, n, f)| {
                (holders, std::cmp::Reverse(free)) < (n, std::cmp::Reverse(f))
            }) {
                best = Some((gpu, holders, free));
            }
        }
        best.map(|(g, _, _)| GpuPlace {
            id: g.id.clone(),
            uuid: g.uuid.clone(),
        })
    }

    /// Whether a process that is none of this pool's workers (another
    /// pool's, another user's) holds memory on `gpu`.
    fn others_on(&self, gpu: &Gpu) -> bool {
        gpu.processes.iter().any(|p| {
            !self
                .holds
                .iter()
                .any(|h| h.pid.is_some_and(|pid| p.of(pid)))
        })
    }

    /// The device's free memory, less what the pool's workers there
    /// reserved and have not yet taken.
    fn unreserved(&self, gpu: &Gpu) -> u64 {
        let reserved = self.per_worker.memory();
        let owed: u64 = self
            .holds
            .iter()
            .filter(|h| h.place.uuid == gpu.uuid)
            .map(|h| reserved.saturating_sub(used(gpu, h.pid).unwrap_or(0)))
            .sum();
        gpu.free.saturating_sub(owed)
    }

    /// Lets go of the holds of workers that ended and whose processes no
    /// longer hold memory on their device (or whose device is gone).
    fn let_go(&mut self, gpus: &[Gpu], alive: impl Fn(usize, u64) -> bool) {
        self.holds.retain(|h| {
            alive(h.slot, h.generation)
                || gpus.iter().any(|g| {
                    g.uuid == h.place.uuid
                        && h.pid
                            .is_some_and(|pid| g.processes.iter().any(|p| p.of(pid)))
                })
        });
    }

    /// The worker starting in `slot` as `generation` goes to `place`.
    pub(crate) fn hold(&mut self, slot: usize, generation: u64, place: GpuPlace) {
        self.holds.push(Hold {
            slot,
            generation,
            place,
            pid: None,
        });
    }

    /// The factory made the worker of `slot` and `generation`, as process
    /// `pid`: its device, for its row.
    pub(crate) fn made(
        &mut self,
        slot: usize,
        generation: u64,
        pid: Option<u32>,
    ) -> Option<GpuUse> {
        let h = self
            .holds
            .iter_mut()
            .find(|h| h.slot == slot && h.generation == generation)?;
        h.pid = pid;
        Some(GpuUse {
            place: h.place.clone(),
            memory: None,
        })
    }

    /// The GPUs now, read for [`usage`](Self::usage); `None` when they
    /// cannot be read.
    pub(crate) fn read(&self) -> Option<Vec<Gpu>> {
        self.computer.gpus().ok()
    }

    /// The device of the worker of `slot` and `generation`, and the memory
    /// its processes hold there in `gpus`.
    pub(crate) fn usage(&self, gpus: &[Gpu], slot: usize, generation: u64) -> Option<GpuUse> {
        let h = self
            .holds
            .iter()
            .find(|h| h.slot == slot && h.generation == generation)?;
        let gpu = gpus.iter().find(|g| g.uuid == h.place.uuid);
        Some(GpuUse {
            place: h.place.clone(),
            memory: gpu.and_then(|g| used(g, h.pid)),
        })
    }
}

/// The bytes the processes of worker `pid` hold on `gpu` (`None`: no pid
/// yet, or the driver does not tell).
fn used(gpu: &Gpu, pid: Option<u32>) -> Option<u64> {
    let pid = pid?;
    let mut total = None;
    for p in gpu.processes.iter().filter(|p| p.of(pid)) {
        total = Some(total.unwrap_or(0) + p.memory?);
    }
    Some(total.unwrap_or(0))
}
