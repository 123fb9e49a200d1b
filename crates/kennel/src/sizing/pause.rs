//! The pause after steps that change nothing.
//!
//! After a step that changes nothing the sizing pauses: 1 window (the
//! shortest pause), then twice as long after each such step in a row, up to
//! 16 (the longest); each pause lasts a random 0.5 to 1.5 times that, so pools
//! in other processes do not step together. A change of size resets the
//! pause. Both bounds can be set, from 1 to [`MAX_PAUSE_BOUND`] windows.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The longest pause by default, in windows.
pub(crate) const MAX_PAUSE: u32 = 16;
/// The shortest pause by default, in windows.
pub(crate) const MIN_PAUSE: u32 = 1;
/// The most either bound may be, in windows.
pub(crate) const MAX_PAUSE_BOUND: u32 = 1024;

/// How long the next pause lasts: the steps in a row that changed nothing,
/// and the random draw of each pause's length.
#[derive(Debug)]
pub(super) struct Pause {
    /// The seed a test set; without one, each start draws a random seed.
    seed: Option<u64>,
    rng: StdRng,
    /// Steps in a row that changed nothing.
    pub(super) quiet: u32,
    /// The shortest and the longest pause, in windows.
    bounds: (u32, u32),
}

impl Pause {
    pub(super) fn new() -> Self {
        Self {
            seed: None,
            rng: StdRng::seed_from_u64(0),
            quiet: 0,
            bounds: (MIN_PAUSE, MAX_PAUSE),
        }
    }

    /// The shortest and the longest pause, in windows.
    pub(super) fn set_bounds(&mut self, shortest: u32, longest: u32) {
        self.bounds = (shortest, longest);
    }

    /// Checks the bounds: 1 to [`MAX_PAUSE_BOUND`], the shortest at most the
    /// longest; the error says what is wrong and what is allowed.
    pub(super) fn check(&self) -> Result<(), String> {
        let (shortest, longest) = self.bounds;
        if !(1..=MAX_PAUSE_BOUND).contains(&shortest) || !(1..=MAX_PAUSE_BOUND).contains(&longest) {
            return Err(format!(
                "{shortest} to {longest} windows is out of range (allowed: 1 to {MAX_PAUSE_BOUND} windows each)"
            ));
        }
        if shortest > longest {
            return Err(format!(
                "the shortest pause, {shortest} windows, is longer than the longest, {longest} (allowed: shortest at most longest)"
            ));
        }
        Ok(())
    }

    /// Makes the pause lengths the same from one start to the next.
    pub(super) fn set_seed(&mut self, seed: u64) {
        self.seed = Some(seed);
    }

    /// Starts afresh: no quiet step yet, and the random draw seeded again.
    pub(super) fn start(&mut self) {
        self.rng = StdRng::seed_from_u64(self.seed.unwrap_or_else(rand::random));
        self.quiet = 0;
    }

    /// The size changed: the next pause is 1 window again.
    pub(super) fn reset(&mut self) {
        self.quiet = 0;
    }

    /// One more step in a row changed nothing: the pause it earns, in
    /// windows, `shortest × 2^(quiet-1)` up to the longest, times a random
    /// 0.5 to 1.5.
    pub(super) fn next(&mut self) -> f64 {
        let (shortest, longest) = self.bounds;
        self.quiet = self.quiet.saturating_add(1);
        let doublings = self
            .quiet
            .saturating_sub(1)
            .min(MAX_PAUSE_BOUND.ilog2() + 1);
        let windows = shortest
            .max(1)
            .saturating_mul(1u32 << doublings)
            .min(longest.max(1));
        f64::from(windows) * self.rng.random_range(0.5..1.5)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeded(seed: u64) -> Pause {
        let mut pause = Pause::new();
        pause.set_seed(seed);
        pause.start();
        pause
    }

    #[test]
    fn each_quiet_step_doubles_the_pause_up_to_sixteen_windows() {
        let mut pause = seeded(1);
        for nominal in [1.0, 2.0, 4.0, 8.0, 16.0, 16.0, 16.0] {
            let len = pause.next();
            assert!(
                (0.5 * nominal..1.5 * nominal).contains(&len),
                "{nominal}: {len}"
            );
        }
        assert_eq!(pause.quiet, 7);
        pause.reset();
        assert_eq!(pause.quiet, 0);
        assert!((0.5..1.5).contains(&pause.next()));
    }

    #[test]
    fn the_pause_bounds_set_the_first_pause_and_the_longest() {
        let mut pause = seeded(3);
        pause.set_bounds(2, 6);
        assert_eq!(pause.check(), Ok(()));
        for nominal in [2.0, 4.0, 6.0, 6.0] {
            let len = pause.next();
            assert!(
                (0.5 * nominal..1.5 * nominal).contains(&len),
                "{nominal}: {len}"
            );
        }
        pause.set_bounds(1, 1);
        pause.reset();
        for _ in 0..40 {
            assert!((0.5..1.5).contains(&pause.next()));
        }
    }

    #[test]
    fn pause_bounds_out_of_range_say_what_is_allowed() {
        let mut pause = Pause::new();
        for (a, b) in [(0, 16), (1, 0), (1, 1025)] {
            pause.set_bounds(a, b);
            let err = pause.check().unwrap_err();
            assert!(err.contains("allowed: 1 to 1024 windows"), "{err}");
        }
        pause.set_bounds(8, 4);
        let err = pause.check().unwrap_err();
        assert!(err.contains("allowed: shortest at most longest"), "{err}");
    }

    #[test]
    fn a_seed_gives_the_same_lengths_after_each_start() {
        let lens = |pause: &mut Pause| (0..5).map(|_| pause.next()).collect::<Vec<_>>();
        let mut pause = seeded(7);
        let first = lens(&mut pause);
        pause.start();
        assert_eq!(lens(&mut pause), first);
        assert_ne!(lens(&mut seeded(8)), first);
    }
}
