//! Slots and their states.
//!
//! A slot is a numbered place `0..capacity` that holds at most one worker.
//! Slots `0..size` are *running*; the others hold *kept* workers or nothing.
//! A slot's state is one enum whose variants carry what belongs to them;
//! it changes only through the typed transitions of
//! [`transitions`](self::transitions), which take the state by value and
//! give back the next one, run by [`Slots::apply`]. A ready worker is `Ready`, with
//! [`Held`] saying whether it is idle or lent.
//!
//! # Invariants
//!
//! 1. A slot holds at most one worker, so the pool never runs more workers
//!    than its capacity: a new worker starts only in an `Empty` slot, and a
//!    slot becomes `Empty` only after its worker has ended (its exit was
//!    seen), or before a worker was made at all.
//! 2. A worker is in exactly one place: the slot (`Idle`), a lease (`Lent`,
//!    `LentGone`), the warm-up task (`Starting`) or its close task
//!    (`Closing`). So no worker is lent twice.
//! 3. The counts the pool reports and decides on are taken by a walk over
//!    the slots ([`Slots::counts`]), so they never drift from the states.
//! 4. A report from a task (warm-up done, exit seen, timer fired) names the
//!    slot and the worker's generation; a report whose generation is not the
//!    slot's current one is stale and changes nothing.
//! 5. Only running slots hold jobs' workers: idle workers in slots at or above
//!    `size` are *kept*, never lent and never evicted.
//! 7. With `max_surge`, a slot may hold a second worker beside its own
//!    ([`Side`]): a replacement warming or warm, or the worker it replaced
//!    leaving. At most `max_surge` slots hold a replacement at once, so the
//!    pool runs at most capacity + `max_surge` workers (leaving ones are
//!    closing, as a retired worker is).
//! 6. A timer belongs to the state that armed it (an idle worker's eviction,
//!    an empty slot's back-off, a live worker's lifetime, a warm-up): a
//!    transition out of that state drops it, which cancels it.

mod cell;
mod counts;
mod keys;
mod replacement;
mod side;
mod slots;
pub(crate) mod transitions;

use std::sync::Arc;

use tokio::time::Instant;

pub(crate) use cell::WorkerCell;
#[cfg(test)]
pub(crate) use counts::Kind;
pub(crate) use keys::{Keys, LetGo, Settling};
pub(crate) use replacement::Replacement;
use replacement::renews;
pub(crate) use side::Side;
pub(crate) use slots::Slots;

use crate::event::RetireReason;
use crate::timer::Timer;

/// The state of one slot; each variant carries its data.
#[derive(Debug)]
pub(crate) enum SlotState<W> {
    /// No worker.
    Empty {
        /// Whether an eager startup may fill it now.
        rest: Rest,
        /// The next worker here replaces one that crashed or was retired.
        respawn: bool,
        /// The key the next worker started for no job is started for: that
        /// of the worker it replaces, started for it (`spawn`) and renewed
        /// by the pool.
        restart_for: Option<crate::Key>,
    },
    /// A worker is being made or warms up, on a task of the pool; dropping
    /// `warmup` cancels that task.
    Starting {
        /// The waiter (by id) that this worker is meant for.
        awaited_by: Option<u64>,
        /// The key it is started for (`spawn`); its record holds it once
        /// the factory returned it.
        key: Option<crate::Key>,
        /// Set once the factory returned the worker.
        live: Option<Live>,
        warmup: Timer,
    },
    /// A ready worker, idle in the slot or lent to a job. Both keep the
    /// worker's `live` in one place: a lend and a return change only
    /// `held` and move nothing else.
    Ready { live: Live, held: Held<W> },
    /// A job holds the worker, which has ended (its exit was seen); the
    /// slot waits for the lease to come back. Carries the back-off that
    /// the exit scheduled.
    LentGone {
        cell: Arc<WorkerCell>,
        backoff: Option<Timer>,
    },
    /// The pool ends the worker (close or kill) and waits for its exit.
    Closing {
        cell: Arc<WorkerCell>,
        reason: EndReason,
        /// What the slot's next worker is started for (see `Empty`).
        restart_for: Option<crate::Key>,
    },
}

impl<W> SlotState<W> {
    /// A slot that never held a worker.
    pub(crate) fn new() -> Self {
        Self::Empty {
            rest: Rest::Wanted,
            respawn: false,
            restart_for: None,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        matches!(self, Self::Empty { .. })
    }

    /// A ready worker that a job (or its probe) holds.
    pub(crate) fn is_lent(&self) -> bool {
        matches!(
            self,
            Self::Ready {
                held: Held::Lent,
                ..
            }
        )
    }

    pub(crate) fn is_idle(&self) -> bool {
        matches!(
            self,
            Self::Ready {
                held: Held::Idle { .. },
                ..
            }
        )
    }

    /// The worker's cell, once the factory made the worker.
    pub(crate) fn cell(&self) -> Option<&Arc<WorkerCell>> {
        match self {
            Self::Empty { .. } => None,
            Self::Starting { live, .. } => live.as_ref().map(|l| &l.cell),
            Self::Ready { live, .. } => Some(&live.cell),
            Self::LentGone { cell, .. } | Self::Closing { cell, .. } => Some(cell),
        }
    }

    /// The live worker's lifetime, where the state holds one.
    pub(crate) fn live_mut(&mut self) -> Option<&mut Live> {
        match self {
            Self::Starting { live, .. } => live.as_mut(),
            Self::Ready { live, .. } => Some(live),
            _ => None,
        }
    }
}

/// Where a ready worker is.
#[derive(Debug)]
pub(crate) enum Held<W> {
    /// In the slot: no job holds it.
    Idle {
        worker: W,
        /// When it turned idle; not read (`None`) when the pool's eviction
        /// never evicts.
        since: Option<Instant>,
        /// The eviction timer, when one runs: held, and cancelled by its drop.
        #[allow(dead_code)]
        evict: Option<Timer>,
    },
    /// A job holds it through a lease.
    Lent,
}

/// Why an empty slot is empty, for the eager startups.
#[derive(Debug)]
pub(crate) enum Rest {
    /// It may start now.
    Wanted,
    /// Its worker exited early: it starts again when the back-off's timer
    /// fires (held, and cancelled by its drop).
    BackOff(#[allow(dead_code)] Timer),
    /// An eviction let its worker go: it starts only for a job.
    Evicted,
}

/// What the pool knows of a worker it has made: its cell, and its lifetime
/// when `max_lifetime` is set.
#[derive(Debug)]
pub(crate) struct Live {
    pub(crate) cell: Arc<WorkerCell>,
    pub(crate) life: Option<Life>,
    pub(crate) record: Record,
    /// The key it was started for (`spawn`).
    pub(crate) spawned_for: Option<crate::Key>,
}

impl Live {
    /// Whether the worker has served the jobs it may serve.
    pub(crate) fn served_all(&self) -> bool {
        let r = &self.record;
        r.max_jobs.is_some_and(|n| r.jobs >= n)
    }

    /// What the slot's next worker is started for once this one ends for
    /// `reason`: its key, if it was started for one and the pool renews it
    /// ([`renews`]); a crashed worker's key may be what crashed it.
    fn restart_for(&self, reason: EndReason) -> Option<crate::Key> {
        match reason {
            EndReason::Retired(r) if renews(r) => self.spawned_for.clone(),
            _ => None,
        }
    }

    /// Whether the worker has outlived its lifetime at `now`.
    pub(crate) fn expired_by(&self, now: Instant) -> bool {
        self.life.as_ref().is_some_and(|l| now >= l.deadline)
    }
}

/// What the pool counts and notes of a live worker: its jobs, and what its
/// status row shows.
#[derive(Debug, Default)]
pub(crate) struct Record {
    /// Jobs it has served.
    pub(crate) jobs: u64,
    /// The jobs it may serve (`max_jobs` with its jitter).
    pub(crate) max_jobs: Option<u64>,
    /// Set while a job holds it and `slow_job` is set: fires once (held,
    /// and cancelled by its drop).
    #[allow(dead_code)]
    pub(crate) slow: Option<Timer>,
    /// Its process id, for workers that are processes.
    pub(crate) pid: Option<u32>,
    /// The running size it was started at (`replace_on_resize`).
    pub(crate) size: usize,
    /// How long its warm-up took, once ready.
    pub(crate) ready_after: Option<std::time::Duration>,
    /// How long its last job held it, when the pool times jobs.
    pub(crate) last_job: Option<std::time::Duration>,
    /// Its memory when last sampled, in bytes.
    pub(crate) memory: Option<u64>,
    /// How it used its threads over its first jobs, once judged.
    pub(crate) threads: Option<crate::ThreadUse>,
    /// Set while the pool probes it (lent to its probe, not to a job).
    pub(crate) probe: Option<Probed>,
    /// When its last probe ended: the next is due `probe_every` after it.
    pub(crate) probed_at: Option<Instant>,
    /// What it said of itself when ready ([`Worker::about`](crate::Worker::about)).
    pub(crate) about: Option<Arc<str>>,
    /// Whether it is being replaced, and how (`max_surge`).
    pub(crate) replacement: Replacement,
    /// The timer that starts its replacement ahead of its lifetime (held,
    /// and cancelled by its drop).
    #[allow(dead_code)]
    pub(crate) surge_due: Option<Timer>,
    /// The keys it holds (keyed jobs).
    pub(crate) keys: Keys,
    /// Its GPU and its memory there (`gpus_per_worker`).
    pub(crate) gpu: Option<crate::GpuUse>,
}

/// A worker under its probe.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probed {
    /// When it turned idle, kept for when it goes back idle (`None` for a
    /// worker probed on its way to a job).
    pub(crate) idle_since: Option<Instant>,
}

/// When a worker has outlived its `max_lifetime` (with its jitter), and the
/// timer that closes it then if it is idle.
#[derive(Debug)]
pub(crate) struct Life {
    pub(crate) deadline: Instant,
    /// Held, and cancelled by its drop.
    #[allow(dead_code)]
    pub(crate) timer: Timer,
}

/// Why the pool ends a worker itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EndReason {
    /// An eviction let it go.
    Evicted,
    /// Retired: a job failed it, aborted, timed out, panicked; lifetime;
    /// reconfiguration; memory.
    Retired(RetireReason),
    /// Its warm-up failed or timed out.
    WarmupFailed,
    /// The pool closes.
    PoolClosed,
    /// It ended on its own while lent, and the lease came back before its
    /// exit was seen.
    Crashed,
}

/// One slot.
#[derive(Debug)]
pub(crate) struct Slot<W> {
    pub(crate) state: SlotState<W>,
    /// Bumped for every new worker; reports with another number are stale.
    pub(crate) generation: u64,
    /// Early exits in a row: the back-off count, kept across the slot's
    /// workers until one runs long enough.
    pub(crate) early_exits: u32,
    /// The highest generation handed out here (to the slot's worker or its
    /// side's), so that no two workers of a slot share one.
    pub(crate) issued: u64,
    /// The replacement warming for its worker, or the worker it replaced
    /// (`max_surge`).
    pub(crate) side: Option<Side<W>>,
}

impl<W> Slot<W> {
    fn new() -> Self {
        Self {
            state: SlotState::new(),
            generation: 0,
            early_exits: 0,
            issued: 0,
            side: None,
        }
    }
}
