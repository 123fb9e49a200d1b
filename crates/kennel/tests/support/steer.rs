//! A sizing a test steers by hand.

use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A sizing a test steers by hand: it runs `size` of `capacity` slots, moves
/// to the size set with [`Steer::set_size`] at its next wake-up (every
/// [`Steer::TICK`]), and lets new workers start only while allowed.
///
/// Clones share the settings: keep one, hand the other to the builder.
#[derive(Debug, Clone)]
pub struct Steer {
    capacity: usize,
    size: usize,
    target: Arc<std::sync::atomic::AtomicUsize>,
    refuse: Arc<std::sync::atomic::AtomicBool>,
    /// `(size, all_ready)` of the view at each finished job.
    jobs_seen: Arc<Mutex<Vec<(usize, bool)>>>,
}

impl Steer {
    /// How often the pool wakes the sizing.
    pub const TICK: Duration = Duration::from_millis(100);

    pub fn new(capacity: usize, size: usize) -> Self {
        Self {
            capacity,
            size,
            target: Arc::new(std::sync::atomic::AtomicUsize::new(size)),
            refuse: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            jobs_seen: Arc::default(),
        }
    }

    /// The running size and whether every running worker was ready (and
    /// counted, for a learning sizing), as the pool showed them at each
    /// finished job so far.
    pub fn jobs_seen(&self) -> Vec<(usize, bool)> {
        self.jobs_seen.lock().unwrap().clone()
    }

    /// The size the pool moves to at the next wake-up.
    pub fn set_size(&self, n: usize) {
        self.target.store(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the sizing refuses every new worker (as when memory is short).
    pub fn refuse_starts(&self, refuse: bool) {
        self.refuse
            .store(refuse, std::sync::atomic::Ordering::Relaxed);
    }
}

impl kennel::Sizing for Steer {
    fn plan(&mut self) -> Result<kennel::SizePlan, kennel::BuildError> {
        Ok(kennel::SizePlan::new(self.capacity, self.size))
    }

    fn observe(
        &mut self,
        view: &kennel::SizingView,
        input: kennel::SizingInput,
    ) -> kennel::SizingDecision {
        if let kennel::SizingInput::JobDone { .. } = input {
            let seen = (view.size, view.all_ready);
            self.jobs_seen.lock().unwrap().push(seen);
        }
        let mut decision = kennel::SizingDecision::default();
        let target = self.target.load(std::sync::atomic::Ordering::Relaxed);
        if target != view.size {
            decision.size = Some(target);
        }
        decision.wake_at = Some(view.now + Self::TICK);
        decision
    }

    fn may_start(&mut self, _view: &kennel::SizingView) -> bool {
        !self.refuse.load(std::sync::atomic::Ordering::Relaxed)
    }
}
