use std::time::Duration;

use super::{EvictAfter, Eviction, IdleWorker};
use crate::error::BuildError;

/// The longest `after`: the pool's longest time limit,
/// [`MAX_DURATION`](crate::MAX_DURATION), so that every time limit of a pool
/// has one bound.
pub const MAX_IDLE_TIMEOUT: Duration = crate::options::MAX_DURATION;

/// Evicts a worker that stayed idle for `after`.
///
/// A job that takes the worker first keeps it, and a new `after` starts when
/// that job ends. [`keep`](IdleTimeout::keep) sets a floor: the eviction
/// never lets the running workers drop below it. Each worker has its own
/// timer, so there is no culling interval: a worker goes `after` its last
/// job, not at the next sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleTimeout {
    after: Duration,
    keep: usize,
}

impl IdleTimeout {
    /// Evicts after `after` idle.
    ///
    /// # Errors
    ///
    /// `after` must be above 0 and at most [`MAX_IDLE_TIMEOUT`]; another value
    /// is a [`BuildError`] naming `eviction.after` and the range.
    pub fn new(after: Duration) -> Result<Self, BuildError> {
        if after.is_zero() || after > MAX_IDLE_TIMEOUT {
            return Err(BuildError::new(
                "eviction.after",
                format!(
                    "{after:?} is out of range (allowed: above 0 and at most {} ms)",
                    MAX_IDLE_TIMEOUT.as_millis()
                ),
            ));
        }
        Ok(Self { after, keep: 0 })
    }

    /// Never evicts below `n` running workers.
    #[must_use]
    pub fn keep(mut self, n: usize) -> Self {
        self.keep = n;
        self
    }

    /// The idle time before eviction.
    pub fn after(&self) -> Duration {
        self.after
    }
}

impl Eviction for IdleTimeout {
    fn idle(&self, worker: IdleWorker) -> Option<EvictAfter> {
        // Counted from when the worker turned idle, so a reconfiguration
        // that sets the timer again keeps the idle time already spent.
        Some(Box::pin(tokio::time::sleep_until(
            worker.idle_since + self.after,
        )))
    }

    fn floor(&self) -> usize {
        self.keep
    }
}
