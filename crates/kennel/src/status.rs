//! Per-worker status: one row per slot: what it holds and its worker's
//! process, age and jobs.

use std::time::Duration;

use crate::event::RetireReason;

/// What a slot holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WorkerState {
    /// No worker; an eager startup may start one.
    Empty,
    /// No worker; the slot waits for its back-off (its last worker exited
    /// early).
    BackingOff,
    /// No worker; an eviction let the last one go, and only a job starts
    /// another.
    Evicted,
    /// A worker warms up.
    Starting,
    /// A ready worker no job has, in a running slot.
    Idle,
    /// A ready worker alive in a slot the sizing does not run now.
    Kept,
    /// A job has the worker.
    Lent,
    /// The pool probes the worker (`probe_every`); no job gets it meanwhile.
    Probing,
    /// The pool ends the worker, or it ended under its job and the job has
    /// not given it back yet.
    Closing,
}

impl WorkerState {
    /// The serialised name (`idle`, `backing-off`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Empty => "empty",
            Self::BackingOff => "backing-off",
            Self::Evicted => "evicted",
            Self::Starting => "starting",
            Self::Idle => "idle",
            Self::Kept => "kept",
            Self::Lent => "lent",
            Self::Probing => "probing",
            Self::Closing => "closing",
        }
    }
}

/// One slot of a pool and its worker, from [`Pool::workers`](crate::Pool::workers).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WorkerRow {
    /// The slot.
    pub slot: usize,
    /// What it holds.
    pub state: WorkerState,
    /// Grows with each worker the slot starts.
    pub generation: u64,
    /// The worker's process id, for workers that are processes.
    pub pid: Option<u32>,
    /// How long the worker has run (from the start of its warm-up).
    pub running_for: Option<Duration>,
    /// How long its warm-up took, once it was ready.
    pub ready_after: Option<Duration>,
    /// Jobs it has served.
    pub jobs: u64,
    /// How long its last job held it, when the pool times jobs.
    pub last_job: Option<Duration>,
    /// Early exits in a row of this slot's workers (its back-off count).
    pub early_exits: u32,
    /// Its memory when last sampled (with `max_memory`), in bytes.
    pub memory: Option<u64>,
    /// How it used the CPU threads it was given over its first jobs, once
    /// measured (workers that report their threads: processes with a
    /// thread budget).
    pub threads: Option<crate::ThreadUse>,
    /// When the pool will retire it itself, and why: `Lifetime` with the
    /// time left, or `MaxJobs` with the jobs left (as a count in `jobs_left`).
    pub retire_due: Option<RetireDue>,
    /// What the worker said of itself when it became ready, as the text of
    /// a JSON object ([`Worker::about`](crate::Worker::about); for a
    /// `Coprocess`, the fields of its ready line besides `ready`).
    pub about: Option<std::sync::Arc<str>>,
    /// The keys it holds (loaded or loading), in order.
    pub keys: Vec<crate::Key>,
    /// Its GPU and the memory its processes hold there, as last sampled
    /// (`gpus_per_worker`).
    pub gpu: Option<crate::GpuUse>,
}

/// A retirement the pool has scheduled for a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetireDue {
    /// Why it will be retired.
    pub reason: RetireReason,
    /// The time left, for a lifetime.
    pub in_time: Option<Duration>,
    /// The jobs left, for `max_jobs`.
    pub jobs_left: Option<u64>,
}
