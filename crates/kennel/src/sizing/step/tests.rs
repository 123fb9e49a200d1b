//! The step machinery the learning sizings share, tested with a rule of
//! its own: no pool, no runtime.

use super::*;
use crate::computer::TestComputer;
use crate::sizing::window::MIN_TIME;

const GIB: u64 = 1 << 30;

/// Up pays while the trial is at most `best`; down never pays.
#[derive(Debug)]
struct Best(usize);

impl Rule for Best {
    fn down(&self, from: usize) -> Option<usize> {
        (from > 1).then(|| from - 1)
    }
    fn judge(&mut self, step: &Measured) -> (Verdict, String) {
        let pays = if step.is_up() {
            step.tried <= self.0
        } else {
            step.from <= self.0
        };
        let verdict = if pays {
            Verdict::Pays
        } else {
            Verdict::DoesNotPay
        };
        (verdict, String::new())
    }
    fn moved(&mut self, _: usize, _: usize, _: Option<&Measured>) {}
}

/// Drives a stepper by hand: every job takes `job`, jobs always wait.
struct Drive {
    stepper: Stepper<Best>,
    computer: TestComputer,
    now: Instant,
    size: usize,
    steps: Vec<(SizingStep, Instant)>,
    windows_closed: usize,
}

impl Drive {
    fn new(best: usize, cpus: usize, seed: u64) -> Self {
        let computer = TestComputer::new(cpus, 64 * GIB);
        let mut stepper = Stepper::new(Best(best), Memory::new(GIB, computer.clone()));
        stepper.pause.set_seed(seed);
        let plan = stepper.plan().unwrap();
        let mut drive = Self {
            stepper,
            computer,
            now: Instant::now(),
            size: plan.size,
            steps: Vec::new(),
            windows_closed: 0,
        };
        // As the pool does once it is built.
        drive.wake(100);
        drive
    }

    fn view(&self, waiting: usize) -> SizingView {
        SizingView {
            now: self.now,
            size: self.size,
            capacity: self.stepper.capacity,
            waiting,
            all_ready: true,
            alive: self.size,
        }
    }

    fn apply(&mut self, d: SizingDecision) {
        if let Some(s) = d.size {
            self.size = s.clamp(1, self.stepper.capacity);
        }
        for s in d.steps {
            self.steps.push((s, self.now));
        }
    }

    /// `n` rounds of every running worker finishing a 100 ms job.
    fn run(&mut self, rounds: usize, waiting: usize) {
        let job = Duration::from_millis(100);
        for _ in 0..rounds {
            self.now += job;
            for _ in 0..self.size {
                let phase = self.stepper.at.phase;
                let view = self.view(waiting);
                let d = self
                    .stepper
                    .observe(&view, SizingInput::JobDone { took: job });
                if self.stepper.at.phase != phase {
                    self.windows_closed += 1;
                }
                self.apply(d);
            }
        }
    }

    fn wake(&mut self, waiting: usize) {
        let view = self.view(waiting);
        let d = self.stepper.observe(&view, SizingInput::Wake);
        self.apply(d);
    }
}

#[test]
fn a_step_up_that_pays_keeps_the_worker_at_once() {
    let mut drive = Drive::new(5, 16, 1);
    assert_eq!(drive.size, 2);
    drive.run(2000, 100);
    let firsts: Vec<_> = drive.steps.iter().take(3).map(|(s, _)| s.clone()).collect();
    assert_eq!(
        firsts
            .iter()
            .map(|s| (s.from, s.tried, s.to))
            .collect::<Vec<_>>(),
        [(2, 3, 3), (3, 4, 4), (4, 5, 5)]
    );
    assert_eq!(drive.stepper.cur, 5);
}

#[test]
fn a_worker_goes_only_after_two_steps_down_in_a_row_that_do_not_pay() {
    let mut drive = Drive::new(16, 16, 2);
    drive.run(3000, 100);
    assert!(drive.stepper.cur >= 8, "climbed: {}", drive.stepper.cur);
    // Now nothing above 3 pays.
    drive.stepper.rule.0 = 3;
    let start = drive.steps.len();
    drive.run(20_000, 100);
    let downs: Vec<_> = drive.steps[start..]
        .iter()
        .map(|(s, _)| s)
        .filter(|s| s.tried < s.from)
        .collect();
    let mut strikes = 0;
    for s in &downs {
        if s.verdict == Verdict::DoesNotPay {
            strikes += 1;
            if strikes == 2 {
                assert_eq!(s.to, s.from - 1, "{s:?}");
                strikes = 0;
            } else {
                assert_eq!(s.to, s.from, "{s:?}");
            }
        } else {
            strikes = 0;
            assert_eq!(s.to, s.from);
        }
    }
    assert_eq!(drive.stepper.cur, 3);
}

#[test]
fn the_pause_doubles_up_to_sixteen_windows_and_resets_on_a_change() {
    let mut drive = Drive::new(4, 16, 3);
    let mut pauses = Vec::new();
    let mut last = None;
    for _ in 0..40_000 {
        drive.run(1, 100);
        if let Phase::Pause(len) = drive.stepper.at.phase {
            if last != Some(len) {
                pauses.push((drive.stepper.pause.quiet, len));
                last = Some(len);
            }
        } else {
            last = None;
        }
        if pauses.len() == 8 {
            break;
        }
    }
    for &(quiet, len) in &pauses {
        let nominal = f64::from((1u32 << (quiet - 1).min(4)).min(16));
        assert!((0.5 * nominal..1.5 * nominal).contains(&len), "{pauses:?}");
    }
    let quiets: Vec<u32> = pauses.iter().map(|p| p.0).collect();
    assert_eq!(quiets, [1, 2, 3, 4, 5, 6, 7, 8]);

    // A change resets it.
    drive.stepper.rule.0 = 8;
    while drive.stepper.cur == 4 {
        drive.run(1, 100);
    }
    assert_eq!(drive.stepper.pause.quiet, 0);
    drive.stepper.rule.0 = drive.stepper.cur;
    while !matches!(drive.stepper.at.phase, Phase::Pause(_)) {
        drive.run(1, 100);
    }
    let Phase::Pause(len) = drive.stepper.at.phase else {
        unreachable!()
    };
    assert!((0.5..1.5).contains(&len), "{len}");
}

#[test]
fn the_pause_length_is_random_but_seeded() {
    let lens = |seed| {
        let mut drive = Drive::new(2, 16, seed);
        let mut out = Vec::new();
        while out.len() < 5 {
            drive.run(1, 100);
            if let Phase::Pause(len) = drive.stepper.at.phase {
                if out.last() != Some(&len) {
                    out.push(len);
                }
            }
        }
        out
    };
    assert_eq!(lens(7), lens(7));
    assert_ne!(lens(7), lens(8));
}

#[test]
fn a_window_counts_only_while_jobs_wait() {
    let mut drive = Drive::new(16, 16, 4);
    drive.run(10_000, 0);
    assert!(drive.steps.is_empty());
    assert_eq!(drive.windows_closed, 0);
    assert_eq!(drive.size, 2);
}

#[test]
fn an_interrupted_window_starts_again_from_nothing() {
    let mut drive = Drive::new(16, 16, 5);
    // 19 rounds of 2 jobs (1.9 s) with jobs waiting, then an empty queue:
    // never a whole window.
    for _ in 0..200 {
        drive.run(19, 100);
        drive.run(1, 0);
    }
    assert_eq!(drive.windows_closed, 0);
    // Without the gaps, windows close.
    drive.run(40, 100);
    assert!(drive.windows_closed > 0);
}

#[test]
fn a_memory_drop_runs_what_fits_at_the_next_wake_up() {
    let mut drive = Drive::new(16, 8, 6);
    drive.run(3000, 100);
    assert_eq!(drive.size, 8);
    drive.computer.set_memory(5 * GIB / 2);
    drive.wake(100);
    assert_eq!(drive.size, 2);
    let (last, _) = drive.steps.last().unwrap();
    assert_eq!(
        (last.from, last.tried, last.to, last.verdict),
        (8, 2, 2, Verdict::MemoryShort)
    );
    // It never tries more than fit.
    drive.run(3000, 100);
    assert!(drive.size <= 2);
    drive.computer.set_memory(0);
    drive.wake(100);
    assert_eq!(drive.size, 1, "never below 1");
}

#[test]
fn windows_need_both_twenty_jobs_and_two_seconds() {
    let mut drive = Drive::new(16, 16, 9);
    // 2 workers, 100 ms jobs: 20 jobs after 1 s, 2 s after 40 jobs.
    drive.run(19, 100);
    assert_eq!(drive.windows_closed, 0, "20 jobs but under 2 s");
    drive.run(1, 100);
    assert_eq!(drive.windows_closed, 1);
}

#[test]
fn a_capacity_of_one_takes_no_step() {
    let mut drive = Drive::new(16, 1, 10);
    assert_eq!(drive.size, 1);
    drive.run(5000, 100);
    assert!(drive.steps.is_empty());
    assert_eq!(drive.size, 1);
    assert!(drive.windows_closed > 10, "it still measures and pauses");
}

#[test]
fn bad_window_settings_are_build_errors() {
    let mut s = Stepper::new(Best(1), Memory::new(GIB, TestComputer::new(2, GIB)));
    s.windows.min_jobs = 0;
    assert_eq!(s.plan().unwrap_err().option, "window");
    (s.windows.min_jobs, s.windows.min_time) = (1, Duration::ZERO);
    assert_eq!(s.plan().unwrap_err().option, "window");
    s.windows.min_time = MIN_TIME;
    s.pause.set_bounds(4, 2);
    assert_eq!(s.plan().unwrap_err().option, "pause");
}
