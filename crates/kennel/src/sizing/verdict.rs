//! What a judged step changes: the size it leaves, and the way the next step
//! goes.
//!
//! One step up that pays keeps the worker; a worker goes only after two steps
//! down in a row show that it does not pay, and then only one. Steps go up
//! while they pay, then down while they do not, and turn after a step the
//! other way.

use super::Verdict;
use super::rule::Measured;

/// Which way the steps go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Dir {
    #[default]
    Up,
    Down,
}

/// The way the steps go, and the strikes against the top worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Course {
    dir: Dir,
    /// Steps down in a row that showed the top worker does not pay.
    strikes: u32,
}

impl Course {
    /// Whether the next step tries up first (else down first).
    pub(super) fn goes_up(self) -> bool {
        self.dir == Dir::Up
    }

    /// The size that `step`, judged `verdict`, leaves; turns the course as
    /// the verdict says. `figures` (the rule's words) learn what a step down
    /// that does not pay did.
    pub(super) fn after(
        &mut self,
        step: &Measured,
        verdict: Verdict,
        figures: &mut String,
    ) -> usize {
        let to = if step.is_up() {
            self.strikes = 0;
            if verdict == Verdict::Pays {
                self.dir = Dir::Up;
                step.tried
            } else {
                self.dir = Dir::Down;
                step.from
            }
        } else if verdict == Verdict::DoesNotPay {
            self.dir = Dir::Down;
            self.strikes += 1;
            if self.strikes >= 2 {
                self.strikes = 0;
                step.from - 1
            } else {
                step.from
            }
        } else {
            self.dir = Dir::Up;
            self.strikes = 0;
            step.from
        };
        if !step.is_up() && verdict == Verdict::DoesNotPay {
            figures.push_str(if to < step.from {
                "; the second such step in a row: one worker goes"
            } else {
                "; the first such step: one more in a row lets a worker go"
            });
        }
        to
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizing::window::Measure;

    fn step(from: usize, tried: usize) -> Measured {
        let m = |size| Measure {
            size,
            jobs: 20,
            job_time: 0.1,
        };
        Measured {
            from,
            tried,
            before: m(from),
            trial: m(tried),
            after: m(from),
        }
    }

    #[test]
    fn a_step_up_that_pays_keeps_the_worker_and_goes_on_up() {
        let mut course = Course::default();
        let mut figures = String::new();
        assert_eq!(course.after(&step(3, 4), Verdict::Pays, &mut figures), 4);
        assert!(course.goes_up());
        assert_eq!(
            course.after(&step(4, 5), Verdict::DoesNotPay, &mut figures),
            4
        );
        assert!(!course.goes_up(), "turns down");
        assert!(figures.is_empty(), "{figures}");
    }

    #[test]
    fn a_worker_goes_after_two_steps_down_in_a_row_that_do_not_pay() {
        let mut course = Course::default();
        let mut figures = String::new();
        assert_eq!(
            course.after(&step(4, 3), Verdict::DoesNotPay, &mut figures),
            4
        );
        assert!(
            figures.ends_with("one more in a row lets a worker go"),
            "{figures}"
        );
        let mut figures = String::new();
        assert_eq!(
            course.after(&step(4, 3), Verdict::DoesNotPay, &mut figures),
            3
        );
        assert!(figures.ends_with("one worker goes"), "{figures}");
        assert!(!course.goes_up());
        // A step down that pays clears the strike and turns up.
        assert_eq!(
            course.after(&step(3, 2), Verdict::DoesNotPay, &mut String::new()),
            3
        );
        assert_eq!(
            course.after(&step(3, 2), Verdict::Pays, &mut String::new()),
            3
        );
        assert!(course.goes_up());
        assert_eq!(
            course.after(&step(3, 2), Verdict::DoesNotPay, &mut String::new()),
            3
        );
    }
}
