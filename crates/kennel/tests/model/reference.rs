//! The reference model's types: the startups, each slot's and each job's
//! state, the model itself and the operations the test generates.

use std::collections::BTreeMap;

pub(crate) type JobId = u32;

/// A worker that ran this long (ten minutes) is not an early exit.
pub(crate) const EARLY_MS: u64 = 600_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StartupKind {
    OnDemand,
    Parallel,
    OrderedReady,
    LeaderFirst,
}

impl StartupKind {
    pub(crate) fn is_eager(self) -> bool {
        self != Self::OnDemand
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `pool.lend()`: the test holds the lease.
    Lend,
    /// `pool.run(job)`: the job runs until the test lets it finish.
    Run,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum St {
    Empty,
    Starting {
        awaited_by: Option<JobId>,
        started: u64,
    },
    Idle {
        since: u64,
        started: u64,
    },
    Lent {
        job: JobId,
        started: u64,
    },
    /// The worker exited while a lend job held it; the slot waits for the
    /// lease to come back.
    Gone {
        job: JobId,
    },
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct SlotM {
    pub(crate) st: St,
    pub(crate) early_exits: u32,
    pub(crate) backoff_until: Option<u64>,
    pub(crate) evicted: bool,
}

impl SlotM {
    pub(crate) fn new() -> Self {
        Self {
            st: St::Empty,
            early_exits: 0,
            backoff_until: None,
            evicted: false,
        }
    }

    pub(crate) fn has_live_worker(&self) -> bool {
        matches!(
            self.st,
            St::Starting { .. } | St::Idle { .. } | St::Lent { .. }
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobSt {
    Waiting,
    Lent {
        slot: usize,
    },
    Rejected,
    WarmupFailed {
        slot: usize,
    },
    /// A run job whose worker exited under it.
    Crashed,
    /// Over, as the test asked (returned, failed, finished, aborted).
    Over,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct JobM {
    pub(crate) kind: Kind,
    pub(crate) st: JobSt,
}

#[derive(Debug, Clone)]
pub(crate) struct Model {
    pub(crate) startup: StartupKind,
    pub(crate) evict_after: Option<u64>,
    pub(crate) max_waiting: usize,
    pub(crate) now: u64,
    pub(crate) capacity: usize,
    pub(crate) size: usize,
    pub(crate) slots: Vec<SlotM>,
    /// The one FIFO of waiting jobs, each maybe bound to a starting slot.
    pub(crate) waiters: Vec<(JobId, Option<usize>)>,
    pub(crate) jobs: BTreeMap<JobId, JobM>,
    pub(crate) next_job: JobId,
    pub(crate) ever_ready: bool,
    /// The deadlines the last `Advance` stopped at, for the real pool to
    /// stop at too.
    pub(crate) stops: Vec<u64>,
}

#[derive(Debug, Clone)]
pub(crate) enum Op {
    Lend,
    Run,
    /// Drop the lease of a lend job.
    Return(JobId),
    /// `lease.fail()`.
    Fail(JobId),
    /// Let a run job's closure return.
    Finish(JobId),
    /// Drop a job's future: while it waits, or while a run job runs.
    Abort(JobId),
    /// The worker warming up in this slot becomes ready.
    Ready(usize),
    /// The worker warming up in this slot fails its warm-up.
    WarmupFail(usize),
    /// The worker in this slot exits on its own.
    Crash(usize),
    Advance(u64),
    Reconfigure(usize),
}
