//! The locked state, and what its release does: publish the gauges.

use parking_lot::MutexGuard;

use super::state::State;
use crate::metrics::PoolMetrics;

/// The locked state. When dropped it publishes the gauges that changed and
/// releases the lock. What waiting jobs were handed meanwhile is sent by
/// the shell ([`Engine::act`](super::Engine::act)) once the lock is
/// released; a lock session outside the shell leaves it for the next one.
pub(crate) struct StateGuard<'a, W> {
    pub(super) guard: MutexGuard<'a, State<W>>,
    pub(super) metrics: &'a PoolMetrics,
}

impl<W> std::ops::Deref for StateGuard<'_, W> {
    type Target = State<W>;
    fn deref(&self) -> &State<W> {
        &self.guard
    }
}

impl<W> std::ops::DerefMut for StateGuard<'_, W> {
    fn deref_mut(&mut self) -> &mut State<W> {
        &mut self.guard
    }
}

impl<W> Drop for StateGuard<'_, W> {
    fn drop(&mut self) {
        // The lock is released after this, as the guard field drops.
        let st = &mut *self.guard;
        if st.metrics {
            let stats = st.stats();
            self.metrics.publish(&stats, &mut st.published);
        }
    }
}
