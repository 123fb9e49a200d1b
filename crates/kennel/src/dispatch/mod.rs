//! Which worker a job gets: the one lending order, the queue of waiting jobs
//! (fair between tenants, ADR 0065; first come, first served within one
//! tenant's level, ADR 0004) and the future a job waits in.
//!
//! The order (as `@zukhruf/pool` lends): (1) an idle worker in a running
//! slot, the lowest slot first (or the next after the last one lent, with
//! [`Dispatch::RoundRobin`]); (2) a worker that is starting and not already
//! awaited by an earlier job; (3) a new worker started now in the lowest
//! empty running slot; (4) wait in the queue. A worker that becomes idle
//! goes to the waiting job the fair shares put first: with one tenant and
//! one priority, the oldest. [`choose`] is that order, for a
//! new job and for a freed worker alike.

mod lending;
mod loading;
mod queue;
mod share;

use std::sync::Arc;

use tokio::time::Instant;

pub(crate) use lending::lend;
pub(crate) use loading::{load_warm, unload};
pub(crate) use queue::{Handing, Queued, Waiter, Waiters, Waiting};
pub(crate) use share::Class;

/// What a job asks the pool for: a worker for its key, as its tenant, at
/// its priority.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ask {
    pub(crate) key: Option<crate::Key>,
    pub(crate) class: Class,
}

use crate::error::Error;
use crate::slot::{SlotState, Slots, WorkerCell};

/// Which idle worker a job takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "kebab-case")
)]
#[non_exhaustive]
pub enum Dispatch {
    /// The idle worker in the lowest running slot, so that jobs run one at a
    /// time use one worker and the others can be evicted (the default).
    #[default]
    LowestSlot,
    /// The next idle slot after the last one lent, to spread wear.
    RoundRobin,
}

/// A worker handed to a job.
#[derive(Debug)]
pub(crate) struct Granted<W> {
    pub(crate) slot: usize,
    pub(crate) worker: W,
    pub(crate) cell: Arc<WorkerCell>,
    /// When a waiting job was handed the worker, if the pool had read the
    /// clock then (the job reads it itself otherwise).
    pub(crate) at: Option<Instant>,
    /// The job's limits, read in the lock session that lent the worker.
    pub(crate) limits: JobLimits,
    /// The job's key, if it has one.
    pub(crate) key: Option<crate::Key>,
    /// What the worker loads before the job gets it.
    pub(crate) load: Option<Load>,
    /// The job's tenant: its count of running jobs falls when the worker
    /// comes back.
    pub(crate) tenant: Option<crate::Tenant>,
}

/// What a worker loads before a keyed job gets it: the keys it lets go of
/// first (to make room), then the job's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Load {
    pub(crate) key: crate::Key,
    pub(crate) unload: Vec<crate::Key>,
}

/// The pool's limits on one job, as they were when it got its worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct JobLimits {
    pub(crate) job_timeout: Option<std::time::Duration>,
    pub(crate) job_kill_after: Option<std::time::Duration>,
    pub(crate) progress_extends_timeout: bool,
    /// Whether the worker's memory is read when it comes back (`max_memory`).
    pub(crate) max_memory: bool,
}

impl JobLimits {
    pub(crate) fn of(o: &crate::options::Options) -> Self {
        Self {
            job_timeout: o.job_timeout,
            job_kill_after: o.job_kill_after,
            progress_extends_timeout: o.progress_extends_timeout,
            max_memory: o.max_memory.is_some(),
        }
    }
}

impl<W> Granted<W> {
    /// The worker of slot `i` and its cell, under the pool's limits now,
    /// not stamped with a time.
    pub(crate) fn new(slot: usize, worker: W, cell: Arc<WorkerCell>, limits: JobLimits) -> Self {
        Self {
            slot,
            worker,
            cell,
            at: None,
            limits,
            key: None,
            load: None,
            tenant: None,
        }
    }
}

pub(crate) type Grant<W> = Result<Granted<W>, Error>;

/// What a job gets, by the lending order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Choice {
    /// The idle worker of this running slot.
    Idle(usize),
    /// The worker starting in this slot, which no job awaits yet.
    Starting(usize),
    /// A new worker, to start in this empty running slot.
    Start(usize),
    /// Nothing now: wait.
    Queue,
}

/// Where the round robin goes on from.
#[derive(Debug, Default)]
pub(crate) struct Order {
    next: usize,
}

impl Order {
    /// The lending order for a job. With `new_worker` false only an idle
    /// worker counts (the job is already bound to a starting one);
    /// `may_start` asks the sizing whether a new worker may start now.
    pub(crate) fn choose<W>(
        &mut self,
        slots: &Slots<W>,
        dispatch: Dispatch,
        new_worker: bool,
        may_start: impl FnOnce() -> bool,
    ) -> Choice {
        let size = slots.size();
        let idle = match dispatch {
            Dispatch::LowestSlot => slots.first_idle_in(0, size),
            Dispatch::RoundRobin => {
                let from = self.next.min(size);
                let i = slots
                    .first_idle_in(from, size)
                    .or_else(|| slots.first_idle_in(0, from));
                if let Some(i) = i {
                    self.next = i + 1;
                }
                i
            }
        };
        match idle {
            Some(i) => Choice::Idle(i),
            None if new_worker => Self::choose_new(slots, may_start),
            None => Choice::Queue,
        }
    }

    /// No worker is idle: a starting one nobody awaits, or a new one.
    fn choose_new<W>(slots: &Slots<W>, may_start: impl FnOnce() -> bool) -> Choice {
        // The lowest running slot whose worker is starting for no job.
        let unawaited = |s: &SlotState<W>| {
            matches!(
                s,
                SlotState::Starting {
                    awaited_by: None,
                    ..
                }
            )
        };
        if let Some(i) = slots.states(slots.size()).position(unawaited) {
            return Choice::Starting(i);
        }
        match startable(slots) {
            Some(i) if may_start() => Choice::Start(i),
            _ => Choice::Queue,
        }
    }
}

/// The lowest empty running slot.
pub(crate) fn startable<W>(slots: &Slots<W>) -> Option<usize> {
    slots.states(slots.size()).position(SlotState::is_empty)
}
