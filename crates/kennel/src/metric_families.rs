//! The metric families a pool records, with their kind and help: what a
//! Prometheus `# HELP` line says of each. [`describe_metrics`] hands them
//! to the installed recorder.

use MetricKind::{Counter, Gauge, Histogram};

/// The kind of a metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetricKind {
    /// Only grows.
    Counter,
    /// Goes up and down.
    Gauge,
    /// A distribution of observations (seconds).
    Histogram,
}

impl MetricKind {
    /// The Prometheus word (`counter`, `gauge`, `histogram`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Counter => "counter",
            Self::Gauge => "gauge",
            Self::Histogram => "histogram",
        }
    }
}

/// One metric family: its name, kind and what it counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MetricFamily {
    /// The name (`kennel_jobs_total`).
    pub name: &'static str,
    /// Its kind.
    pub kind: MetricKind,
    /// What it counts, in one line.
    pub help: &'static str,
}

impl MetricFamily {
    /// A family record.
    pub const fn new(name: &'static str, kind: MetricKind, help: &'static str) -> Self {
        Self { name, kind, help }
    }
}

/// Every family a pool built with `metrics(true)` records, each labelled
/// `pool` (docs/METRICS.md lists them too).
pub const METRIC_FAMILIES: &[MetricFamily] = &[
    MetricFamily::new("kennel_jobs_total", Counter, "Jobs that got a worker."),
    MetricFamily::new(
        "kennel_jobs_rejected_total",
        Counter,
        "Jobs turned away at once, by reason (queue-depth, queue-wait, tenant-limit).",
    ),
    MetricFamily::new(
        "kennel_jobs_timed_out_total",
        Counter,
        "Jobs that ran past their job_timeout.",
    ),
    MetricFamily::new(
        "kennel_jobs_cancelled_total",
        Counter,
        "Jobs aborted or past job_timeout whose worker was asked to cancel, by outcome (kept, killed).",
    ),
    MetricFamily::new(
        "kennel_workers_started_total",
        Counter,
        "Workers the pool started.",
    ),
    MetricFamily::new(
        "kennel_workers_retired_total",
        Counter,
        "Workers the pool ended itself, by reason.",
    ),
    MetricFamily::new(
        "kennel_workers_evicted_total",
        Counter,
        "Idle workers let go by the eviction.",
    ),
    MetricFamily::new(
        "kennel_workers_exited_total",
        Counter,
        "Workers that ended on their own.",
    ),
    MetricFamily::new(
        "kennel_workers_crashed_total",
        Counter,
        "Workers that ended while a job held them.",
    ),
    MetricFamily::new(
        "kennel_warmups_failed_total",
        Counter,
        "Warm-ups that failed or ran past warmup_timeout.",
    ),
    MetricFamily::new(
        "kennel_warmup_seconds",
        Histogram,
        "Seconds from a worker's start until it was ready.",
    ),
    MetricFamily::new(
        "kennel_key_hits_total",
        Counter,
        "Keyed jobs that got a worker already holding their key.",
    ),
    MetricFamily::new(
        "kennel_key_loads_total",
        Counter,
        "Keys loaded by workers for keyed jobs.",
    ),
    MetricFamily::new(
        "kennel_key_load_seconds",
        Histogram,
        "Seconds a worker took to load a key.",
    ),
    MetricFamily::new(
        "kennel_wait_seconds",
        Histogram,
        "Seconds from asking for a worker until getting one.",
    ),
    MetricFamily::new(
        "kennel_job_seconds",
        Histogram,
        "Seconds a job held its worker.",
    ),
    MetricFamily::new(
        "kennel_workers",
        Gauge,
        "Workers in each state (starting, idle, lent, kept).",
    ),
    MetricFamily::new("kennel_waiting", Gauge, "Jobs waiting for a worker."),
    MetricFamily::new(
        "kennel_capacity",
        Gauge,
        "The most workers the pool may run.",
    ),
    MetricFamily::new("kennel_size", Gauge, "The running slots now."),
    MetricFamily::new(
        "kennel_queue_high_water",
        Gauge,
        "The most jobs ever waiting at once.",
    ),
];

/// Hands `families` (their help) to the installed `metrics` recorder, so
/// that an exporter can write it (Prometheus' `# HELP`). Call it after the
/// recorder is installed; with none, it does nothing.
pub fn describe_metrics(families: &[MetricFamily]) {
    for f in families {
        match f.kind {
            Counter => ::metrics::describe_counter!(f.name, f.help),
            Gauge => ::metrics::describe_gauge!(f.name, f.help),
            Histogram => ::metrics::describe_histogram!(f.name, f.help),
        }
    }
}
