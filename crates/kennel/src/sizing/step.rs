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

#[derive(Debug, Clone, Copy, Default, PartialEq)]
enum Phase {
    /// The window at the current size before a trial.
    #[default]
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
    pub(super) memory: Memory,
    pub(super) windows: Windows,
    capacity: usize,
    /// The size the sizing has (between trials).
    cur: usize,
    pub(super) pause: Pause,
    /// What it learned since its plan.
    at: Learned,
}

/// What a stepper learned since its plan: the step in progress and what
/// the windows before it measured.
#[derive(Debug, Default)]
struct Learned {
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
            pause: Pause::new(),
            at: Learned::default(),
        }
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
        self.at = Learned::default();
        self.pause.start();
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
                    self.at.window = None;
                } else if self.at.window.is_none() {
                    self.at.window = Some(Window::new(self.start_at(now)));
                }
            }
            SizingInput::JobDone { took } => {
                if !counts {
                    self.at.window = None;
                    return decision;
                }
                let start = self.start_at(now);
                let (jobs, time) = self.needs();
                let window = self.at.window.get_or_insert_with(|| Window::new(start));
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
        match self.at.phase {
            Phase::Trial(t) => t,
            _ => self.cur,
        }
    }

    fn start_at(&self, now: Instant) -> Instant {
        self.at.not_before.map_or(now, |t| t.max(now))
    }

    /// The spread quick windows go by: the larger of the last two windows'.
    fn spread(&self) -> Option<f64> {
        self.at.spreads.into_iter().flatten().reduce(f64::max)
    }

    /// Whether the trial in progress has shown its verdict already, so that
    /// it ends: with quick windows and the spread of job times known from
    /// the windows before, once it has [`SETTLE_JOBS`] jobs and `min_time`
    /// and the rule says that no window after it could change the verdict,
    /// even were the trial's jobs two standard errors faster than they were
    /// (with the larger of their own spread and the known one).
    fn trial_settled(&mut self, now: Instant) -> bool {
        let (Phase::Trial(tried), Some(before), Some(window), Some(known)) = (
            self.at.phase,
            self.at.before.as_ref(),
            self.at.window.as_ref(),
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
            self.at.settled_after = Some(window.measure(tried).jobs);
        }
        settled
    }

    /// Jobs and time the window in progress needs.
    fn needs(&self) -> (u32, Duration) {
        let w = self.windows;
        let jobs = w.jobs(self.spread());
        match self.at.phase {
            Phase::Pause(len) => {
                let jobs = (f64::from(jobs) * len).ceil();
                // Jobs per window are small numbers; the cast saturates anyway.
                (jobs as u32, w.min_time.mul_f64(len))
            }
            _ => (jobs, w.min_time),
        }
    }

    fn close_window(&mut self, view: &SizingView, decision: &mut SizingDecision) {
        let Some(window) = self.at.window.take() else {
            return;
        };
        let now = view.now;
        let measure = window.measure(self.running());
        self.at.last_longest = window.longest;
        if let Some(spread) = window.spread() {
            self.at.spreads = [Some(spread), self.at.spreads[0]];
        }
        if self.check_memory(view, decision) {
            return;
        }
        match self.at.phase {
            Phase::Pause(_) => {
                self.at.phase = Phase::Before;
                self.at.window = Some(Window::new(now));
            }
            Phase::Before => {
                self.at.before = Some(measure);
                match self.choose_trial(view) {
                    Some(trial) => {
                        self.at.phase = Phase::Trial(trial);
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
                self.at.trial = Some(measure);
                self.at.phase = Phase::After(trial);
                self.resize(self.cur, now, decision);
            }
            Phase::After(trial) => {
                let (Some(before), Some(measured_trial)) =
                    (self.at.before.take(), self.at.trial.take())
                else {
                    self.at.settled_after = None;
                    self.at.phase = Phase::Before;
                    self.at.window = Some(Window::new(now));
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
        if self.at.course.goes_up() {
            up.or(down)
        } else {
            down.or(up)
        }
    }

    fn finish_step(&mut self, step: &Measured, now: Instant, decision: &mut SizingDecision) {
        let (verdict, mut figures) = self.rule.judge(step);
        if let Some(jobs) = self.at.settled_after.take() {
            figures.push_str(&format!(" (the trial showed it after {jobs} jobs)"));
        }
        let to = self.at.course.after(step, verdict, &mut figures);
        decision
            .steps
            .push(SizingStep::new(step.from, step.tried, to, verdict, figures));
        if to == step.from {
            self.start_pause(now);
        } else {
            self.rule.moved(step.from, to, Some(step));
            self.cur = to;
            self.pause.reset();
            self.at.phase = Phase::Before;
            self.resize(to, now, decision);
        }
    }

    /// Pauses after a step that changed nothing, as long as the
    /// [`Pause`] says.
    fn start_pause(&mut self, now: Instant) {
        self.at.phase = Phase::Pause(self.pause.next());
        self.at.window = Some(Window::new(now));
    }

    /// Asks the pool for `size`; the next window begins once jobs of the old
    /// size have ended.
    fn resize(&mut self, size: usize, now: Instant, decision: &mut SizingDecision) {
        decision.size = Some(size);
        let start = now + self.at.last_longest;
        self.at.not_before = Some(start);
        self.at.window = Some(Window::new(start));
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
        self.at.phase = Phase::Before;
        self.at.before = None;
        self.at.trial = None;
        self.at.settled_after = None;
        self.at.course = Course::default();
        self.pause.reset();
        self.resize(to, view.now, decision);
        true
    }
}

#[cfg(test)]
mod tests;
