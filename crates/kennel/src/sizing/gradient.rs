use super::Verdict;
use super::learning::learning_sizing;
use super::memory::Memory;
use super::rule::{Measured, Rule};
use super::step::{FIRST_SIZE, Stepper};
use crate::computer::Computer;

/// A job may take at most this many times its time with 2 workers.
const TOLERANCE: f64 = 1.5;
/// Steps after which the 2-worker time is measured again.
const PROBE_EVERY: u32 = 8;
/// A change of the job time at the current size, since the 2-worker time was
/// last measured, that makes the sizing measure it again.
const DRIFT: f64 = 0.10;

/// Runs 2 workers first, then as many as keep a job's time at most 1.5 × its
/// time with 2 workers (a gradient against a low-load baseline), learning for
/// as long as the pool runs.
///
/// It steps as [`HillClimbing`](crate::HillClimbing) does — three windows of
/// at least 20 jobs and 2 seconds, counted only while jobs wait and every
/// running worker is ready; one step up that pays keeps a worker, two steps
/// down in a row that do not pay let one go; a pause of 1 to 16 windows after
/// a step that changes nothing; memory read again after each window — but it
/// judges the mean job time, and a step down tries two fewer (never below 2,
/// the size its limit is measured against).
///
/// **The 2-worker time.** It keeps the job time at its size as a multiple of
/// the job time with 2 workers. That multiple is measured when the sizing runs
/// 2 workers, or tries 2, and is carried up step by step with the ratio of the
/// trial to the windows around it, so a load that grows or shrinks as a whole
/// does not move it. Since a baseline goes stale, it is measured again now
/// and then: a step down tries 2 workers instead of two fewer when the 2-worker
/// time was measured 8 steps ago or more, when the job time at the current
/// size moved by more than 10% since, or after memory forced a change.
///
/// - A step up pays when the trial's job time is at most 1.5 × the 2-worker
///   time, judged against each window around it.
/// - A step down shows the top worker does not pay when the job time at the
///   current size is above 1.5 × the 2-worker time (when the step tries 2:
///   in both windows around it).
///
/// ```
/// use kennel::{Gradient, SystemComputer};
///
/// let sizing = Gradient::new(2 << 30, SystemComputer);
/// # let _ = sizing;
/// ```
#[derive(Debug)]
pub struct Gradient {
    stepper: Stepper<Grade>,
}

impl Gradient {
    /// Learns how many workers of `memory_per_worker` bytes keep a job's time
    /// within 1.5 × its time with 2 workers, on `computer`.
    pub fn new(memory_per_worker: u64, computer: impl Computer) -> Self {
        Self {
            stepper: Stepper::new(Grade::default(), Memory::new(memory_per_worker, computer)),
        }
    }
}

learning_sizing!(Gradient);

/// Gradient's rule: job time against the 2-worker time, two fewer down.
#[derive(Debug, Default)]
struct Grade {
    /// Job time at the current size / job time with 2 workers, when known.
    rel: Option<f64>,
    /// The job time at the current size when `rel` was last set, in seconds.
    at_rel: Option<f64>,
    /// Steps since the 2-worker time was measured.
    since_anchor: u32,
    /// The job time at the current size moved since.
    drifted: bool,
}

impl Grade {
    fn needs_anchor(&self) -> bool {
        self.rel.is_none() || self.since_anchor >= PROBE_EVERY || self.drifted
    }

    fn anchor(&mut self, rel: f64, job_time: f64) {
        self.rel = Some(rel);
        self.at_rel = Some(job_time);
        self.since_anchor = 0;
        self.drifted = false;
    }
}

impl Rule for Grade {
    fn down(&self, from: usize) -> Option<usize> {
        (from > FIRST_SIZE).then(|| from.saturating_sub(2).max(FIRST_SIZE))
    }

    fn first(&self, from: usize) -> Option<usize> {
        (from > FIRST_SIZE && self.needs_anchor()).then_some(FIRST_SIZE)
    }

    fn judge(&mut self, step: &Measured) -> (Verdict, String) {
        let (ta, tb, tc) = (
            step.before.job_time,
            step.trial.job_time,
            step.after.job_time,
        );
        let (from, tried) = (step.from, step.tried);
        let around = step.around();
        let mut anchored = false;
        if from == FIRST_SIZE {
            self.anchor(1.0, around);
            anchored = true;
        }
        let measured =
            format!("job time {ta:.3} s at {from}, {tb:.3} s at {tried}, {tc:.3} s at {from}");
        let (verdict, figures) = if step.is_up() {
            if tried <= FIRST_SIZE {
                (
                    Verdict::Pays,
                    format!("{measured}: up to 2 always pays (the limit is measured at 2)"),
                )
            } else if let Some(rel) = self.rel {
                let (ra, rc) = (
                    rel * tb / ta.max(f64::MIN_POSITIVE),
                    rel * tb / tc.max(f64::MIN_POSITIVE),
                );
                let pays = ra <= TOLERANCE && rc <= TOLERANCE;
                (
                    Verdict::of(pays),
                    format!(
                        "{measured}: {tried} takes x{ra:.2} and x{rc:.2} the 2-worker time (limit x1.5)"
                    ),
                )
            } else {
                (
                    Verdict::DoesNotPay,
                    format!("{measured}: no 2-worker time yet"),
                )
            }
        } else if tried == FIRST_SIZE {
            let tb = tb.max(f64::MIN_POSITIVE);
            let (ra, rc) = (ta / tb, tc / tb);
            self.anchor(around / tb, around);
            anchored = true;
            let does_not_pay = ra > TOLERANCE && rc > TOLERANCE;
            (
                Verdict::of(!does_not_pay),
                format!(
                    "{measured}: {from} takes x{ra:.2} and x{rc:.2} the 2-worker time (limit x1.5)"
                ),
            )
        } else {
            let rel = self.rel.unwrap_or(1.0);
            let does_not_pay = rel > TOLERANCE;
            (
                Verdict::of(!does_not_pay),
                format!("{measured}: {from} takes x{rel:.2} the 2-worker time (limit x1.5)"),
            )
        };
        if !anchored {
            self.since_anchor += 1;
            if let Some(at) = self.at_rel
                && (around / at.max(f64::MIN_POSITIVE) - 1.0).abs() > DRIFT
            {
                self.drifted = true;
            }
        }
        (verdict, figures)
    }

    fn moved(&mut self, from: usize, to: usize, step: Option<&Measured>) {
        if to == FIRST_SIZE {
            let at = step.map(|s| {
                if s.tried == to {
                    s.trial.job_time
                } else {
                    s.around()
                }
            });
            self.rel = Some(1.0);
            self.at_rel = at;
            return;
        }
        let Some(step) = step else {
            // Forced by memory: the multiple at the new size is unknown.
            self.rel = None;
            self.at_rel = None;
            return;
        };
        let around = step.around().max(f64::MIN_POSITIVE);
        let ratio = step.trial.job_time / around;
        if to == step.tried {
            self.rel = self.rel.map(|r| r * ratio);
            self.at_rel = Some(step.trial.job_time);
        } else {
            // One goes after a step down: between the current size and the
            // trial, geometrically.
            let part = (from - to) as f64 / (from - step.tried).max(1) as f64;
            let factor = ratio.powf(part);
            self.rel = self.rel.map(|r| r * factor);
            self.at_rel = Some(around * factor);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizing::window::Measure;

    fn step(from: usize, tried: usize, times: [f64; 3]) -> Measured {
        let m = |size, job_time| Measure {
            size,
            jobs: 20,
            job_time,
        };
        Measured {
            from,
            tried,
            before: m(from, times[0]),
            trial: m(tried, times[1]),
            after: m(from, times[2]),
        }
    }

    #[test]
    fn one_more_pays_while_its_job_time_is_within_one_and_a_half_times_the_two_worker_time() {
        let mut g = Grade::default();
        let s = step(2, 3, [1.0, 1.2, 1.0]);
        assert_eq!(g.judge(&s).0, Verdict::Pays);
        g.moved(2, 3, Some(&s));
        assert!((g.rel.unwrap() - 1.2).abs() < 1e-9);
        // 1.2 × 1.3 = 1.56 > 1.5.
        assert_eq!(
            g.judge(&step(3, 4, [1.2, 1.56, 1.2])).0,
            Verdict::DoesNotPay
        );
        // 1.2 × 1.2 = 1.44.
        assert_eq!(g.judge(&step(3, 4, [1.2, 1.44, 1.2])).0, Verdict::Pays);
    }

    #[test]
    fn a_load_that_grows_as_a_whole_does_not_move_the_multiple() {
        let mut g = Grade::default();
        g.anchor(1.2, 1.2);
        // Every job takes twice as long now, at every size.
        assert_eq!(g.judge(&step(3, 4, [2.4, 2.4, 2.4])).0, Verdict::Pays);
        // ... but it is a drift, so the next step down measures 2 again.
        assert!(g.needs_anchor());
        assert_eq!(g.first(3), Some(2));
    }

    #[test]
    fn a_step_down_to_two_measures_the_two_worker_time_again() {
        let mut g = Grade::default();
        g.anchor(1.2, 1.2);
        let (verdict, figures) = g.judge(&step(6, 2, [1.8, 1.0, 1.8]));
        assert_eq!(verdict, Verdict::DoesNotPay, "{figures}");
        assert!((g.rel.unwrap() - 1.8).abs() < 1e-9);
        assert_eq!(g.since_anchor, 0);
        // One window at the limit and one above: no verdict against it.
        assert_eq!(g.judge(&step(6, 2, [1.8, 1.0, 1.4])).0, Verdict::Pays);
    }

    #[test]
    fn it_measures_two_again_every_eight_steps() {
        let mut g = Grade::default();
        g.anchor(1.0, 1.0);
        for _ in 0..PROBE_EVERY {
            assert_eq!(g.first(5), None);
            g.judge(&step(5, 6, [1.0, 1.0, 1.0]));
        }
        assert_eq!(g.first(5), Some(2));
        assert_eq!(g.first(2), None, "at 2 it is measured anyway");
    }

    #[test]
    fn a_step_down_tries_two_fewer_but_not_below_two() {
        let g = Grade::default();
        assert_eq!(g.down(8), Some(6));
        assert_eq!(g.down(3), Some(2));
        assert_eq!(g.down(2), None);
        assert_eq!(g.down(1), None);
    }

    #[test]
    fn letting_one_go_interpolates_the_multiple() {
        let mut g = Grade::default();
        g.anchor(1.69, 1.69);
        let s = step(8, 6, [1.69, 1.0, 1.69]);
        g.moved(8, 7, Some(&s));
        assert!((g.rel.unwrap() - 1.3).abs() < 1e-9);
        g.moved(7, 4, None);
        assert_eq!(g.rel, None);
        assert!(g.needs_anchor());
    }
}
