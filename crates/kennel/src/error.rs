//! The pool's errors.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::worker::{BoxError, Exit};

/// Why a job was turned away before it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// The wait queue already holds `max_waiting` jobs (`queue-depth`).
    QueueFull,
    /// The projected wait is above `max_queue_wait` (`queue-wait`).
    QueueWait,
    /// The job's tenant already has `max_queued` jobs waiting
    /// (`tenant-limit`).
    TenantLimit,
}

impl RejectReason {
    /// The serialised name, as in the `worker:rejected` event.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::QueueFull => "queue-depth",
            Self::QueueWait => "queue-wait",
            Self::TenantLimit => "tenant-limit",
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::QueueFull => "the wait queue is full",
            Self::QueueWait => "the projected wait is too long",
            Self::TenantLimit => "the tenant has as many jobs waiting as it may",
        })
    }
}

/// An error of the pool: the job did not get a worker, or lost it.
///
/// A job's own result is never wrapped: `run` returns `Ok(job_output)` when
/// the job ran to its end, whatever the job returned.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The job was turned away at once.
    #[error("job rejected: {reason}")]
    Rejected {
        /// Why.
        reason: RejectReason,
    },
    /// The job's tenant already has as many jobs waiting as its share lets
    /// it ([`TenantShare::max_queued`](crate::TenantShare::max_queued)); the
    /// pool's own bounds are [`Error::Rejected`].
    #[error(
        "tenant {} has as many jobs waiting as it may; try again in {retry_after:?}",
        tenant.as_ref().map_or("(none)", crate::Tenant::as_str)
    )]
    TenantLimit {
        /// The tenant.
        tenant: Option<crate::Tenant>,
        /// Its own projected wait now: when a job of it would likely be
        /// taken.
        retry_after: Duration,
    },
    /// No worker could be lent within the time given to `lend_timeout` or
    /// `run_timeout`.
    #[error("no worker was free within {after:?}")]
    LendTimeout {
        /// The limit that ended.
        after: Duration,
    },
    /// The job ran longer than its `job_timeout` (or `job_kill_after`); its
    /// worker was killed, or, if it can cancel, asked to stop and kept when
    /// it answered within `cancel_grace`.
    #[error("job exceeded its {after:?} timeout")]
    Timeout {
        /// The limit that ended.
        after: Duration,
    },
    /// The warm-up of the worker this job waited for failed or timed out.
    #[error("worker in slot {slot} failed its warm-up: {message}")]
    WarmupFailed {
        /// The slot of the worker.
        slot: usize,
        /// What went wrong.
        message: String,
        /// The worker's own error, when it gave one.
        #[source]
        source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// The worker ended while the job held it.
    #[error(
        "worker failed before responding{}{}",
        attempts_note(*attempts),
        last_words_note(exit.as_deref())
    )]
    Crashed {
        /// How the worker ended, when the pool knows.
        exit: Option<Box<Exit>>,
        /// How many times the job ran (more than 1 with `retry_on_crash`),
        /// each time on a worker that crashed under it.
        attempts: u32,
    },
    /// The worker could not load the job's key
    /// ([`Worker::load`](crate::Worker::load) failed); the worker keeps
    /// serving with the keys it held.
    #[error("worker in slot {slot} could not load key {key:?}: {message}")]
    LoadFailed {
        /// The slot of the worker.
        slot: usize,
        /// The key.
        key: crate::Key,
        /// What the worker said.
        message: String,
    },
    /// The pool's workers keep failing to start (the crash-loop breaker):
    /// the job was turned away at once instead of starting another.
    #[error(
        "the pool is unavailable: its workers keep failing to start (last: {last_failure}); next try in {retry_after:?}"
    )]
    Unavailable {
        /// How long until the pool tries a start again.
        retry_after: Duration,
        /// What the last failed start said.
        last_failure: String,
    },
    /// The pool is closed (or closing) and takes no jobs.
    #[error("pool is closed")]
    Closed,
    /// No pool of this name is in the registry.
    #[error("no pool named `{name}`")]
    NoSuchPool {
        /// The name asked for.
        name: String,
    },
    /// A pool of this name is already in the registry.
    #[error("a pool named `{name}` already exists")]
    DuplicatePool {
        /// The name.
        name: String,
    },
    /// No pool of the group could lend a worker at once (or the group has
    /// no pool).
    #[error("no pool in group `{group}` can lend a worker now")]
    NoMembers {
        /// The group.
        group: String,
    },
    /// A reconfiguration was refused: an option is out of its range.
    #[error(transparent)]
    Config(#[from] BuildError),
}

fn attempts_note(attempts: u32) -> String {
    if attempts > 1 {
        format!(" ({attempts} attempts, each on a worker that crashed)")
    } else {
        String::new()
    }
}

/// The last line the worker wrote to stderr, when its exit carries it.
fn last_words_note(exit: Option<&Exit>) -> String {
    exit.and_then(|e| e.last_words.last())
        .map(|line| format!("; last stderr line: {line}"))
        .unwrap_or_default()
}

impl Error {
    pub(crate) fn warmup(
        slot: usize,
        message: impl Into<String>,
        source: Option<BoxError>,
    ) -> Self {
        Self::WarmupFailed {
            slot,
            message: message.into(),
            source: source.map(Arc::from),
        }
    }

    /// A short, stable name for the kind of error (`rejected`, `timeout`, …),
    /// as used in serialised errors.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Rejected { .. } => "rejected",
            Self::TenantLimit { .. } => "tenant-limit",
            Self::LendTimeout { .. } => "lend-timeout",
            Self::Timeout { .. } => "timeout",
            Self::WarmupFailed { .. } => "warmup-failed",
            Self::Crashed { .. } => "crashed",
            Self::LoadFailed { .. } => "load-failed",
            Self::Unavailable { .. } => "unavailable",
            Self::Closed => "closed",
            Self::NoSuchPool { .. } => "no-such-pool",
            Self::DuplicatePool { .. } => "duplicate-pool",
            Self::NoMembers { .. } => "no-members",
            Self::Config(_) => "config",
        }
    }
}

/// A pool option out of its allowed range, found when the pool is built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid option `{option}`: {message}")]
pub struct BuildError {
    /// The option's name, as its field of `Options` spells it.
    pub option: &'static str,
    /// The value given and what is allowed.
    pub message: String,
}

impl BuildError {
    pub(crate) fn new(option: &'static str, message: impl Into<String>) -> Self {
        Self {
            option,
            message: message.into(),
        }
    }
}
