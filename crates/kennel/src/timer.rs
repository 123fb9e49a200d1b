//! Timers and tasks that cancel themselves when their owner drops them.
//!
//! A slot state that holds a [`Timer`] (an eviction, a back-off, a
//! lifetime, a warm-up) cancels it by being replaced: there is no abort to
//! remember. The timer is made under the pool's lock, as a value; the task
//! that waits for it is spawned by the engine's shell after the lock is
//! released, with the [`CancellationToken`] the timer returned.

use tokio_util::sync::{CancellationToken, DropGuard};

/// A pending timer (or warm-up task): dropping it cancels it.
#[derive(Debug)]
#[must_use = "dropping a timer cancels it"]
pub(crate) struct Timer(#[allow(dead_code)] DropGuard);

impl Timer {
    /// A new timer and the token its task watches.
    pub(crate) fn new() -> (Self, CancellationToken) {
        let token = CancellationToken::new();
        (Self(token.clone().drop_guard()), token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropping_a_timer_cancels_its_token() {
        let (timer, token) = Timer::new();
        assert!(!token.is_cancelled());
        drop(timer);
        assert!(token.is_cancelled());
    }
}
