//! The metric families a pool records, with their kind and help: what a
//! Prometheus `# HELP` line says of each. [`describe_metrics`] hands them
//! to the installed recorder.

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

const fn family(name: &'static str, kind: MetricKind, help: &'static str) -> MetricFamily {
    MetricFamily::new(name, kind, help)
}

/// Every family a pool built with `metrics(true)` records, each labelled
/// `pool` (docs/METRICS.md lists them too).
pub const METRIC_FAMILIES: &[MetricFamily] = &[
    family(
        "kennel_jobs_total",
        MetricKind::Counter,
        "Jobs that got a worker.",
    ),
    family(
        "kennel_jobs_rejected_total",
        MetricKind::Counter,
        "Jobs turned away at once, by reason (queue-depth, queue-wait).",
    ),
    family(
        "kennel_jobs_timed_out_total",
        MetricKind::Counter,
        "Jobs that ran past their job_timeout.",
    ),
    family(
        "kennel_jobs_cancelled_total",
        MetricKind::Counter,
        "Jobs aborted or past job_timeout whose worker was asked to cancel, by outcome (kept, killed).",
    ),
    family(
        "kennel_workers_started_total",
        MetricKind::Counter,
        "Workers the pool started.",
    ),
    family(
        "kennel_workers_retired_total",
        MetricKind::Counter,
        "Workers the pool ended itself, by reason.",
    ),
    family(
        "kennel_workers_evicted_total",
        MetricKind::Counter,
        "Idle workers let go by the eviction.",
    ),
    family(
        "kennel_workers_exited_total",
        MetricKind::Counter,
        "Workers that ended on their own.",
    ),
    family(
        "kennel_workers_crashed_total",
        MetricKind::Counter,
        "Workers that ended while a job held them.",
    ),
    family(
        "kennel_warmups_failed_total",
        MetricKind::Counter,
        "Warm-ups that failed or ran past warmup_timeout.",
    ),
    family(
        "kennel_warmup_seconds",
        MetricKind::Histogram,
        "Seconds from a worker's start until it was ready.",
    ),
    family(
        "kennel_wait_seconds",
        MetricKind::Histogram,
        "Seconds from asking for a worker until getting one.",
    ),
    family(
        "kennel_job_seconds",
        MetricKind::Histogram,
        "Seconds a job held its worker.",
    ),
    family(
        "kennel_workers",
        MetricKind::Gauge,
        "Workers in each state (starting, idle, lent, kept).",
    ),
    family(
        "kennel_waiting",
        MetricKind::Gauge,
        "Jobs waiting for a worker.",
    ),
    family(
        "kennel_capacity",
        MetricKind::Gauge,
        "The most workers the pool may run.",
    ),
    family("kennel_size", MetricKind::Gauge, "The running slots now."),
    family(
        "kennel_queue_high_water",
        MetricKind::Gauge,
        "The most jobs ever waiting at once.",
    ),
];

/// Hands `families` (their help) to the installed `metrics` recorder, so
/// that an exporter can write it (Prometheus' `# HELP`). Call it after the
/// recorder is installed; with none, it does nothing.
pub fn describe_metrics(families: &[MetricFamily]) {
    for f in families {
        match f.kind {
            MetricKind::Counter => ::metrics::describe_counter!(f.name, f.help),
            MetricKind::Gauge => ::metrics::describe_gauge!(f.name, f.help),
            MetricKind::Histogram => ::metrics::describe_histogram!(f.name, f.help),
        }
    }
}
