use super::Verdict;
use super::learning::learning_sizing;
use super::memory::Memory;
use super::rule::{Measured, Rule, percent};
use super::step::Stepper;
use super::window::Measure;
use crate::computer::Computer;

/// How much more a worker must add: 10%, so that a worker that adds less
/// than noise does not stay.
const GAIN: f64 = 0.10;

/// Runs 2 workers first, then as many as each add at least 10% more jobs per
/// second, learning for as long as the pool runs.
///
/// Capacity = `min(cpus, free memory / memory_per_worker)`, at least 1, read
/// from the computer when the pool is built. Then it takes steps: three
/// windows of at least 20 jobs and 2 seconds each, counted only while jobs
/// wait and every running worker is ready — at the size it has, at one more
/// (or one fewer), and at the size it has again. Jobs per second are measured
/// as `size / mean job time` (every worker is busy while jobs wait).
///
/// - A step up pays when the trial has at least 10% more jobs per second than
///   each of the two windows around it; then the worker stays at once.
/// - A step down shows the top worker does not pay when neither window around
///   it has 10% more than the trial. After two such steps in a row, one
///   worker goes.
/// - A trial whose verdict its jobs have settled ends early: one fewer that
///   the window before beats by 10% even at two standard errors, one more
///   that cannot reach 10% over it (quick windows on, 3 jobs at the least).
/// - A step with fewer keeps the workers alive (kept), so a later step up
///   costs no warm-up. A step up is tried only when one more worker's memory
///   is free.
/// - After a step that changes nothing it pauses 1 window, then 2, 4, 8, up
///   to 16, each a random 0.5 to 1.5 times that; a change resets the pause.
/// - After each window, and every 2 seconds, it reads the free memory again
///   ([`Computer::free_for_pool`]); when the running workers do not fit, it
///   runs as many as fit, at least 1.
///
/// Every step is a [`SizingStep`](crate::SizingStep) event with its figures.
///
/// ```
/// use kennel::{HillClimbing, TestComputer};
///
/// // 2 GiB per worker on 16 CPUs with 64 GiB free; the seed makes the pauses
/// // repeatable.
/// let sizing = HillClimbing::new(2 << 30, TestComputer::new(16, 64 << 30)).seed(7);
/// # let _ = sizing;
/// ```
#[derive(Debug)]
pub struct HillClimbing {
    stepper: Stepper<Climb>,
}

impl HillClimbing {
    /// Learns how many workers of `memory_per_worker` bytes pay on
    /// `computer`.
    pub fn new(memory_per_worker: u64, computer: impl Computer) -> Self {
        Self {
            stepper: Stepper::new(Climb, Memory::new(memory_per_worker, computer)),
        }
    }
}

learning_sizing!(
    HillClimbing,
    "A trial also ends once its jobs have settled its verdict (3 jobs at the",
    "least)."
);

/// HillClimbing's rule: jobs per second, 10% per worker, one fewer down.
#[derive(Debug)]
struct Climb;

impl Rule for Climb {
    fn down(&self, from: usize) -> Option<usize> {
        (from > 1).then(|| from - 1)
    }

    fn judge(&mut self, step: &Measured) -> (Verdict, String) {
        let (a, b, c) = (
            step.before.jobs_per_sec(),
            step.trial.jobs_per_sec(),
            step.after.jobs_per_sec(),
        );
        let need = 1.0 + GAIN;
        let (from, tried) = (step.from, step.tried);
        let measured = format!("jobs/s {a:.2} at {from}, {b:.2} at {tried}, {c:.2} at {from}");
        if step.is_up() {
            let pays = b >= need * a && b >= need * c;
            let verdict = Verdict::of(pays);
            let figures = format!(
                "{measured}: {tried} gives {} and {} (a worker must add +10%)",
                percent(b, a),
                percent(b, c)
            );
            (verdict, figures)
        } else {
            let does_not_pay = a < need * b && c < need * b;
            let verdict = Verdict::of(!does_not_pay);
            let figures = format!(
                "{measured}: {from} gives {} and {} over {tried} (a worker must add +10%)",
                percent(a, b),
                percent(c, b)
            );
            (verdict, figures)
        }
    }

    /// A trial of one more that cannot reach +10% over the window before it
    /// does not pay, and a trial of one fewer that the window before it beats
    /// by +10% leaves the top worker paying, whatever the window after says.
    fn decided(&self, from: usize, tried: usize, before: &Measure, fastest: f64) -> bool {
        let need = 1.0 + GAIN;
        let before = before.jobs_per_sec();
        if tried > from {
            fastest < need * before
        } else {
            before >= need * fastest
        }
    }

    fn moved(&mut self, _from: usize, _to: usize, _step: Option<&Measured>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(from: usize, tried: usize, rates: [f64; 3]) -> Measured {
        let m = |size: usize, rate: f64| Measure {
            size,
            jobs: 20,
            job_time: size as f64 / rate,
        };
        Measured {
            from,
            tried,
            before: m(from, rates[0]),
            trial: m(tried, rates[1]),
            after: m(from, rates[2]),
        }
    }

    #[test]
    fn one_more_pays_only_with_ten_percent_over_both_windows_around_it() {
        let judge = |s| Climb.judge(&s).0;
        assert_eq!(judge(step(4, 5, [10.0, 11.0, 10.0])), Verdict::Pays);
        assert_eq!(judge(step(4, 5, [10.0, 10.9, 10.0])), Verdict::DoesNotPay);
        // Drift: the load rose during the step; the window after says no.
        assert_eq!(judge(step(4, 5, [10.0, 11.5, 10.6])), Verdict::DoesNotPay);
    }

    #[test]
    fn the_top_worker_does_not_pay_only_when_both_windows_around_agree() {
        let judge = |s| Climb.judge(&s).0;
        assert_eq!(judge(step(6, 5, [10.5, 10.0, 10.5])), Verdict::DoesNotPay);
        assert_eq!(judge(step(6, 5, [12.0, 10.0, 12.0])), Verdict::Pays);
        assert_eq!(judge(step(6, 5, [10.5, 10.0, 11.5])), Verdict::Pays);
        assert_eq!(Climb.down(1), None);
        assert_eq!(Climb.down(6), Some(5));
    }

    #[test]
    fn a_trial_is_decided_early_only_where_no_window_after_could_change_it() {
        let before = Measure {
            size: 2,
            jobs: 20,
            job_time: 1.0,
        };
        // 2 jobs/s at 2. One fewer at 1.8 jobs/s at the most: 2 gives +11%
        // over it whatever comes after, so the second worker pays.
        assert!(Climb.decided(2, 1, &before, 1.8));
        assert!(
            !Climb.decided(2, 1, &before, 1.85),
            "only +8%: the window after decides"
        );
        // One more at 2.1 jobs/s at the most cannot add +10%.
        assert!(Climb.decided(2, 3, &before, 2.1));
        assert!(
            !Climb.decided(2, 3, &before, 2.3),
            "it may pay: the window after decides"
        );
    }

    #[test]
    fn the_figures_say_what_was_measured() {
        let (_, figures) = Climb.judge(&step(4, 5, [10.0, 12.0, 10.0]));
        assert_eq!(
            figures,
            "jobs/s 10.00 at 4, 12.00 at 5, 10.00 at 4: 5 gives +20% and +20% (a worker must add +10%)"
        );
    }
}
