//! The locked state, and what its release does: publish the gauges,
//! deliver what waiting jobs were handed, and wake them after the lock.

use parking_lot::MutexGuard;

use super::state::State;
use crate::dispatch::Mailbox;
use crate::metrics::PoolMetrics;

/// The locked state. When dropped it publishes the gauges that changed,
/// releases the lock, and then wakes the jobs handed a worker meanwhile.
pub(crate) struct StateGuard<'a, W> {
    /// `None` only inside `drop`.
    pub(super) guard: Option<MutexGuard<'a, State<W>>>,
    pub(super) metrics: &'a PoolMetrics,
    pub(super) mailbox: &'a Mailbox<W>,
}

impl<W> std::ops::Deref for StateGuard<'_, W> {
    type Target = State<W>;
    fn deref(&self) -> &State<W> {
        self.guard.as_ref().expect("held until dropped")
    }
}

impl<W> std::ops::DerefMut for StateGuard<'_, W> {
    fn deref_mut(&mut self) -> &mut State<W> {
        self.guard.as_mut().expect("held until dropped")
    }
}

impl<W> Drop for StateGuard<'_, W> {
    fn drop(&mut self) {
        let Some(mut guard) = self.guard.take() else {
            return;
        };
        let st = &mut *guard;
        if st.metrics {
            let stats = st.stats();
            self.metrics.publish(&stats, &mut st.published);
        }
        let wakes = st.waiters.deliver(self.mailbox);
        drop(guard);
        if let Some((one, more)) = wakes {
            one.wake();
            for waker in more {
                waker.wake();
            }
        }
    }
}
