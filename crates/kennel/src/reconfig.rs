//! Changing a live pool (SPEC S12, pooler's `pool_reconfigure`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::eviction::Eviction;
use crate::sizing::Sizing;

/// What to change in a live pool; what is not set stays.
///
/// The worker factory and the pool's name cannot change: they are not here.
///
/// ```
/// use std::time::Duration;
/// use kennel::{Fixed, Reconfig};
///
/// let change = Reconfig::new()
///     .sizing(Fixed(8))
///     .job_timeout(Some(Duration::from_secs(20)));
/// ```
#[derive(Default)]
#[must_use]
pub struct Reconfig {
    pub(crate) sizing: Option<Box<dyn Sizing>>,
    pub(crate) eviction: Option<Arc<dyn Eviction>>,
    pub(crate) job_timeout: Option<Option<Duration>>,
    pub(crate) warmup_timeout: Option<Option<Duration>>,
    pub(crate) max_waiting: Option<usize>,
    pub(crate) max_queue_wait: Option<Option<Duration>>,
    pub(crate) max_lifetime: Option<Option<Duration>>,
    pub(crate) max_lifetime_jitter: Option<Duration>,
    pub(crate) auto_grow_threshold: Option<Option<usize>>,
    pub(crate) close_grace: Option<Duration>,
    pub(crate) group: Option<Option<String>>,
}

impl fmt::Debug for Reconfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reconfig")
            .field("sizing", &self.sizing)
            .field("eviction", &self.eviction)
            .field("job_timeout", &self.job_timeout)
            .field("warmup_timeout", &self.warmup_timeout)
            .field("max_waiting", &self.max_waiting)
            .field("max_queue_wait", &self.max_queue_wait)
            .field("max_lifetime", &self.max_lifetime)
            .field("max_lifetime_jitter", &self.max_lifetime_jitter)
            .field("auto_grow_threshold", &self.auto_grow_threshold)
            .field("close_grace", &self.close_grace)
            .field("group", &self.group)
            .finish()
    }
}

impl Reconfig {
    /// Changes nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new sizing: its plan gives the new capacity and size. Slots above a
    /// lower capacity drain: idle workers there are closed, lent ones when
    /// they come back.
    pub fn sizing(mut self, sizing: impl Sizing) -> Self {
        self.sizing = Some(Box::new(sizing));
        self
    }

    /// A new eviction; the timers of idle workers are set again, counting
    /// from when each turned idle.
    pub fn eviction(mut self, eviction: impl Eviction) -> Self {
        self.eviction = Some(Arc::new(eviction));
        self
    }

    /// A new `job_timeout` (`None`: no limit), for jobs that start from now.
    pub fn job_timeout(mut self, d: Option<Duration>) -> Self {
        self.job_timeout = Some(d);
        self
    }

    /// A new `warmup_timeout` (`None`: no limit), for warm-ups that start
    /// from now.
    pub fn warmup_timeout(mut self, d: Option<Duration>) -> Self {
        self.warmup_timeout = Some(d);
        self
    }

    /// A new `max_waiting`. Jobs already queued stay queued.
    pub fn max_waiting(mut self, n: usize) -> Self {
        self.max_waiting = Some(n);
        self
    }

    /// A new `max_queue_wait` (`None`: no projected-wait rejection).
    pub fn max_queue_wait(mut self, d: Option<Duration>) -> Self {
        self.max_queue_wait = Some(d);
        self
    }

    /// A new `max_lifetime` (`None`: no limit), for workers that start from now.
    pub fn max_lifetime(mut self, d: Option<Duration>) -> Self {
        self.max_lifetime = Some(d);
        self
    }

    /// A new `max_lifetime_jitter`, below the lifetime.
    pub fn max_lifetime_jitter(mut self, j: Duration) -> Self {
        self.max_lifetime_jitter = Some(j);
        self
    }

    /// A new `auto_grow_threshold` (`None`: off).
    pub fn auto_grow_threshold(mut self, n: Option<usize>) -> Self {
        self.auto_grow_threshold = Some(n);
        self
    }

    /// A new close grace.
    pub fn close_grace(mut self, d: Duration) -> Self {
        self.close_grace = Some(d);
        self
    }

    /// Moves the pool to another group (`None`: no group). Only a
    /// [`Registry`](crate::Registry) can act on it; a pool alone refuses it.
    pub fn group(mut self, group: Option<String>) -> Self {
        self.group = Some(group);
        self
    }
}

/// One thing a reconfiguration did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// The capacity changed.
    CapacityChanged {
        /// Before.
        from: usize,
        /// After.
        to: usize,
    },
    /// The running size changed.
    Resized {
        /// Before.
        from: usize,
        /// After.
        to: usize,
    },
    /// A worker was started in this slot.
    Started {
        /// The slot.
        slot: usize,
    },
    /// The worker of this slot is being closed (its slot was removed); a
    /// lent one closes when it comes back.
    Retired {
        /// The slot.
        slot: usize,
    },
    /// The eviction timers of this many idle workers were set again.
    TimersRescheduled {
        /// How many.
        count: usize,
    },
    /// An option took a new value.
    OptionChanged {
        /// The option's name.
        option: &'static str,
    },
    /// The pool moved to another group.
    GroupChanged {
        /// Before.
        from: Option<String>,
        /// After.
        to: Option<String>,
    },
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CapacityChanged { from, to } => write!(f, "capacity {from} -> {to}"),
            Self::Resized { from, to } => write!(f, "size {from} -> {to}"),
            Self::Started { slot } => write!(f, "started a worker in slot {slot}"),
            Self::Retired { slot } => write!(f, "retired the worker in slot {slot}"),
            Self::TimersRescheduled { count } => {
                write!(f, "rescheduled {count} eviction timer(s)")
            }
            Self::OptionChanged { option } => write!(f, "set {option}"),
            Self::GroupChanged { from, to } => write!(
                f,
                "group {} -> {}",
                from.as_deref().unwrap_or("(none)"),
                to.as_deref().unwrap_or("(none)")
            ),
        }
    }
}
