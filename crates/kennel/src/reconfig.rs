//! Changing a live pool (pooler's `pool_reconfigure`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::dispatch::Dispatch;
use crate::eviction::Eviction;
use crate::options::Options;
use crate::sizing::Sizing;

/// What to change in a live pool; what is not set stays. A patch of the
/// pool's [`Options`], with a new sizing or eviction.
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
    edits: Vec<(&'static str, Edit)>,
    pub(crate) group: Option<Option<String>>,
}

type Edit = Box<dyn FnOnce(&mut Options) + Send>;

impl fmt::Debug for Reconfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let edits: Vec<&str> = self.edits.iter().map(|(name, _)| *name).collect();
        f.debug_struct("Reconfig")
            .field("sizing", &self.sizing)
            .field("eviction", &self.eviction)
            .field("options", &edits)
            .field("group", &self.group)
            .finish()
    }
}

impl Reconfig {
    /// Changes nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn edit(
        mut self,
        name: &'static str,
        edit: impl FnOnce(&mut Options) + Send + 'static,
    ) -> Self {
        self.edits.push((name, Box::new(edit)));
        self
    }

    /// The options with this patch applied (validated by the caller).
    pub(crate) fn patch(&mut self, options: &Options) -> Options {
        let mut patched = options.clone();
        for (_, edit) in self.edits.drain(..) {
            edit(&mut patched);
        }
        patched
    }

    /// Every option at once: the pool takes `options` whole.
    pub fn options(self, options: Options) -> Self {
        self.edit("options", move |o| *o = options)
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
    pub fn job_timeout(self, d: Option<Duration>) -> Self {
        self.edit("job_timeout", move |o| o.job_timeout = d)
    }

    /// A new `cancel_grace`, for cancels that start from now.
    pub fn cancel_grace(self, d: Duration) -> Self {
        self.edit("cancel_grace", move |o| o.cancel_grace = d)
    }

    /// A new `warmup_timeout` (`None`: no limit), for warm-ups that start
    /// from now.
    pub fn warmup_timeout(self, d: Option<Duration>) -> Self {
        self.edit("warmup_timeout", move |o| o.warmup_timeout = d)
    }

    /// A new `max_waiting`. When it is lower than the jobs already queued,
    /// the youngest of them are turned away with `QueueFull`, as pooler
    /// does.
    pub fn max_waiting(self, n: usize) -> Self {
        self.edit("max_waiting", move |o| o.max_waiting = Some(n))
    }

    /// A new `max_queue_wait` (`None`: no projected-wait rejection).
    pub fn max_queue_wait(self, d: Option<Duration>) -> Self {
        self.edit("max_queue_wait", move |o| o.max_queue_wait = d)
    }

    /// A new `max_lifetime` (`None`: no limit). The deadlines of live
    /// workers move with it: each expires at its start plus the new
    /// lifetime; an idle one that is past it is replaced at once, a lent one
    /// when it comes back.
    pub fn max_lifetime(self, d: Option<Duration>) -> Self {
        self.edit("max_lifetime", move |o| o.max_lifetime = d)
    }

    /// A new `max_lifetime_jitter`, below the lifetime; live workers draw
    /// their jitter again.
    pub fn max_lifetime_jitter(self, j: Duration) -> Self {
        self.edit("max_lifetime_jitter", move |o| o.max_lifetime_jitter = j)
    }

    /// A new `auto_grow_threshold` (`None`: off).
    pub fn auto_grow_threshold(self, n: Option<usize>) -> Self {
        self.edit("auto_grow_threshold", move |o| o.auto_grow_threshold = n)
    }

    /// A new crash-loop breaker threshold (`None`: never break).
    pub fn break_after_failed_starts(self, n: Option<u32>) -> Self {
        self.edit("break_after_failed_starts", move |o| {
            o.break_after_failed_starts = n;
        })
    }

    /// A new `retry_on_crash`, for jobs that start from now.
    pub fn retry_on_crash(self, n: u32) -> Self {
        self.edit("retry_on_crash", move |o| o.retry_on_crash = n)
    }

    /// A new `max_jobs` (`None`: no limit), for workers started from now.
    pub fn max_jobs(self, n: Option<u64>) -> Self {
        self.edit("max_jobs", move |o| o.max_jobs = n)
    }

    /// A new `max_jobs_jitter`, for workers started from now.
    pub fn max_jobs_jitter(self, j: u64) -> Self {
        self.edit("max_jobs_jitter", move |o| o.max_jobs_jitter = j)
    }

    /// A new `max_surge`: replacements that may warm above the capacity
    /// at once. Lowered, the surges above it are called off (their workers
    /// closed, the old ones retired first as without a surge).
    pub fn max_surge(self, n: usize) -> Self {
        self.edit("max_surge", move |o| o.max_surge = n)
    }

    /// A new `replace_on_resize`: on, the running workers that started at
    /// another size are replaced now.
    pub fn replace_on_resize(self, on: bool) -> Self {
        self.edit("replace_on_resize", move |o| o.replace_on_resize = on)
    }

    /// A new `min_idle` (`None`: off).
    pub fn min_idle(self, n: Option<usize>) -> Self {
        self.edit("min_idle", move |o| o.min_idle = n)
    }

    /// A new `slow_job` (`None`: off), for jobs that start from now.
    pub fn slow_job(self, d: Option<Duration>) -> Self {
        self.edit("slow_job", move |o| o.slow_job = d)
    }

    /// A new `max_memory` (`None`: no limit).
    pub fn max_memory(self, bytes: Option<u64>) -> Self {
        self.edit("max_memory", move |o| o.max_memory = bytes)
    }

    /// A new `probe_every` (`None`: no probes); the next round is due
    /// `every` from now.
    pub fn probe_every(self, every: Option<Duration>) -> Self {
        self.edit("probe_every", move |o| o.probe_every = every)
    }

    /// A new `probe_timeout`, for probes that start from now.
    pub fn probe_timeout(self, d: Duration) -> Self {
        self.edit("probe_timeout", move |o| o.probe_timeout = d)
    }

    /// Probes on lend, or no longer.
    pub fn probe_on_lend(self, on: bool) -> Self {
        self.edit("probe_on_lend", move |o| o.probe_on_lend = on)
    }

    /// A new job grace (`job_grace`).
    pub fn job_grace(self, d: Duration) -> Self {
        self.edit("job_grace", move |o| o.job_grace = d)
    }

    /// A new dispatch, for the jobs from now.
    pub fn dispatch(self, dispatch: Dispatch) -> Self {
        self.edit("dispatch", move |o| o.dispatch = dispatch)
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
    /// The worker of this slot started at another size and is being
    /// replaced (`replace_on_resize`): an idle one now, or warm first, or a
    /// lent one when it comes back.
    Replaced {
        /// The slot.
        slot: usize,
    },
    /// The eviction timers of this many idle workers were set again.
    TimersRescheduled {
        /// How many.
        count: usize,
    },
    /// The lifetimes of this many live workers were set again (a new
    /// `max_lifetime` or jitter).
    LifetimesRescheduled {
        /// How many.
        count: usize,
    },
    /// This many queued jobs were turned away with `QueueFull`: a lower
    /// `max_waiting` left no room for them.
    JobsRejected {
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
            Self::Replaced { slot } => {
                write!(
                    f,
                    "replacing the worker in slot {slot} (started at another size)"
                )
            }
            Self::TimersRescheduled { count } => {
                write!(f, "rescheduled {count} eviction timer(s)")
            }
            Self::LifetimesRescheduled { count } => {
                write!(f, "rescheduled {count} worker lifetime(s)")
            }
            Self::JobsRejected { count } => write!(f, "turned away {count} queued job(s)"),
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
