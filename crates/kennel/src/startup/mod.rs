//! When workers start.

use std::fmt;

mod leader_first;
mod on_demand;
mod ordered_ready;
mod parallel;

pub use leader_first::LeaderFirst;
pub use on_demand::OnDemand;
pub use ordered_ready::OrderedReady;
pub use parallel::Parallel;

/// What a running slot looks like to a startup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SlotPhase {
    /// No worker, and the pool may start one now.
    Wanted,
    /// No worker, and the pool will not start one now (back-off, evicted).
    Resting,
    /// A worker warms up.
    Starting,
    /// A worker is ready (idle or lent), or is being closed.
    Up,
}

/// Which running slots to start now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Starts {
    /// None.
    None,
    /// This one slot.
    One(usize),
    /// Every slot in phase [`SlotPhase::Wanted`].
    AllWanted,
}

/// Decides which running slots the pool fills by itself.
///
/// The pool asks when it is built, when a worker turns ready, when a slot
/// empties and when a back-off ends. Jobs start workers on their own
/// (the lending order's third rule) whatever the startup says.
///
/// ```
/// use kennel::{SlotPhase, Startup, Starts};
///
/// /// Starts only slot 0 and leaves the rest to jobs.
/// #[derive(Debug)]
/// struct OneWarm;
///
/// impl Startup for OneWarm {
///     fn is_eager(&self) -> bool {
///         true
///     }
///     fn next(&self, slots: &[SlotPhase], _ever_ready: bool) -> Starts {
///         match slots.first() {
///             Some(SlotPhase::Wanted) => Starts::One(0),
///             _ => Starts::None,
///         }
///     }
/// }
/// ```
pub trait Startup: Send + Sync + fmt::Debug + 'static {
    /// Whether the pool keeps slots filled by itself (every startup but
    /// [`OnDemand`]). Eager startups also refill slots after a back-off.
    fn is_eager(&self) -> bool;

    /// Which slots to start now, given the phase of each running slot and
    /// whether any worker of this pool has ever been ready.
    fn next(&self, slots: &[SlotPhase], ever_ready: bool) -> Starts;
}

fn _obj_safe(_: &dyn Startup) {}
