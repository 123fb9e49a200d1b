//! Typed events of the pool, mirrored to `tracing`.

use std::fmt;
use std::time::Duration;

use crate::cancel::CancelOutcome;
use crate::error::RejectReason;
use crate::sizing::{SizingStep, SizingTrial};
use crate::worker::Exit;

/// Why the pool retired a worker itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RetireReason {
    /// A job called [`Lease::fail`](crate::Lease::fail).
    Failed,
    /// A job was dropped while it ran.
    Aborted,
    /// The task that held the lease panicked: its worker's state is unknown.
    Panicked,
    /// A job ran past its `job_timeout`.
    Timeout,
    /// The worker outlived its `max_lifetime`.
    Lifetime,
    /// A reconfiguration let it go.
    Reconfigured,
    /// A kept worker closed because the running workers did not fit in
    /// free memory.
    Memory,
    /// The worker served its `max_jobs`.
    MaxJobs,
    /// The worker's memory passed `max_memory`.
    MaxMemory,
    /// The worker's memory on its GPU passed `max_gpu_memory`.
    MaxGpuMemory,
    /// The worker failed its probe ([`Worker::check`](crate::Worker::check)),
    /// or did not answer it within `probe_timeout`.
    ProbeFailed,
    /// The running size changed and the worker had started at another one
    /// (`replace_on_resize`).
    Resized,
    /// The worker was started for one key and a job of another took its
    /// place (`key_binding = "spawn"`).
    KeyMoved,
    /// The job that held it ended and what it left in the worker (a
    /// client's session) must not reach another job
    /// ([`Lease::discard`](crate::Lease::discard)).
    Discarded,
}

impl RetireReason {
    /// The serialised name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Failed => "failed",
            Self::Aborted => "aborted",
            Self::Panicked => "panicked",
            Self::Timeout => "timeout",
            Self::Lifetime => "lifetime",
            Self::Reconfigured => "reconfigured",
            Self::Memory => "memory",
            Self::MaxJobs => "max-jobs",
            Self::MaxMemory => "max-memory",
            Self::MaxGpuMemory => "max-gpu-memory",
            Self::ProbeFailed => "probe-failed",
            Self::Resized => "resized",
            Self::KeyMoved => "key-moved",
            Self::Discarded => "discarded",
        }
    }
}

impl fmt::Display for RetireReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Something that happened in a pool.
///
/// Read them from [`Pool::events`](crate::Pool::events); each is also a
/// `tracing` event (target `kennel`, with the pool name).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// A worker is being made in `slot` (`worker:starting`).
    Starting {
        /// The slot.
        slot: usize,
    },
    /// A worker finished its warm-up (`worker:ready`).
    Ready {
        /// The slot.
        slot: usize,
        /// The worker's process id, for workers that are processes.
        pid: Option<u32>,
        /// From start until `ready()` resolved.
        warmup: Duration,
    },
    /// A worker's warm-up failed or timed out (`worker:warmup-failed`).
    WarmupFailed {
        /// The slot.
        slot: usize,
        /// The worker's process id, for workers that are processes.
        pid: Option<u32>,
        /// What went wrong.
        message: String,
    },
    /// A worker ended on its own (`worker:exited`).
    Exited {
        /// The slot.
        slot: usize,
        /// The worker's process id, for workers that are processes.
        pid: Option<u32>,
        /// How it ended and how long it ran.
        exit: Exit,
        /// It ran less than 10 minutes.
        early: bool,
    },
    /// A worker ended while a job held it (`worker:crashed`).
    Crashed {
        /// The slot.
        slot: usize,
        /// The worker's process id, for workers that are processes.
        pid: Option<u32>,
        /// How it ended.
        exit: Exit,
    },
    /// A job ran past its time limit (`worker:timeout`); its worker is
    /// killed, or asked to cancel when it can (then a `job:cancelled`
    /// follows).
    TimedOut {
        /// The slot.
        slot: usize,
        /// The worker's process id, for workers that are processes.
        pid: Option<u32>,
        /// The limit.
        after: Duration,
    },
    /// A worker was started to replace one that ended (`worker:respawned`).
    Respawned {
        /// The slot.
        slot: usize,
    },
    /// An idle worker was let go by the eviction (`worker:evicted`).
    Evicted {
        /// The slot.
        slot: usize,
        /// The worker's process id, for workers that are processes.
        pid: Option<u32>,
        /// How long it was idle.
        idle_for: Duration,
    },
    /// A worker loaded a job's key (`worker:loaded`).
    Loaded {
        /// The slot.
        slot: usize,
        /// The key.
        key: crate::Key,
        /// How long the load took.
        took: Duration,
    },
    /// A worker let go of a key to make room for another (`worker:unloaded`).
    Unloaded {
        /// The slot.
        slot: usize,
        /// The key.
        key: crate::Key,
    },
    /// The pool ended a worker itself (`worker:retired`).
    Retired {
        /// The slot.
        slot: usize,
        /// The worker's process id, for workers that are processes.
        pid: Option<u32>,
        /// Why.
        reason: RetireReason,
    },
    /// A slot will be started again after a back-off (`worker:backoff`).
    Backoff {
        /// The slot.
        slot: usize,
        /// How long the pool waits.
        delay: Duration,
        /// Early exits in a row in this slot.
        early_exits: u32,
    },
    /// A job was turned away (`worker:rejected`).
    Rejected {
        /// Why.
        reason: RejectReason,
    },
    /// A sizing step or a memory-forced change of size (`sizing:step`).
    SizingStep(SizingStep),
    /// A learning sizing starts a trial: it runs the tried size for a window
    /// (`sizing:trial`); the step's verdict follows as a `sizing:step`.
    SizingTrial(SizingTrial),
    /// Something a user should know (`pool:warning`).
    Warning {
        /// What.
        message: String,
    },
    /// The crash-loop breaker tripped: starts keep failing and no worker is
    /// ready; jobs fail at once with `Unavailable` (`pool:broken`).
    Broken {
        /// Failed starts in a row.
        failed_starts: u32,
        /// What the last one said.
        last_failure: String,
        /// Until the first trial start.
        retry_after: Duration,
    },
    /// A worker became ready after the pool was broken (`pool:recovered`).
    Recovered {
        /// The failed starts before it.
        failed_starts: u32,
    },
    /// A job whose worker crashed under it runs again, on another worker
    /// (`retry_on_crash`; `job:retried`).
    Retried {
        /// The attempt that starts now (2 for the first retry).
        attempt: u32,
        /// How the crashed worker ended, when the pool knows.
        exit: Option<Exit>,
    },
    /// A job was dropped mid-job or ran past its `job_timeout`, and its
    /// worker was asked to cancel it (`job:cancelled`): it answered within
    /// `cancel_grace` and stays (`kept`), or it did not and was killed
    /// (`killed`).
    Cancelled {
        /// The worker's slot.
        slot: usize,
        /// [`RetireReason::Aborted`] or [`RetireReason::Timeout`].
        reason: RetireReason,
        /// Kept or killed.
        outcome: CancelOutcome,
        /// From the cancel to the worker's answer (or to the kill).
        took: Duration,
    },
    /// A job has held its worker longer than `slow_job` (`job:slow`); said
    /// once per job.
    SlowJob {
        /// The worker's slot.
        slot: usize,
        /// The worker's process id, for workers that are processes.
        pid: Option<u32>,
        /// How long the job has held it.
        running_for: Duration,
    },
    /// A worker failed its probe, or did not answer it in time
    /// (`worker:probe-failed`); it is retired and replaced.
    ProbeFailed {
        /// The slot.
        slot: usize,
        /// What the probe said, or that it timed out.
        message: String,
    },
    /// A replacement for the worker of `slot` starts warming above the
    /// capacity while that worker keeps serving (`max_surge`;
    /// `worker:surging`). When it is ready it takes the slot, and the old
    /// worker is retired (`worker:retired`).
    Surging {
        /// The slot whose worker it replaces.
        slot: usize,
        /// Why the worker is replaced.
        reason: RetireReason,
    },
    /// A replacement could not warm above the capacity: another worker does
    /// not fit in the memory the sizing allows (`worker:surge-skipped`). The
    /// worker is retired first and replaced after, as without a surge.
    SurgeSkipped {
        /// The slot whose worker is replaced.
        slot: usize,
        /// Why the worker is replaced.
        reason: RetireReason,
    },
    /// A worker keeps more than twice its budget of threads working
    /// during its jobs (`worker:oversubscribed`; judged once per worker,
    /// over its first jobs): it and its neighbours fight over the cores.
    /// [`ThreadUse::FIX`](crate::ThreadUse::FIX) says what to do.
    Oversubscribed {
        /// The slot.
        slot: usize,
        /// The worker's process id.
        pid: Option<u32>,
        /// What was measured.
        usage: crate::ThreadUse,
    },
    /// The pool closed (`pool:closed`).
    Closed,
}

impl Event {
    /// The serialised name (`worker:crashed`, `sizing:step`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Starting { .. } => "worker:starting",
            Self::Ready { .. } => "worker:ready",
            Self::WarmupFailed { .. } => "worker:warmup-failed",
            Self::Exited { .. } => "worker:exited",
            Self::Crashed { .. } => "worker:crashed",
            Self::TimedOut { .. } => "worker:timeout",
            Self::Respawned { .. } => "worker:respawned",
            Self::Evicted { .. } => "worker:evicted",
            Self::Loaded { .. } => "worker:loaded",
            Self::Unloaded { .. } => "worker:unloaded",
            Self::Retired { .. } => "worker:retired",
            Self::Backoff { .. } => "worker:backoff",
            Self::Rejected { .. } => "worker:rejected",
            Self::SizingStep(_) => "sizing:step",
            Self::SizingTrial(_) => "sizing:trial",
            Self::Warning { .. } => "pool:warning",
            Self::Broken { .. } => "pool:broken",
            Self::Recovered { .. } => "pool:recovered",
            Self::Retried { .. } => "job:retried",
            Self::SlowJob { .. } => "job:slow",
            Self::Cancelled { .. } => "job:cancelled",
            Self::ProbeFailed { .. } => "worker:probe-failed",
            Self::Surging { .. } => "worker:surging",
            Self::SurgeSkipped { .. } => "worker:surge-skipped",
            Self::Oversubscribed { .. } => "worker:oversubscribed",
            Self::Closed => "pool:closed",
        }
    }

    /// The slot the event is about, if any.
    pub fn slot(&self) -> Option<usize> {
        match self {
            Self::Starting { slot }
            | Self::Ready { slot, .. }
            | Self::WarmupFailed { slot, .. }
            | Self::Exited { slot, .. }
            | Self::Crashed { slot, .. }
            | Self::TimedOut { slot, .. }
            | Self::Respawned { slot }
            | Self::Evicted { slot, .. }
            | Self::Loaded { slot, .. }
            | Self::Unloaded { slot, .. }
            | Self::Retired { slot, .. }
            | Self::Backoff { slot, .. }
            | Self::SlowJob { slot, .. }
            | Self::Cancelled { slot, .. }
            | Self::ProbeFailed { slot, .. }
            | Self::Surging { slot, .. }
            | Self::SurgeSkipped { slot, .. }
            | Self::Oversubscribed { slot, .. } => Some(*slot),
            _ => None,
        }
    }

    /// The process id of the worker the event is about, when the pool knows
    /// it (workers that are processes report theirs).
    pub fn pid(&self) -> Option<u32> {
        match self {
            Self::Ready { pid, .. }
            | Self::WarmupFailed { pid, .. }
            | Self::Exited { pid, .. }
            | Self::Crashed { pid, .. }
            | Self::TimedOut { pid, .. }
            | Self::Evicted { pid, .. }
            | Self::Retired { pid, .. }
            | Self::SlowJob { pid, .. }
            | Self::Oversubscribed { pid, .. } => *pid,
            _ => None,
        }
    }

    /// Logs the event with structured fields (`event`, `pool`, `slot`,
    /// `pid`, and its own: `reason`, `status`, `message`, …): failures at
    /// WARN; time-outs, back-offs, slow jobs and sizing steps at INFO;
    /// rejections (which come by the thousand under overload; the service
    /// logs them as periodic summaries) and the rest at DEBUG.
    pub(crate) fn trace(&self, pool: &str) {
        let (slot, pid) = (self.slot(), self.pid());
        macro_rules! at {
            ($level:ident, $($fields:tt)*) => {
                tracing::$level!(target: "kennel", pool, event = self.name(), slot, pid, $($fields)*)
            };
        }
        match self {
            Self::Crashed { exit, .. } => {
                at!(warn, status = %exit.status, ran_for = ?exit.ran_for, "worker crashed under a job");
            }
            Self::WarmupFailed { message, .. } => at!(warn, reason = %message, "warm-up failed"),
            Self::Oversubscribed { usage, .. } => {
                at!(warn, figures = %usage, fix = crate::ThreadUse::FIX, "worker oversubscribes its threads");
            }
            Self::Warning { message } => at!(warn, reason = %message, "pool warning"),
            Self::Broken {
                failed_starts,
                last_failure,
                retry_after,
            } => {
                at!(warn, failed_starts, reason = %last_failure, retry_after = ?retry_after, "pool broken: its workers keep failing to start");
            }
            Self::TimedOut { after, .. } => {
                at!(info, after = ?after, "job timed out; its worker is killed");
            }
            Self::Backoff {
                delay, early_exits, ..
            } => at!(info, delay = ?delay, early_exits, "slot backs off"),
            Self::SlowJob { running_for, .. } => at!(info, running_for = ?running_for, "slow job"),
            Self::SizingStep(step) => {
                at!(info, from = step.from, tried = step.tried, to = step.to, reason = ?step.verdict, "sizing step");
            }
            Self::SizingTrial(trial) => {
                at!(info, from = trial.from, tried = trial.tried, figures = %trial.figures, "sizing trial");
            }
            Self::Recovered { failed_starts } => at!(info, failed_starts, "pool recovered"),
            Self::Rejected { reason } => at!(debug, reason = reason.as_str(), "job rejected"),
            Self::Retired { reason, .. } => at!(debug, reason = reason.as_str(), "worker retired"),
            Self::Exited { exit, early, .. } => {
                at!(debug, status = %exit.status, early, "worker exited");
            }
            Self::Ready { warmup, .. } => at!(debug, warmup = ?warmup, "worker ready"),
            Self::Evicted { idle_for, .. } => at!(debug, idle_for = ?idle_for, "worker evicted"),
            Self::Loaded { key, took, .. } => at!(debug, key = %key, took = ?took, "key loaded"),
            Self::Unloaded { key, .. } => at!(debug, key = %key, "key unloaded"),
            Self::Retried { attempt, .. } => at!(debug, attempt, "job retried"),
            Self::Cancelled {
                reason,
                outcome,
                took,
                ..
            } => {
                at!(info, reason = reason.as_str(), outcome = ?outcome, took = ?took, "job cancelled");
            }
            Self::ProbeFailed { message, .. } => {
                at!(info, reason = %message, "worker probe failed");
            }
            Self::Surging { reason, .. } => {
                at!(
                    debug,
                    reason = reason.as_str(),
                    "replacement warms above the capacity"
                );
            }
            Self::SurgeSkipped { reason, .. } => {
                at!(
                    info,
                    reason = reason.as_str(),
                    "no memory for a replacement above the capacity: retired first"
                );
            }
            _ => at!(debug, "pool event"),
        }
    }
}
