//! One consistent snapshot of a pool's counts.

/// A snapshot of a pool, taken under one lock, so its counts agree.
///
/// A worker that exited, and a slot whose worker was evicted, are in no
/// count: a pool with an eviction can show zeros and be healthy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Stats {
    /// Workers that start and are not ready yet.
    pub starting: usize,
    /// Ready workers in running slots that no job has.
    pub idle: usize,
    /// Ready workers that a job has.
    pub lent: usize,
    /// Jobs that wait for a worker: in the queue, or for a worker that starts.
    pub waiting: usize,
    /// The most workers the pool may ever run.
    pub capacity: usize,
    /// How many slots the sizing runs now.
    pub size: usize,
    /// Idle workers alive in slots the sizing does not run now.
    pub kept: usize,
    /// Empty running slots whose worker exited early, waiting for their
    /// back-off to end before an eager startup starts them again.
    pub backing_off: usize,
    /// Replacements warming (or warm, about to take their slot) above the
    /// capacity while the workers they replace keep serving
    /// (`Options::max_surge`). They are in no other count.
    pub surging: usize,
    /// Whether the crash-loop breaker holds the pool: its starts keep
    /// failing and no worker is ready, so jobs fail at once with
    /// `Unavailable` (see `Options::break_after_failed_starts`).
    pub broken: bool,
}

impl Stats {
    /// Not broken, and `waiting == 0 || starting + idle + lent > 0`: no
    /// job waits without a worker on its way.
    pub fn is_healthy(&self) -> bool {
        !self.broken && (self.waiting == 0 || self.starting + self.idle + self.lent > 0)
    }
}
