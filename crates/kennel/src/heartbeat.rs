//! [`Heartbeat`]: a worker's sign that its job is moving, which can extend
//! the job's deadline (`progress_extends_timeout`).

use std::fmt;

use tokio::sync::watch;

/// A cheap, cloneable signal that a worker's job made progress.
///
/// A worker hands one out through [`Worker::heartbeat`](crate::Worker::heartbeat)
/// and calls [`beat`](Self::beat) for each progress item of the job in hand
/// (a `Coprocess` does for each progress message its worker writes). With
/// the pool's `progress_extends_timeout`, each beat moves the job's
/// `job_timeout` deadline to a full `job_timeout` from the beat;
/// `job_kill_after` is never moved.
#[derive(Clone, Default)]
pub struct Heartbeat(watch::Sender<u64>);

impl Heartbeat {
    /// A heartbeat that nobody has beaten yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Says the job in hand made progress. Never blocks; costs nothing
    /// measurable when no job watches.
    pub fn beat(&self) {
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Whether a job watches the beats now (a pool with
    /// `progress_extends_timeout` does while a job runs): a worker may skip
    /// asking for progress nobody reads.
    pub fn is_watched(&self) -> bool {
        self.0.receiver_count() > 0
    }

    /// A receiver that sees the beats from now on.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.0.subscribe()
    }
}

impl fmt::Debug for Heartbeat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Heartbeat").field(&*self.0.borrow()).finish()
    }
}
