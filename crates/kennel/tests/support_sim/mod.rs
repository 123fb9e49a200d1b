//! A simulated workload whose best size is known, for the learning sizings.
//!
//! A [`Machine`] has a few cores that the pool's workers share: with `n` jobs
//! running at once, a job takes `work × max(1, n / cores) × (1 + contention ×
//! max(0, n - cores))`, times a seeded jitter (±5% unless the curve says).
//! Throughput rises linearly up to `cores` workers and falls after, so with 6 cores the best
//! size is 6; a job's time stays within 1.5 × its time with 2 workers up to 7
//! workers (contention 0.1). [`Load`] drives a pool with clients that each run
//! one job after another; the test sets how many are active. [`Record`] keeps
//! the sizing steps and the size over time.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kennel::{Event, Pool, SizingStep};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::support::Fake;

/// How a job's time depends on how many jobs run at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Curve {
    pub cores: f64,
    pub contention: f64,
    pub work: Duration,
    /// How far a job's time strays either way, as a fraction (uniform).
    pub jitter: f64,
}

impl Curve {
    /// `cores` cores, contention 0.1, half a second of work per job, ±5%.
    pub fn cores(cores: f64) -> Self {
        Self {
            cores,
            contention: 0.1,
            work: Duration::from_millis(500),
            jitter: 0.05,
        }
    }

    /// A job's time with `n` jobs running at once (no jitter).
    pub fn job_time(&self, n: usize) -> Duration {
        let n = n.max(1) as f64;
        let share = (n / self.cores).max(1.0);
        let slowdown = 1.0 + self.contention * (n - self.cores).max(0.0);
        self.work.mul_f64(share * slowdown)
    }

    /// Jobs per second with `n` workers, all busy.
    pub fn jobs_per_sec(&self, n: usize) -> f64 {
        n as f64 / self.job_time(n).as_secs_f64()
    }

    /// The size with the most jobs per second, up to `capacity`.
    pub fn best(&self, capacity: usize) -> usize {
        (1..=capacity)
            .max_by(|&a, &b| self.jobs_per_sec(a).total_cmp(&self.jobs_per_sec(b)))
            .unwrap()
    }

    /// The largest size whose job time is at most 1.5 × the time with 2.
    pub fn gradient_limit(&self, capacity: usize) -> usize {
        let two = self.job_time(2).as_secs_f64();
        (2..=capacity)
            .filter(|&n| self.job_time(n).as_secs_f64() <= 1.5 * two)
            .max()
            .unwrap_or(2)
    }
}

#[derive(Debug)]
struct MachineState {
    curve: Curve,
    running: usize,
    done: u64,
    rng: StdRng,
}

/// The cores the workers share; clones share them.
#[derive(Debug, Clone)]
pub struct Machine {
    state: Arc<Mutex<MachineState>>,
}

impl Machine {
    pub fn new(curve: Curve, seed: u64) -> Self {
        Self {
            state: Arc::new(Mutex::new(MachineState {
                curve,
                running: 0,
                done: 0,
                rng: StdRng::seed_from_u64(seed),
            })),
        }
    }

    /// Changes the curve for jobs that start from now on.
    pub fn set_curve(&self, curve: Curve) {
        self.state.lock().unwrap().curve = curve;
    }

    /// Runs one job: its time depends on how many run at once when it starts.
    pub async fn job(&self) {
        let took = {
            let mut st = self.state.lock().unwrap();
            st.running += 1;
            let j = st.curve.jitter;
            let jitter = st.rng.random_range(1.0 - j..1.0 + j);
            st.curve.job_time(st.running).mul_f64(jitter)
        };
        tokio::time::sleep(took).await;
        let mut st = self.state.lock().unwrap();
        st.running -= 1;
        st.done += 1;
    }

    /// Jobs finished so far.
    pub fn done(&self) -> u64 {
        self.state.lock().unwrap().done
    }
}

/// Clients that run jobs on a pool one after another; only the first
/// `active` of them run.
#[derive(Debug)]
pub struct Load {
    active: watch::Sender<usize>,
    clients: Vec<JoinHandle<()>>,
}

impl Load {
    pub fn start(pool: &Pool<Fake>, machine: &Machine, clients: usize, active: usize) -> Self {
        let (tx, rx) = watch::channel(active);
        let clients = (0..clients)
            .map(|i| {
                let pool = pool.clone();
                let machine = machine.clone();
                let mut rx = rx.clone();
                tokio::spawn(async move {
                    loop {
                        if rx.wait_for(|&active| i < active).await.is_err() {
                            return;
                        }
                        let m = machine.clone();
                        if pool
                            .run(async move |_w: &mut Fake| m.job().await)
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                })
            })
            .collect();
        Self {
            active: tx,
            clients,
        }
    }

    /// Lets the first `n` clients run (the others stop after their job).
    pub fn set_active(&self, n: usize) {
        self.active.send_replace(n);
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for c in &self.clients {
            c.abort();
        }
    }
}

/// What a run showed: the sizing steps and the size once a second.
#[derive(Debug, Clone, Default)]
pub struct Record {
    inner: Arc<Mutex<RecordState>>,
}

#[derive(Debug, Default)]
struct RecordState {
    start: Option<Instant>,
    steps: Vec<(Duration, SizingStep)>,
    sizes: Vec<(Duration, usize, usize)>,
}

impl Record {
    /// Records `pool`'s steps and, once a second, its size and kept count.
    pub fn start(pool: &Pool<Fake>) -> (Self, JoinHandle<()>, JoinHandle<()>) {
        let record = Self::default();
        let start = Instant::now();
        record.inner.lock().unwrap().start = Some(start);
        let mut events = pool.events();
        let r = record.clone();
        let on_events = tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(Event::SizingStep(step)) => {
                        r.inner.lock().unwrap().steps.push((start.elapsed(), step));
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        let r = record.clone();
        let p = pool.clone();
        let sampler = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                let s = p.stats();
                r.inner
                    .lock()
                    .unwrap()
                    .sizes
                    .push((start.elapsed(), s.size, s.kept));
            }
        });
        (record, on_events, sampler)
    }

    /// Every step so far, with when it was taken (since the record began).
    pub fn steps(&self) -> Vec<(Duration, SizingStep)> {
        self.inner.lock().unwrap().steps.clone()
    }

    /// Steps taken from `from` on.
    pub fn steps_since(&self, from: Duration) -> Vec<SizingStep> {
        self.steps()
            .into_iter()
            .filter(|(at, _)| *at >= from)
            .map(|(_, s)| s)
            .collect()
    }

    /// The sizes sampled from `from` on.
    pub fn sizes_since(&self, from: Duration) -> Vec<usize> {
        self.inner
            .lock()
            .unwrap()
            .sizes
            .iter()
            .filter(|(at, _, _)| *at >= from)
            .map(|&(_, size, _)| size)
            .collect()
    }

    /// The most kept workers seen in one sample.
    pub fn most_kept(&self) -> usize {
        let st = self.inner.lock().unwrap();
        st.sizes.iter().map(|&(_, _, kept)| kept).max().unwrap_or(0)
    }

    /// The size the sizing settled at after its last step (`to`), if any.
    pub fn settled(&self) -> Option<usize> {
        self.steps().last().map(|(_, s)| s.to)
    }
}

/// Lets the paused clock run for `d` (tasks run meanwhile).
pub async fn run_for(d: Duration) {
    tokio::time::sleep(d).await;
}

pub fn mins(n: u64) -> Duration {
    Duration::from_secs(60 * n)
}
