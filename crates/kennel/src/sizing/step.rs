//! The step machinery the learning sizings share: the [`windows`](super::window)
//! it measures, the steps made of them, the [`course`](super::verdict) a judged
//! step sets, the [`pause`](super::pause), and the memory check after each
//! window.
//!
//! # Steps
//!
//! A step measures three windows: at the current size, at the trial size, and
//! at the current size again; the rule judges the trial against both
//! surrounding windows, and a change needs both to agree, so a drift cannot
//! make one. A step up tries one more worker; a step down tries fewer (the rule
//! says how many). One step up that pays keeps the worker; a worker goes only
//! after two steps down in a row show that it does not pay, and then only one.
//! After a step that changes nothing the sizing pauses.
//!
//! Each trial is announced as it starts ([`SizingTrial`]), with what the
//! window before it measured; its verdict comes with the step.
//!
//! # Memory
//!
//! After each window, and at each wake-up (one per `min_time`, so also while
//! no window counts), the sizing reads the free memory again
//! ([`Computer::free_for_pool`](crate::Computer::free_for_pool)). When the
//! running workers do not fit, it runs as many as fit (at least 1) and drops
//! the step it was measuring. A step up is tried only when one more worker
//! fits.

use std::time::Duration;

use tokio::time::Instant;

use super::memory::Memory;
use super::pause::Pause;
use super::rule::{Measured, Rule};
use super::verdict::Course;
use super::window::{Measure, SETTLE_JOBS, Window, Windows};
use super::{SizePlan, SizingDecision, SizingInput, SizingStep, SizingTrial, SizingView, Verdict};
use crate::error::BuildError;

/// The size a learning sizing starts at.
pub(crate) const FIRST_SIZE: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// The window at the current size before a trial.
    Before,
    /// The window at the trial size.
    Trial(usize),
    /// The window at the current size after the trial.
    After(usize),
    /// A pause this many windows long.
    Pause(f64),
}

/// Windows, steps and pauses for a [`Rule`], with the memory check.
#[derive(Debug)]
pub(crate) struct Stepper<R> {
    rule: R,
    memory: Memory,
    windows: Windows,
    capacity: usize,
    /// The size the sizing has (between trials).
    cur: usize,
    phase: Phase,
    before: Option<Measure>,
    trial: Option<Measure>,
    window: Option<Window>,
    /// After a change of size, no window starts before this.
    not_before: Option<Instant>,
    /// The longest job of the last window: how long jobs of the old size may
    /// still run after a change.
    last_longest: Duration,
    course: Course,
    pause: Pause,
    /// The spread of job times (coefficient of variation) of the last two
    /// windows, the latest first: quick windows take the larger.
    spreads: [Option<f64>; 2],
    /// The jobs after which the trial in progress showed its verdict, when
    /// it ended early.
    settled_after: Option<u32>,
}

impl<R: Rule> Stepper<R> {
    pub(crate) fn new(rule: R, memory: Memory) -> Self {
        Self {
            rule,
            memory,
            windows: Windows::default(),
            capacity: 1,
            cur: 1,
            phase: Phase::Before,
            before: None,
            trial: None,
            window: None,
            not_before: None,
            last_longest: Duration::ZERO,
            course: Course::default(),
            pause: Pause::new(),
            spreads: [None; 2],
            settled_after: None,
        }
    }

    pub(crate) fn set_seed(&mut self, seed: u64) {
        self.pause.set_seed(seed);
    }

    pub(crate) fn set_windows(&mut self, min_jobs: u32, min_time: Duration) {
        self.windows.min_jobs = min_jobs;
        self.windows.min_time = min_time;
    }

    pub(crate) fn set_quick_windows(&mut self, on: bool) {
        self.windows.quick = on;
    }

    pub(crate) fn set_pause(&mut self, shortest: u32, longest: u32) {
        self.pause.set_bounds(shortest, longest);
    }

    pub(crate) fn memory(&self) -> &Memory {
        &self.memory
    }

    /// Capacity from the computer, and a first size of 2 (or the capacity, if
    /// smaller). Starts learning afresh.
    pub(crate) fn plan(&mut self) -> Result<SizePlan, BuildError> {
        if self.windows.min_jobs == 0 {
            return Err(BuildError::new(
                "window",
                "0 jobs: a window counts at least 1 job (allowed: 1 or more)",
            ));
        }
        if self.windows.min_time.is_zero() {
            return Err(BuildError::new(
                "window",
                "0 s: a window lasts some time (allowed: above 0)",
            ));
        }
        self.pause
            .check()
            .map_err(|message| BuildError::new("pause", message))?;
        let mut plan = self.memory.plan()?;
        self.capacity = plan.capacity;
        self.cur = FIRST_SIZE.min(plan.capacity);
        plan.size = self.cur;
        self.phase = Phase::Before;
        self.before = None;
        self.trial = None;
        self.window = None;
        self.not_before = None;
        self.last_longest = Duration::ZERO;
        self.course = Course::default();
        self.pause.start();
        self.spreads = [None; 2];
        self.settled_after = None;
        Ok(plan)
    }

    pub(crate) fn may_start(&self, view: &SizingView) -> bool {
        self.memory.may_start(view.alive)
    }

    pub(crate) fn observe(&mut self, view: &SizingView, input: SizingInput) -> SizingDecision {
        let mut decision = SizingDecision::default();
        let now = view.now;
        let counts = view.waiting > 0 && view.all_ready;
        match input {
            SizingInput::Wake => {
                decision.wake_at = Some(now + self.windows.min_time);
                if self.check_memory(view, &mut decision) {
                    return decision;
                }
                if !counts {
                    self.window = None;
                } else if self.window.is_none() {
                    self.window = Some(Window::new(self.start_at(now)));
                }
            }
            SizingInput::JobDone { took } => {
                if !counts {
                    self.window = None;
                    return decision;
                }
                let start = self.start_at(now);
                let (jobs, time) = self.needs();
                let window = self.window.get_or_insert_with(|| Window::new(start));
                window.add(now, took);
                if window.is_done(now, jobs, time) || self.trial_settled(now) {
                    self.close_window(view, &mut decision);
                }
            }
        }
        decision
    }

    /// The size running now.
    fn running(&self) -> usize {
        match self.phase {
            Phase::Trial(t) => t,
            _ => self.cur,
        }
    }

    fn start_at(&self, now: Instant) -> Instant {
        self.not_before.map_or(now, |t| t.max(now))
    }

    /// The spread quick windows go by: the larger of the last two windows'.
    fn spread(&self) -> Option<f64> {
        match self.spreads {
            [Some(a), Some(b)] => Some(a.max(b)),
            [a, None] => a,
            [None, b] => b,
        }
    }

    /// Whether the trial in progress has shown its verdict already, so that
    /// it ends: with quick windows and the spread of job times known from
    /// the windows before, once it has [`SETTLE_JOBS`] jobs and `min_time`
    /// and the rule says that no window after it could change the verdict,
    /// even were the trial's jobs two standard errors faster than they were
    /// (with the larger of their own spread and the known one).
    fn trial_settled(&mut self, now: Instant) -> bool {
        let (Phase::Trial(tried), Some(before), Some(window), Some(known)) = (
            self.phase,
            self.before.as_ref(),
            self.window.as_ref(),
            self.spread(),
        ) else {
            return false;
        };
        let w = self.windows;
        if !w.quick || !window.is_done(now, SETTLE_JOBS.min(w.min_jobs), w.min_time) {
            return false;
        }
        let cv = window.spread().map_or(known, |own| own.max(known));
        let settled = window
            .fastest(tried, cv)
            .is_some_and(|fastest| self.rule.decided(self.cur, tried, before, fastest));
        if settled {
            self.settled_after = Some(window.measure(tried).jobs);
        }
        settled
    }

    /// Jobs and time the window in progress needs.
    fn needs(&self) -> (u32, Duration) {
        let w = self.windows;
        let jobs = w.jobs(self.spread());
        match self.phase {
            Phase::Pause(len) => {
                let jobs = (f64::from(jobs) * len).ceil();
                // Jobs per window are small numbers; the cast saturates anyway.
                (jobs as u32, w.min_time.mul_f64(len))
            }
            _ => (jobs, w.min_time),
        }
    }

    fn close_window(&mut self, view: &SizingView, decision: &mut SizingDecision) {
        let Some(window) = self.window.take() else {
            return;
        };
        let now = view.now;
        let measure = window.measure(self.running());
        self.last_longest = window.longest;
        if let Some(spread) = window.spread() {
            self.spreads = [Some(spread), self.spreads[0]];
        }
        if self.check_memory(view, decision) {
            return;
        }
        match self.phase {
            Phase::Pause(_) => {
                self.phase = Phase::Before;
                self.window = Some(Window::new(now));
            }
            Phase::Before => {
                self.before = Some(measure);
                match self.choose_trial(view) {
                    Some(trial) => {
                        self.phase = Phase::Trial(trial);
                        self.resize(trial, now, decision);
                        let (jobs, time) = self.needs();
                        decision.trial = Some(SizingTrial::new(
                            self.cur,
                            trial,
                            format!(
                                "jobs/s {:.2} at {} ({} jobs of {:.3}s): {trial} runs for a window of {jobs} jobs and {:.1}s",
                                measure.jobs_per_sec(),
                                self.cur,
                                measure.jobs,
                                measure.job_time,
                                time.as_secs_f64()
                            ),
                        ));
                    }
                    None => {
                        // Nothing to try (capacity 1, or 1 running and no
                        // memory for 2): wait as after a step that changed
                        // nothing.
                        self.start_pause(now);
                    }
                }
            }
            Phase::Trial(trial) => {
                self.trial = Some(measure);
                self.phase = Phase::After(trial);
                self.resize(self.cur, now, decision);
            }
            Phase::After(trial) => {
                let (Some(before), Some(measured_trial)) = (self.before.take(), self.trial.take())
                else {
                    self.settled_after = None;
                    self.phase = Phase::Before;
                    self.window = Some(Window::new(now));
                    return;
                };
                let step = Measured {
                    from: self.cur,
                    tried: trial,
                    before,
                    trial: measured_trial,
                    after: measure,
                };
                self.finish_step(&step, now, decision);
            }
        }
    }

    /// One more if it fits and the direction says up, else fewer, else the
    /// other way; `None` when neither is possible.
    fn choose_trial(&self, view: &SizingView) -> Option<usize> {
        if let Some(trial) = self.rule.first(self.cur) {
            return Some(trial);
        }
        let fit = self.memory.fit(view.alive).min(self.capacity);
        let up = (self.cur < fit).then_some(self.cur + 1);
        let down = self.rule.down(self.cur);
        if self.course.goes_up() {
            up.or(down)
        } else {
            down.or(up)
        }
    }

    fn finish_step(&mut self, step: &Measured, now: Instant, decision: &mut SizingDecision) {
        let (verdict, mut figures) = self.rule.judge(step);
        if let Some(jobs) = self.settled_after.take() {
            figures.push_str(&format!(" (the trial showed it after {jobs} jobs)"));
        }
        let to = self.course.after(step, verdict, &mut figures);
        decision
            .steps
            .push(SizingStep::new(step.from, step.tried, to, verdict, figures));
        if to == step.from {
            self.start_pause(now);
        } else {
            self.rule.moved(step.from, to, Some(step));
            self.cur = to;
            self.pause.reset();
            self.phase = Phase::Before;
            self.resize(to, now, decision);
        }
    }

    /// Pauses after a step that changed nothing, as long as the
    /// [`Pause`] says.
    fn start_pause(&mut self, now: Instant) {
        self.phase = Phase::Pause(self.pause.next());
        self.window = Some(Window::new(now));
    }

    /// Asks the pool for `size`; the next window begins once jobs of the old
    /// size have ended.
    fn resize(&mut self, size: usize, now: Instant, decision: &mut SizingDecision) {
        decision.size = Some(size);
        let start = now + self.last_longest;
        self.not_before = Some(start);
        self.window = Some(Window::new(start));
    }

    /// Runs fewer when the running workers do not fit in memory; drops the
    /// step in progress. Returns whether it did.
    fn check_memory(&mut self, view: &SizingView, decision: &mut SizingDecision) -> bool {
        let fit = self.memory.fit(view.alive).clamp(1, self.capacity);
        let running = self.running();
        if running <= fit && self.cur <= fit {
            return false;
        }
        let from = running.max(self.cur);
        let to = self.cur.min(fit);
        // Kept workers above what fits hold the memory that ran short:
        // close them too.
        decision.close_kept_above = Some(to);
        decision.steps.push(SizingStep::new(
            from,
            to,
            to,
            Verdict::MemoryShort,
            format!(
                "{} bytes free for the pool's workers, {} bytes each: {fit} fit",
                self.memory.free_for_pool(view.alive),
                self.memory.per_worker()
            ),
        ));
        if to != self.cur {
            self.rule.moved(self.cur, to, None);
        }
        self.cur = to;
        self.phase = Phase::Before;
        self.before = None;
        self.trial = None;
        self.settled_after = None;
        self.course = Course::default();
        self.pause.reset();
        self.resize(to, view.now, decision);
        true
    }
}

#[cfg(test)]
mod tests {
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
            stepper.set_seed(seed);
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
                    let phase = self.stepper.phase;
                    let view = self.view(waiting);
                    let d = self
                        .stepper
                        .observe(&view, SizingInput::JobDone { took: job });
                    if self.stepper.phase != phase {
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
            if let Phase::Pause(len) = drive.stepper.phase {
                if last != Some(len) {
                    pauses.push((drive.stepper.pause.quiet(), len));
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
        assert_eq!(drive.stepper.pause.quiet(), 0);
        drive.stepper.rule.0 = drive.stepper.cur;
        while !matches!(drive.stepper.phase, Phase::Pause(_)) {
            drive.run(1, 100);
        }
        let Phase::Pause(len) = drive.stepper.phase else {
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
                if let Phase::Pause(len) = drive.stepper.phase {
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
        s.set_windows(0, MIN_TIME);
        assert_eq!(s.plan().unwrap_err().option, "window");
        s.set_windows(1, Duration::ZERO);
        assert_eq!(s.plan().unwrap_err().option, "window");
        s.set_windows(1, MIN_TIME);
        s.set_pause(4, 2);
        assert_eq!(s.plan().unwrap_err().option, "pause");
    }
}
