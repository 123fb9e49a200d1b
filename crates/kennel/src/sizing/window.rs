//! The windows a learning sizing measures.
//!
//! A window lasts until it has counted at least `min_jobs` jobs (20) and
//! `min_time` (2 s) has passed. Once a window has measured how widely the job
//! times spread, the next ones need only the jobs that pin their mean job time
//! down to ±5% (two standard errors: `(2 × cv / 0.05)²` jobs, `cv` the
//! coefficient of variation of the job times, the larger of the last two
//! windows'), at least 5 and at most `min_jobs`: jobs of even times, slow ones
//! above all, are measured in fewer jobs (quick windows). It counts only while jobs wait and every
//! running worker is ready (`view.waiting > 0 && view.all_ready`): then every
//! running worker is busy, so a window at size `n` whose jobs took `t` on
//! average measured `n / t` jobs per second.
//!
//! A job counts in a window only if it started after the window began. After
//! a change of size, the next window begins once the longest job of the last
//! window could have ended, so the jobs that ran at the old size are not
//! measured at the new one.
//!
//! A window that is interrupted (the queue empties, or a running worker is not
//! ready: it warms up, or was replaced) is dropped whole, and a new one starts
//! when jobs wait again. The windows the step already measured are kept, so
//! the step goes on where it was. Nothing counts while the queue is empty.

use std::time::Duration;

use tokio::time::Instant;

/// Jobs a window counts at least.
pub(crate) const MIN_JOBS: u32 = 20;
/// Time a window lasts at least.
pub(crate) const MIN_TIME: Duration = Duration::from_secs(2);
/// Jobs a quick window counts at least.
pub(crate) const QUICK_JOBS: u32 = 5;
/// Jobs a trial counts at least before its jobs may settle its verdict (with
/// the spread of job times known from the windows before it).
pub(crate) const SETTLE_JOBS: u32 = 3;
/// The precision a quick window's mean job time has: ±5%, half the gain a
/// worker must add, at two standard errors.
const PRECISION: f64 = 0.05;
const STANDARD_ERRORS: f64 = 2.0;

/// How long a window lasts at least.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Windows {
    pub(crate) min_jobs: u32,
    pub(crate) min_time: Duration,
    /// Whether windows count fewer jobs once the spread of job times is
    /// known.
    pub(crate) quick: bool,
}

impl Default for Windows {
    fn default() -> Self {
        Self {
            min_jobs: MIN_JOBS,
            min_time: MIN_TIME,
            quick: true,
        }
    }
}

impl Windows {
    /// The jobs a window needs, given the spread of job times measured so far
    /// (`None`: not yet).
    pub(crate) fn jobs(&self, spread: Option<f64>) -> u32 {
        match spread.filter(|_| self.quick) {
            None => self.min_jobs,
            Some(cv) => {
                let needed = (STANDARD_ERRORS * cv / PRECISION).powi(2).ceil();
                let floor = QUICK_JOBS.min(self.min_jobs);
                // A small number, or infinite for a NaN-free huge spread: the
                // cast saturates, and the clamp bounds it.
                (needed as u32).clamp(floor, self.min_jobs)
            }
        }
    }
}

/// What one window measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Measure {
    /// The running size during the window.
    pub(crate) size: usize,
    /// Jobs counted.
    pub(crate) jobs: u32,
    /// Their mean time, in seconds.
    pub(crate) job_time: f64,
}

impl Measure {
    /// Jobs per second while all `size` workers are busy.
    pub(crate) fn jobs_per_sec(&self) -> f64 {
        self.size as f64 / self.job_time.max(f64::MIN_POSITIVE)
    }
}

/// A window being measured.
#[derive(Debug, Clone, Copy)]
pub(super) struct Window {
    start: Instant,
    jobs: u32,
    total: Duration,
    /// The sum of the squared job times, in s², for their spread.
    squares: f64,
    pub(super) longest: Duration,
}

impl Window {
    pub(super) fn new(start: Instant) -> Self {
        Self {
            start,
            jobs: 0,
            total: Duration::ZERO,
            squares: 0.0,
            longest: Duration::ZERO,
        }
    }

    /// Counts a job that ended at `now` after `took`, if it started in the
    /// window.
    pub(super) fn add(&mut self, now: Instant, took: Duration) {
        if now
            .checked_duration_since(self.start)
            .is_some_and(|d| d >= took)
        {
            self.jobs += 1;
            self.total += took;
            self.squares += took.as_secs_f64().powi(2);
            self.longest = self.longest.max(took);
        }
    }

    pub(super) fn is_done(&self, now: Instant, jobs: u32, time: Duration) -> bool {
        self.jobs >= jobs && now >= self.start + time
    }

    /// The coefficient of variation of the job times counted (their
    /// standard deviation over their mean), once at least 2 were.
    pub(super) fn spread(&self) -> Option<f64> {
        if self.jobs < 2 {
            return None;
        }
        let n = f64::from(self.jobs);
        let mean = self.total.as_secs_f64() / n;
        if mean <= 0.0 {
            return Some(0.0);
        }
        let variance = ((self.squares - n * mean * mean) / (n - 1.0)).max(0.0);
        Some(variance.sqrt() / mean)
    }

    /// The most jobs per second at `size` that the jobs counted allow: their
    /// mean time less two standard errors for the spread `cv`. `None` while
    /// no job counted or the margin leaves no bound.
    pub(super) fn fastest(&self, size: usize, cv: f64) -> Option<f64> {
        let n = f64::from(self.jobs);
        let mean = self.total.as_secs_f64() / n.max(1.0);
        let margin = STANDARD_ERRORS * cv / n.sqrt();
        (self.jobs > 0 && mean > 0.0 && margin < 1.0).then(|| size as f64 / (mean * (1.0 - margin)))
    }

    pub(super) fn measure(&self, size: usize) -> Measure {
        Measure {
            size,
            jobs: self.jobs,
            job_time: self.total.as_secs_f64() / f64::from(self.jobs.max(1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_window_counts_only_jobs_that_started_in_it() {
        let start = Instant::now();
        let mut window = Window::new(start);
        // Ended 50 ms in after 60 ms: it started before the window.
        window.add(start + 50 * MS, 60 * MS);
        // Ended 100 ms in after 100 ms: it started as the window began.
        window.add(start + 100 * MS, 100 * MS);
        window.add(start + 300 * MS, 200 * MS);
        assert_eq!(window.jobs, 2);
        assert_eq!(window.longest, 200 * MS);
        let measure = window.measure(3);
        assert_eq!(measure.jobs, 2);
        assert!((measure.job_time - 0.15).abs() < 1e-9, "{measure:?}");
        assert!((measure.jobs_per_sec() - 20.0).abs() < 1e-6, "{measure:?}");
    }

    #[test]
    fn a_window_is_done_with_both_its_jobs_and_its_time() {
        let start = Instant::now();
        let mut window = Window::new(start);
        for i in 1..=3 {
            window.add(start + i * 10 * MS, 10 * MS);
        }
        assert!(!window.is_done(start + 30 * MS, 3, 100 * MS));
        assert!(!window.is_done(start + 100 * MS, 4, 100 * MS));
        assert!(window.is_done(start + 100 * MS, 3, 100 * MS));
    }

    #[test]
    fn the_spread_is_the_coefficient_of_variation_of_the_job_times() {
        let start = Instant::now();
        let mut window = Window::new(start);
        window.add(start + 100 * MS, 100 * MS);
        assert_eq!(window.spread(), None, "one job has no spread");
        window.add(start + 300 * MS, 300 * MS);
        // Mean 0.2 s, standard deviation 0.1414 s.
        let cv = window.spread().unwrap();
        assert!((cv - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-6, "{cv}");
        let mut even = Window::new(start);
        for i in 1..=4 {
            even.add(start + i * 100 * MS, 100 * MS);
        }
        assert!(even.spread().unwrap() < 1e-6);
    }

    #[test]
    fn a_known_spread_needs_the_jobs_for_five_percent_at_least_five() {
        let w = Windows::default();
        assert_eq!(w.jobs(None), MIN_JOBS, "the spread is not known yet");
        assert_eq!(w.jobs(Some(0.0)), QUICK_JOBS);
        // (2 × 0.1 / 0.05)² = 16.
        assert_eq!(w.jobs(Some(0.1)), 16);
        assert_eq!(w.jobs(Some(0.5)), MIN_JOBS, "never more than min_jobs");
        assert_eq!(w.jobs(Some(f64::INFINITY)), MIN_JOBS);
        let off = Windows { quick: false, ..w };
        assert_eq!(off.jobs(Some(0.0)), MIN_JOBS);
        let small = Windows { min_jobs: 3, ..w };
        assert_eq!(small.jobs(Some(0.0)), 3);
    }

    #[test]
    fn the_fastest_rate_a_window_allows_is_its_mean_less_two_standard_errors() {
        let start = Instant::now();
        let mut window = Window::new(start);
        assert_eq!(window.fastest(1, 0.1), None, "no job yet");
        for i in 1..=4 {
            window.add(start + i * 1000 * MS, 1000 * MS);
        }
        // 4 jobs of 1 s at 2 workers, spread 0.1: 2 / (1 × (1 - 2 × 0.1 / 2)).
        let fastest = window.fastest(2, 0.1).unwrap();
        assert!((fastest - 2.0 / 0.9).abs() < 1e-9, "{fastest}");
        assert_eq!(window.fastest(2, 1.0), None, "a margin of the whole mean");
    }

    #[test]
    fn a_window_without_jobs_measures_no_time() {
        let measure = Window::new(Instant::now()).measure(2);
        assert_eq!((measure.size, measure.jobs, measure.job_time), (2, 0, 0.0));
        assert!(measure.jobs_per_sec().is_finite());
    }
}
