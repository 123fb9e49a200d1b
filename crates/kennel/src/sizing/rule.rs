//! What a learning sizing judges: the three windows of a finished step, and
//! the [`Rule`] that tells HillClimbing and Gradient apart.

use std::fmt;

use super::Verdict;
use super::window::Measure;

/// The three windows of a finished step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Measured {
    pub(crate) from: usize,
    pub(crate) tried: usize,
    pub(crate) before: Measure,
    pub(crate) trial: Measure,
    pub(crate) after: Measure,
}

impl Measured {
    pub(crate) fn is_up(&self) -> bool {
        self.tried > self.from
    }

    /// The mean job time of the two windows at the current size.
    pub(crate) fn around(&self) -> f64 {
        (self.before.job_time + self.after.job_time) / 2.0
    }
}

/// What makes HillClimbing and Gradient differ.
pub(crate) trait Rule: Send + fmt::Debug + 'static {
    /// The size a step down from `from` tries, if it may go down.
    fn down(&self, from: usize) -> Option<usize>;

    /// A trial to take before the usual ones (Gradient's probe of the
    /// 2-worker time), if any.
    fn first(&self, from: usize) -> Option<usize> {
        let _ = from;
        None
    }

    /// Judges a finished step. For a step up: whether the added worker pays
    /// ([`Verdict::Pays`] keeps it). For a step down: whether the workers above
    /// the trial pay ([`Verdict::DoesNotPay`] is a strike against the top one).
    /// Also returns the figures, in words.
    fn judge(&mut self, step: &Measured) -> (Verdict, String);

    /// Whether a trial's verdict is already known from the window before it
    /// (at `from`, measured `before`) and the trial's jobs so far, whatever
    /// the window after it measures: `fastest` is the most jobs per second
    /// the trial's jobs allow at two standard errors. Then the trial ends
    /// early. By default never.
    fn decided(&self, from: usize, tried: usize, before: &Measure, fastest: f64) -> bool {
        let _ = (from, tried, before, fastest);
        false
    }

    /// The size moved from `from` to `to`, after `step`, or forced by memory
    /// (`None`).
    fn moved(&mut self, from: usize, to: usize, step: Option<&Measured>);
}

/// `part` as a percentage change from `base` (`+12%`, `-3%`).
pub(crate) fn percent(part: f64, base: f64) -> String {
    format!(
        "{:+.0}%",
        (part / base.max(f64::MIN_POSITIVE) - 1.0) * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_is_the_change_from_the_base() {
        assert_eq!(percent(1.12, 1.0), "+12%");
        assert_eq!(percent(0.97, 1.0), "-3%");
        assert_eq!(percent(1.0, 1.0), "+0%");
    }

    #[test]
    fn a_step_is_up_when_it_tried_more() {
        let m = |size| Measure {
            size,
            jobs: 20,
            job_time: 0.1,
        };
        let mut step = Measured {
            from: 3,
            tried: 4,
            before: m(3),
            trial: m(4),
            after: Measure {
                job_time: 0.3,
                ..m(3)
            },
        };
        assert!(step.is_up());
        assert!((step.around() - 0.2).abs() < 1e-12);
        step.tried = 2;
        assert!(!step.is_up());
    }
}
