//! Metrics through the `metrics` facade, labelled by pool.
//!
//! Handles are made once when the pool is built, so recording costs an
//! atomic operation (nothing when no recorder is installed). The names and
//! meanings are listed in `docs/METRICS.md`.

use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, counter, gauge, histogram};

use crate::cancel::CancelOutcome;
use crate::error::RejectReason;
use crate::event::{Event, RetireReason};
use crate::stats::Stats;

const RETIRE_REASONS: [RetireReason; 11] = [
    RetireReason::Failed,
    RetireReason::Aborted,
    RetireReason::Panicked,
    RetireReason::Timeout,
    RetireReason::Lifetime,
    RetireReason::Reconfigured,
    RetireReason::Memory,
    RetireReason::MaxJobs,
    RetireReason::MaxMemory,
    RetireReason::ProbeFailed,
    RetireReason::Resized,
];

pub(crate) struct PoolMetrics {
    jobs: Counter,
    rejected_full: Counter,
    rejected_wait: Counter,
    retired: [Counter; RETIRE_REASONS.len()],
    started: Counter,
    evicted: Counter,
    exited: Counter,
    crashed: Counter,
    timed_out: Counter,
    cancelled_kept: Counter,
    cancelled_killed: Counter,
    warmup_failed: Counter,
    warmup_seconds: Histogram,
    job_seconds: Histogram,
    wait_seconds: Histogram,
    queue_high_water: Gauge,
    starting: Gauge,
    idle: Gauge,
    lent: Gauge,
    kept: Gauge,
    waiting: Gauge,
    capacity: Gauge,
    size: Gauge,
}

impl std::fmt::Debug for PoolMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolMetrics").finish_non_exhaustive()
    }
}

impl PoolMetrics {
    /// The pool's handles, made once; with `on` false every handle does
    /// nothing (the builder's `metrics(false)`, the default).
    pub(crate) fn new(pool: &str, on: bool) -> Self {
        if !on {
            return metrics::with_local_recorder(&metrics::NoopRecorder, || Self::new(pool, true));
        }
        let p = pool.to_owned();
        let state = |s: &'static str| gauge!("kennel_workers", "pool" => p.clone(), "state" => s);
        Self {
            jobs: counter!("kennel_jobs_total", "pool" => p.clone()),
            rejected_full: counter!("kennel_jobs_rejected_total", "pool" => p.clone(), "reason" => RejectReason::QueueFull.as_str()),
            rejected_wait: counter!("kennel_jobs_rejected_total", "pool" => p.clone(), "reason" => RejectReason::QueueWait.as_str()),
            retired: RETIRE_REASONS.map(|r| {
                counter!("kennel_workers_retired_total", "pool" => p.clone(), "reason" => r.as_str())
            }),
            started: counter!("kennel_workers_started_total", "pool" => p.clone()),
            evicted: counter!("kennel_workers_evicted_total", "pool" => p.clone()),
            exited: counter!("kennel_workers_exited_total", "pool" => p.clone()),
            crashed: counter!("kennel_workers_crashed_total", "pool" => p.clone()),
            timed_out: counter!("kennel_jobs_timed_out_total", "pool" => p.clone()),
            cancelled_kept: counter!("kennel_jobs_cancelled_total", "pool" => p.clone(), "outcome" => CancelOutcome::Kept.as_str()),
            cancelled_killed: counter!("kennel_jobs_cancelled_total", "pool" => p.clone(), "outcome" => CancelOutcome::Killed.as_str()),
            warmup_failed: counter!("kennel_warmups_failed_total", "pool" => p.clone()),
            warmup_seconds: histogram!("kennel_warmup_seconds", "pool" => p.clone()),
            job_seconds: histogram!("kennel_job_seconds", "pool" => p.clone()),
            wait_seconds: histogram!("kennel_wait_seconds", "pool" => p.clone()),
            queue_high_water: gauge!("kennel_queue_high_water", "pool" => p.clone()),
            starting: state("starting"),
            idle: state("idle"),
            lent: state("lent"),
            kept: state("kept"),
            waiting: gauge!("kennel_waiting", "pool" => p.clone()),
            capacity: gauge!("kennel_capacity", "pool" => p.clone()),
            size: gauge!("kennel_size", "pool" => p),
        }
    }

    /// Counts what an event says.
    pub(crate) fn event(&self, event: &Event) {
        match event {
            Event::Starting { .. } => self.started.increment(1),
            Event::Ready { warmup, .. } => self.warmup_seconds.record(warmup.as_secs_f64()),
            Event::WarmupFailed { .. } => self.warmup_failed.increment(1),
            Event::Exited { .. } => self.exited.increment(1),
            Event::Crashed { .. } => self.crashed.increment(1),
            Event::TimedOut { .. } => self.timed_out.increment(1),
            Event::Cancelled { outcome, .. } => match outcome {
                CancelOutcome::Kept => self.cancelled_kept.increment(1),
                CancelOutcome::Killed => self.cancelled_killed.increment(1),
            },
            Event::Evicted { .. } => self.evicted.increment(1),
            Event::Retired { reason, .. } => {
                if let Some(i) = RETIRE_REASONS.iter().position(|r| r == reason) {
                    self.retired[i].increment(1);
                }
            }
            Event::Rejected { reason } => match reason {
                RejectReason::QueueFull => self.rejected_full.increment(1),
                RejectReason::QueueWait => self.rejected_wait.increment(1),
            },
            _ => {}
        }
    }

    /// A job got a worker after waiting this long (if the pool timed it).
    pub(crate) fn lent(&self, waited: Option<Duration>) {
        self.jobs.increment(1);
        if let Some(waited) = waited {
            self.wait_seconds.record(waited.as_secs_f64());
        }
    }

    /// A job gave its worker back after holding it this long.
    pub(crate) fn job_done(&self, held: Duration) {
        self.job_seconds.record(held.as_secs_f64());
    }

    /// Sets the gauges, and the queue's high water when `now` passes it.
    pub(crate) fn publish(&self, now: &Stats, high_water: &mut usize) {
        for (gauge, n) in [
            (&self.starting, now.starting),
            (&self.idle, now.idle),
            (&self.lent, now.lent),
            (&self.kept, now.kept),
            (&self.waiting, now.waiting),
            (&self.capacity, now.capacity),
            (&self.size, now.size),
        ] {
            gauge.set(n as f64);
        }
        if now.waiting > *high_water {
            *high_water = now.waiting;
            self.queue_high_water.set(now.waiting as f64);
        }
    }
}
