//! How many workers run.

use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::BuildError;

mod fixed;
mod gradient;
mod hill_climbing;
mod learning;
mod memory;
mod pause;
mod resources;
mod rule;
mod step;
mod verdict;
mod window;

pub use fixed::Fixed;
pub use gradient::Gradient;
pub use hill_climbing::HillClimbing;
pub use resources::Resources;

/// Capacity and first size, decided once when the pool is built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SizePlan {
    /// The most workers the pool may ever run (at least 1).
    pub capacity: usize,
    /// How many slots run at first (`1..=capacity`).
    pub size: usize,
    /// A warning to emit as an event (for example: memory allows no worker).
    pub warning: Option<String>,
    /// Whether [`observe`](Sizing::observe) hears of every finished job
    /// ([`SizingInput::JobDone`]). True unless the sizing says otherwise
    /// with [`without_jobs`](SizePlan::without_jobs): a sizing that does not
    /// learn from jobs spares the pool a call under its lock per job.
    pub observes_jobs: bool,
}

impl SizePlan {
    /// A plan with this capacity and first size, and no warning; the sizing
    /// hears of every finished job.
    pub fn new(capacity: usize, size: usize) -> Self {
        Self {
            capacity,
            size,
            warning: None,
            observes_jobs: true,
        }
    }

    /// The same plan for a sizing that is not told of finished jobs, only
    /// of the wake-ups it asks for.
    #[must_use]
    pub fn without_jobs(mut self) -> Self {
        self.observes_jobs = false;
        self
    }
}

/// What the pool tells a sizing each time it asks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SizingView {
    /// Now, on the pool's clock.
    pub now: Instant,
    /// The running slots now.
    pub size: usize,
    /// The capacity.
    pub capacity: usize,
    /// Jobs waiting for a worker.
    pub waiting: usize,
    /// Every running slot holds a ready worker (idle or lent), and with
    /// `replace_on_resize` one that started at the running size.
    pub all_ready: bool,
    /// Workers of this pool that are alive (any state), for memory
    /// accounting: their memory must not count against the pool.
    pub alive: usize,
}

/// What happened that the sizing is told of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SizingInput {
    /// A job finished; it held its worker this long.
    JobDone {
        /// From lend to return.
        took: Duration,
    },
    /// The time the sizing asked to be woken at has come.
    Wake,
}

/// What the sizing wants after an input.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct SizingDecision {
    /// The size it wants now (`None`: unchanged). The pool clamps it to
    /// `1..=capacity`.
    pub size: Option<usize>,
    /// When to be woken with [`SizingInput::Wake`] (`None`: keep the last
    /// request, if any).
    pub wake_at: Option<Instant>,
    /// Steps taken, each emitted as an [`Event::SizingStep`](crate::Event::SizingStep).
    pub steps: Vec<SizingStep>,
    /// A trial that starts now, emitted as an
    /// [`Event::SizingTrial`](crate::Event::SizingTrial).
    pub trial: Option<SizingTrial>,
    /// Closes the kept workers in slots at or above this number, now and
    /// when lent ones come back, to free their memory (a memory-forced
    /// shrink). Cleared by the next growth of the size.
    pub close_kept_above: Option<usize>,
}

/// The verdict of a sizing step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// The tried size pays: the sizing moves to it.
    Pays,
    /// The tried size does not pay: the size stays.
    DoesNotPay,
    /// The running workers do not fit in free memory: the size drops.
    MemoryShort,
}

impl Verdict {
    /// [`Pays`](Self::Pays) when `pays`, else [`DoesNotPay`](Self::DoesNotPay).
    pub(crate) fn of(pays: bool) -> Self {
        if pays { Self::Pays } else { Self::DoesNotPay }
    }
}

/// One sizing step, with its verdict and the measured figures.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SizingStep {
    /// The size before the step.
    pub from: usize,
    /// The size tried.
    pub tried: usize,
    /// The size after the step.
    pub to: usize,
    /// The verdict.
    pub verdict: Verdict,
    /// The measured figures, in words (jobs per second, job time).
    pub figures: String,
}

impl SizingStep {
    /// A step record.
    pub fn new(
        from: usize,
        tried: usize,
        to: usize,
        verdict: Verdict,
        figures: impl Into<String>,
    ) -> Self {
        Self {
            from,
            tried,
            to,
            verdict,
            figures: figures.into(),
        }
    }
}

/// A trial a learning sizing starts: the size it runs while it measures one
/// window, before it measures the size it has again and judges the step.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SizingTrial {
    /// The size the sizing has.
    pub from: usize,
    /// The size it tries now.
    pub tried: usize,
    /// What the window before it measured, and what the trial's window needs,
    /// in words.
    pub figures: String,
}

impl SizingTrial {
    /// A trial record.
    pub fn new(from: usize, tried: usize, figures: impl Into<String>) -> Self {
        Self {
            from,
            tried,
            figures: figures.into(),
        }
    }
}

/// Decides how many slots run.
///
/// The pool calls [`plan`](Sizing::plan) once when it is built, then
/// [`observe`](Sizing::observe) after each finished job (unless the plan
/// says [`without_jobs`](SizePlan::without_jobs)) and at each time the
/// sizing asked to be woken, always under the pool's lock (so keep it quick),
/// and [`may_start`](Sizing::may_start) before it starts a new worker.
///
/// ```
/// use kennel::{BuildError, SizePlan, Sizing, SizingDecision, SizingInput, SizingView};
///
/// /// Runs 1 worker at night and 4 by day... here simply always 3 of 4.
/// #[derive(Debug)]
/// struct ThreeOfFour;
///
/// impl Sizing for ThreeOfFour {
///     fn plan(&mut self) -> Result<SizePlan, BuildError> {
///         Ok(SizePlan::new(4, 3))
///     }
///     fn observe(&mut self, _view: &SizingView, _input: SizingInput) -> SizingDecision {
///         SizingDecision::default()
///     }
/// }
/// ```
pub trait Sizing: Send + fmt::Debug + 'static {
    /// Capacity and first size.
    ///
    /// # Errors
    ///
    /// A [`BuildError`] naming the option when the sizing's settings are out
    /// of range.
    fn plan(&mut self) -> Result<SizePlan, BuildError>;

    /// Learns from a finished job or a wake-up and says what size it wants.
    fn observe(&mut self, view: &SizingView, input: SizingInput) -> SizingDecision;

    /// Whether a new worker may start now (for example: its memory is free).
    fn may_start(&mut self, view: &SizingView) -> bool {
        let _ = view;
        true
    }
}

fn _obj_safe(_: &dyn Sizing) {}
