//! When idle workers close.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::Instant;

mod idle_timeout;
mod no_eviction;

pub use idle_timeout::{IdleTimeout, MAX_IDLE_TIMEOUT};
pub use no_eviction::NoEviction;

/// A boxed future an eviction hands back.
pub type EvictAfter = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A worker that just turned idle in a running slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct IdleWorker {
    /// Its slot.
    pub slot: usize,
    /// When it turned idle.
    pub idle_since: Instant,
    /// When it started.
    pub started: Instant,
}

impl IdleWorker {
    /// How long the worker has run, at `now`.
    pub fn ran_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.started)
    }
}

/// Decides when an idle worker in a running slot is let go.
///
/// For each worker that turns idle the pool calls [`idle`](Eviction::idle);
/// the worker is evicted when the returned future resolves, unless a job took
/// it first. The future waits on the pool's clock: `tokio::time`.
///
/// ```
/// use std::time::Duration;
/// use kennel::{EvictAfter, Eviction, IdleWorker};
///
/// /// Lets workers in high slots go sooner than the first one.
/// #[derive(Debug)]
/// struct Tiered;
///
/// impl Eviction for Tiered {
///     fn idle(&self, worker: IdleWorker) -> Option<EvictAfter> {
///         let after = if worker.slot == 0 { 600 } else { 30 };
///         Some(Box::pin(tokio::time::sleep(Duration::from_secs(after))))
///     }
/// }
/// ```
pub trait Eviction: Send + Sync + fmt::Debug + 'static {
    /// The wait before `worker` is evicted, or `None` to keep it.
    fn idle(&self, worker: IdleWorker) -> Option<EvictAfter>;

    /// Whether this eviction may ever let a worker go. When it says no
    /// ([`NoEviction`]), the pool neither asks [`idle`](Eviction::idle) nor
    /// reads the clock when a worker turns idle. Default: yes.
    fn may_evict(&self) -> bool {
        true
    }

    /// The eviction never lets the running workers drop below this many.
    fn floor(&self) -> usize {
        0
    }
}

fn _obj_safe(_: &dyn Eviction) {}
