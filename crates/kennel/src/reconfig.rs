//! Changing a live pool: its options, sizing and eviction.

use std::fmt;
use std::sync::Arc;

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
///     .with_options(|o| o.job_timeout = Some(Duration::from_secs(20)));
/// ```
#[derive(Default)]
#[must_use]
pub struct Reconfig {
    pub(crate) sizing: Option<Box<dyn Sizing>>,
    pub(crate) eviction: Option<Arc<dyn Eviction>>,
    edits: Vec<Edit>,
    pub(crate) group: Option<Option<String>>,
}

type Edit = Box<dyn FnOnce(&mut Options) + Send>;

impl fmt::Debug for Reconfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reconfig")
            .field("sizing", &self.sizing)
            .field("eviction", &self.eviction)
            .field("option_edits", &self.edits.len())
            .field("group", &self.group)
            .finish()
    }
}

impl Reconfig {
    /// Changes nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The options with this patch applied (validated by the caller).
    pub(crate) fn patch(&mut self, options: &Options) -> Options {
        let mut patched = options.clone();
        for edit in self.edits.drain(..) {
            edit(&mut patched);
        }
        patched
    }

    /// Every option at once: the pool takes `options` whole.
    pub fn options(self, options: Options) -> Self {
        self.with_options(move |o| *o = options)
    }

    /// Changes the pool's options by `f`, applied to the options the pool
    /// has when the reconfiguration runs; what `f` leaves stays. When each
    /// change takes effect is said on its field of [`Options`] (a new
    /// `job_timeout` is for the jobs that start from now; a lower
    /// `max_waiting` turns away the youngest queued jobs; a new
    /// `max_lifetime` moves the deadlines of live workers).
    pub fn with_options(mut self, f: impl FnOnce(&mut Options) + Send + 'static) -> Self {
        self.edits.push(Box::new(f));
        self
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
            Self::Replaced { slot } => write!(
                f,
                "replacing the worker in slot {slot} (started at another size)"
            ),
            Self::TimersRescheduled { count } => write!(f, "rescheduled {count} eviction timer(s)"),
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
