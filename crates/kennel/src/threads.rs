//! Oversubscription: a worker that keeps far more threads working than the
//! CPU threads it was given. Each such worker slows every other on the host
//! (they fight over the cores, and spinning thread pools burn CPU waiting),
//! and nothing else tells the user: the jobs succeed, only slower.
//!
//! The pool measures a worker over its first jobs, from outside it: at the
//! lend and at the return of each job it reads the CPU time of each of the
//! worker's threads ([`ThreadSample`], for a process from `/proc`). Once the
//! jobs have held the worker [`MEASURE_FOR`] it judges once ([`ThreadUse`]);
//! no reading is taken after that.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::worker::Meter;

/// The job time a worker is measured over before it is judged.
pub const MEASURE_FOR: Duration = Duration::from_secs(1);

/// A thread counts as working when it ran at least this share of the
/// measured job time (an idle helper thread of a runtime runs none).
pub const WORKING_SHARE: f64 = 0.05;

/// One reading of a worker's threads, taken from outside it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ThreadSample {
    /// The CPU threads the worker was given (its budget).
    pub budget: usize,
    /// Each thread's id and the CPU time it has used so far.
    pub threads: Vec<(u64, Duration)>,
}

impl ThreadSample {
    /// A reading of `threads` for a worker given `budget` threads.
    pub fn new(budget: usize, threads: Vec<(u64, Duration)>) -> Self {
        Self { budget, threads }
    }
}

/// How a worker used the CPU threads it was given during its first jobs.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ThreadUse {
    /// The CPU threads it was given.
    pub budget: usize,
    /// The threads it ran at the end of the measure.
    pub threads: usize,
    /// Of them, those that worked during its jobs (each ran at least
    /// [`WORKING_SHARE`] of the job time).
    pub working: usize,
    /// The CPU time its threads used per second of job time: the cores its
    /// jobs kept busy.
    pub cores: f64,
    /// The job time measured.
    pub measured: Duration,
}

impl ThreadUse {
    /// What to do about a worker that oversubscribes its threads.
    pub const FIX: &'static str = "make the worker's runtimes use KENNEL_THREADS threads \
        (the Python SDK applies it to onnxruntime, BLAS and OpenMP, torch and OpenCV before \
        load; elsewhere pass it as the runtime's thread setting), or give each worker more \
        threads with `threads` and run fewer workers";

    /// Whether it keeps more than twice its budget of threads working.
    pub fn oversubscribed(&self) -> bool {
        self.working > 2 * self.budget.max(1)
    }
}

impl fmt::Display for ThreadUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of its {} threads worked during its jobs on a budget of {} ({:.2} cores busy over {:.1}s of jobs)",
            self.working,
            self.threads,
            self.budget,
            self.cores,
            self.measured.as_secs_f64()
        )
    }
}

/// A worker's thread meter and what its jobs used so far, shared by its
/// slot and the leases that lend it.
#[derive(Debug)]
pub(crate) struct ThreadWatch {
    meter: Meter<ThreadSample>,
    tally: Mutex<ThreadTally>,
}

impl ThreadWatch {
    pub(crate) fn new(meter: Meter<ThreadSample>) -> Self {
        Self {
            meter,
            tally: Mutex::new(ThreadTally::default()),
        }
    }

    /// A reading at a lend, while the worker is still measured.
    pub(crate) fn at_lend(&self) -> Option<(Instant, ThreadSample)> {
        let measuring = self
            .tally
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .measuring();
        measuring
            .then(|| self.meter.read())
            .flatten()
            .map(|sample| (Instant::now(), sample))
    }

    /// A reading at the return of a job read at its lend; the judgement
    /// once the jobs add up to [`MEASURE_FOR`].
    pub(crate) fn at_return(&self, lent: &(Instant, ThreadSample)) -> Option<ThreadUse> {
        let after = self.meter.read()?;
        self.tally
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .add(lent, &after, Instant::now())
    }
}

/// What a worker's jobs used, summed until it is judged.
#[derive(Debug, Default)]
pub(crate) struct ThreadTally {
    cpu: HashMap<u64, Duration>,
    job_time: Duration,
    judged: bool,
}

impl ThreadTally {
    /// Whether readings are still wanted.
    pub(crate) fn measuring(&self) -> bool {
        !self.judged
    }

    /// Adds one job, read at its lend (`before`) and its return (`after`);
    /// the judgement once the jobs add up to [`MEASURE_FOR`], and then
    /// never again.
    pub(crate) fn add(
        &mut self,
        before: &(Instant, ThreadSample),
        after: &ThreadSample,
        now: Instant,
    ) -> Option<ThreadUse> {
        if self.judged {
            return None;
        }
        let (lent, start) = before;
        let was: HashMap<u64, Duration> = start.threads.iter().copied().collect();
        for &(id, cpu) in &after.threads {
            // A thread born during the job used all its time in it.
            let used = cpu.saturating_sub(was.get(&id).copied().unwrap_or_default());
            *self.cpu.entry(id).or_default() += used;
        }
        self.job_time += now.saturating_duration_since(*lent);
        if self.job_time < MEASURE_FOR {
            return None;
        }
        self.judged = true;
        let total: Duration = self.cpu.values().sum();
        let secs = self.job_time.as_secs_f64();
        let working = self
            .cpu
            .values()
            .filter(|cpu| cpu.as_secs_f64() >= WORKING_SHARE * secs)
            .count();
        Some(ThreadUse {
            budget: after.budget,
            threads: after.threads.len(),
            working,
            cores: total.as_secs_f64() / secs,
            measured: self.job_time,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn threads_that_ran_during_the_jobs_are_working_and_idle_ones_are_not() {
        let mut tally = ThreadTally::default();
        let t0 = Instant::now();
        // Thread 1 works, thread 2 idles, thread 3 is born and works.
        let before = (t0, ThreadSample::new(1, vec![(1, ms(500)), (2, ms(40))]));
        let after = ThreadSample::new(1, vec![(1, ms(1300)), (2, ms(40)), (3, ms(600))]);
        let judged = tally.add(&before, &after, t0 + ms(1000)).unwrap();
        assert_eq!((judged.working, judged.threads, judged.budget), (2, 3, 1));
        assert!((judged.cores - 1.4).abs() < 1e-9);
        assert!(!judged.oversubscribed());
        assert!(!tally.measuring());
        assert_eq!(tally.add(&before, &after, t0 + ms(3000)), None);
    }

    #[test]
    fn more_than_twice_the_budget_working_is_oversubscribed() {
        let mut tally = ThreadTally::default();
        let t0 = Instant::now();
        let before = (t0, ThreadSample::new(1, vec![]));
        let four: Vec<_> = (0..4).map(|id| (id, ms(300))).collect();
        let after = ThreadSample::new(1, four);
        // Two jobs of 600 ms: judged after the second.
        assert_eq!(tally.add(&before, &after, t0 + ms(600)), None);
        let judged = tally.add(&before, &after, t0 + ms(600)).unwrap();
        assert_eq!(judged.working, 4);
        assert!(judged.oversubscribed());
        assert!(judged.to_string().starts_with("4 of its 4 threads worked"));
    }
}
