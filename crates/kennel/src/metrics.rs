//! Metrics through the `metrics` facade, labelled by pool.
//!
//! Handles are made once when the pool is built, in the recorder installed
//! then. The names and meanings are listed in `docs/METRICS.md`.

use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, counter, gauge, histogram};

use crate::cancel::CancelOutcome;
use crate::error::RejectReason;
use crate::event::{Event, RetireReason};
use crate::stats::Stats;

/// Every retire reason, in the order of its declaration (a counter each).
const RETIRE_REASONS: [RetireReason; 14] = [
    RetireReason::Failed,
    RetireReason::Aborted,
    RetireReason::Panicked,
    RetireReason::Timeout,
    RetireReason::Lifetime,
    RetireReason::Reconfigured,
    RetireReason::Memory,
    RetireReason::MaxJobs,
    RetireReason::MaxMemory,
    RetireReason::MaxGpuMemory,
    RetireReason::ProbeFailed,
    RetireReason::Resized,
    RetireReason::KeyMoved,
    RetireReason::Discarded,
];

/// The pool's metric handles; the arrays follow the declaration order of
/// the enum that labels them.
pub(crate) struct PoolMetrics {
    jobs: Counter,
    rejected: [Counter; 3],
    retired: [Counter; RETIRE_REASONS.len()],
    started: Counter,
    evicted: Counter,
    exited: Counter,
    crashed: Counter,
    timed_out: Counter,
    cancelled: [Counter; 2],
    warmup_failed: Counter,
    warmup_seconds: Histogram,
    key_hits: Counter,
    key_loads: Counter,
    load_seconds: Histogram,
    job_seconds: Histogram,
    wait_seconds: Histogram,
    queue_high_water: Gauge,
    /// Starting, idle, lent, kept.
    workers: [Gauge; 4],
    waiting: Gauge,
    capacity: Gauge,
    size: Gauge,
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
        let rejected = |r: RejectReason| counter!("kennel_jobs_rejected_total", "pool" => p.clone(), "reason" => r.as_str());
        let cancelled = |o: CancelOutcome| counter!("kennel_jobs_cancelled_total", "pool" => p.clone(), "outcome" => o.as_str());
        Self {
            jobs: counter!("kennel_jobs_total", "pool" => p.clone()),
            rejected: [
                RejectReason::QueueFull,
                RejectReason::QueueWait,
                RejectReason::TenantLimit,
            ]
            .map(rejected),
            retired: RETIRE_REASONS.map(|r| {
                counter!("kennel_workers_retired_total", "pool" => p.clone(), "reason" => r.as_str())
            }),
            started: counter!("kennel_workers_started_total", "pool" => p.clone()),
            evicted: counter!("kennel_workers_evicted_total", "pool" => p.clone()),
            exited: counter!("kennel_workers_exited_total", "pool" => p.clone()),
            crashed: counter!("kennel_workers_crashed_total", "pool" => p.clone()),
            timed_out: counter!("kennel_jobs_timed_out_total", "pool" => p.clone()),
            cancelled: [CancelOutcome::Kept, CancelOutcome::Killed].map(cancelled),
            warmup_failed: counter!("kennel_warmups_failed_total", "pool" => p.clone()),
            warmup_seconds: histogram!("kennel_warmup_seconds", "pool" => p.clone()),
            key_hits: counter!("kennel_key_hits_total", "pool" => p.clone()),
            key_loads: counter!("kennel_key_loads_total", "pool" => p.clone()),
            load_seconds: histogram!("kennel_key_load_seconds", "pool" => p.clone()),
            job_seconds: histogram!("kennel_job_seconds", "pool" => p.clone()),
            wait_seconds: histogram!("kennel_wait_seconds", "pool" => p.clone()),
            queue_high_water: gauge!("kennel_queue_high_water", "pool" => p.clone()),
            workers: ["starting", "idle", "lent", "kept"].map(state),
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
            Event::Cancelled { outcome, .. } => self.cancelled[*outcome as usize].increment(1),
            Event::Evicted { .. } => self.evicted.increment(1),
            Event::Loaded { took, .. } => {
                self.key_loads.increment(1);
                self.load_seconds.record(took.as_secs_f64());
            }
            Event::Retired { reason, .. } => self.retired[*reason as usize].increment(1),
            Event::Rejected { reason } => self.rejected[*reason as usize].increment(1),
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

    /// A keyed job got a worker that held its key.
    pub(crate) fn key_hit(&self) {
        self.key_hits.increment(1);
    }

    /// A job gave its worker back after holding it this long.
    pub(crate) fn job_done(&self, held: Duration) {
        self.job_seconds.record(held.as_secs_f64());
    }

    /// Sets the gauges, and the queue's high water when `now` passes it.
    pub(crate) fn publish(&self, now: &Stats, high_water: &mut usize) {
        let workers = [now.starting, now.idle, now.lent, now.kept];
        for (gauge, n) in self.workers.iter().zip(workers) {
            gauge.set(n as f64);
        }
        self.waiting.set(now.waiting as f64);
        self.capacity.set(now.capacity as f64);
        self.size.set(now.size as f64);
        if now.waiting > *high_water {
            *high_water = now.waiting;
            self.queue_high_water.set(now.waiting as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_label_array_follows_its_enums_declaration_order() {
        for (i, r) in RETIRE_REASONS.iter().enumerate() {
            assert_eq!(*r as usize, i, "{r}");
        }
        assert_eq!(RejectReason::QueueWait as usize, 1);
        assert_eq!(CancelOutcome::Killed as usize, 1);
    }
}
