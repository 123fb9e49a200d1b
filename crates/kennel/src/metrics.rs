//! Metrics through the `metrics` facade, labelled by pool (SPEC S8).
//!
//! Handles are made once when the pool is built, so recording costs an
//! atomic operation (nothing when no recorder is installed). The names and
//! meanings are listed in `docs/METRICS.md`.

use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, counter, gauge, histogram};

use crate::error::RejectReason;
use crate::event::{Event, RetireReason};
use crate::slot::{Changes, Counts};

const RETIRE_REASONS: [RetireReason; 7] = [
    RetireReason::Failed,
    RetireReason::Aborted,
    RetireReason::Panicked,
    RetireReason::Timeout,
    RetireReason::Lifetime,
    RetireReason::Reconfigured,
    RetireReason::Memory,
];

pub(crate) struct PoolMetrics {
    /// Whether a recorder was there when the pool was built. Without one
    /// the handles do nothing, and the pool does not read the clock to
    /// time jobs for them (ADR 0011).
    pub(crate) on: bool,
    jobs: Counter,
    rejected_full: Counter,
    rejected_wait: Counter,
    retired: [Counter; 7],
    started: Counter,
    evicted: Counter,
    exited: Counter,
    crashed: Counter,
    timed_out: Counter,
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
    pub(crate) fn new(pool: &str) -> Self {
        let p = pool.to_owned();
        let state = |s: &'static str| gauge!("kennel_workers", "pool" => p.clone(), "state" => s);
        // The no-op recorder `metrics` falls back to has no size; a recorder
        // that keeps what it records has.
        let on = metrics::with_recorder(|r| std::mem::size_of_val(r) != 0);
        Self {
            on,
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

    /// Sets the gauges whose numbers changed (`changes`, and the queue
    /// length against what `last` published).
    pub(crate) fn publish(
        &self,
        changes: Changes,
        counts: &Counts,
        (waiting, capacity, size): (usize, usize, usize),
        last: &mut Published,
    ) {
        if changes.starting() {
            self.starting.set(counts.starting as f64);
        }
        if changes.idle() {
            self.idle.set(counts.idle as f64);
        }
        if changes.lent() {
            self.lent.set((counts.lent + counts.lent_above) as f64);
        }
        if changes.kept() {
            self.kept.set(counts.kept as f64);
        }
        if changes.capacity() {
            self.capacity.set(capacity as f64);
        }
        if changes.size() {
            self.size.set(size as f64);
        }
        if waiting != last.waiting {
            last.waiting = waiting;
            self.waiting.set(waiting as f64);
            if waiting > last.high_water {
                last.high_water = waiting;
                self.queue_high_water.set(waiting as f64);
            }
        }
    }
}

/// What the queue gauges last showed, kept under the pool's lock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Published {
    pub(crate) waiting: usize,
    high_water: usize,
}

impl Published {
    /// Nothing published yet: the first publish sets the queue gauge.
    pub(crate) fn none() -> Self {
        Self {
            waiting: usize::MAX,
            high_water: 0,
        }
    }
}
