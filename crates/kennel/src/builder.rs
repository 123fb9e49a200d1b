//! `PoolBuilder`: options and their validation.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;

use crate::dispatch::Dispatch;
use crate::engine::{Engine, FactoryFn, Parts};
use crate::error::BuildError;
use crate::eviction::{Eviction, NoEviction};
use crate::options::Options;
use crate::pool::Pool;
use crate::sizing::{Fixed, Sizing};
use crate::startup::{OnDemand, Startup};
use crate::worker::Worker;

/// Builds a [`Pool`]. Made by [`Pool::builder`].
///
/// Defaults: name `"pool"`, [`OnDemand`], `Fixed(cpus)`, [`NoEviction`],
/// the [`Options`] defaults (no job or warm-up timeout, `max_waiting` =
/// 8 × capacity, no `max_queue_wait`, a job grace of 30 s,
/// [`Dispatch::LowestSlot`]), no metrics.
#[must_use = "a builder does nothing until `build` is called"]
pub struct PoolBuilder<W> {
    factory: FactoryFn<W>,
    name: String,
    startup: Arc<dyn Startup>,
    sizing: Box<dyn Sizing>,
    eviction: Arc<dyn Eviction>,
    options: Options,
    event_capacity: usize,
    metrics: bool,
    seed: Option<u64>,
}

impl<W> fmt::Debug for PoolBuilder<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolBuilder")
            .field("name", &self.name)
            .field("startup", &self.startup)
            .field("sizing", &self.sizing)
            .field("eviction", &self.eviction)
            .finish_non_exhaustive()
    }
}

impl<W: Worker> PoolBuilder<W> {
    pub(crate) fn new(factory: FactoryFn<W>) -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self {
            factory,
            name: "pool".to_owned(),
            startup: Arc::new(OnDemand),
            sizing: Box::new(Fixed(cpus)),
            eviction: Arc::new(NoEviction),
            options: Options::default(),
            event_capacity: 1024,
            metrics: false,
            seed: None,
        }
    }

    /// The pool's name, for events, logs and metrics.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// When workers start.
    pub fn startup(mut self, startup: impl Startup) -> Self {
        self.startup = Arc::new(startup);
        self
    }

    /// How many workers run.
    pub fn sizing(mut self, sizing: impl Sizing) -> Self {
        self.sizing = Box::new(sizing);
        self
    }

    /// When idle workers close.
    pub fn eviction(mut self, eviction: impl Eviction) -> Self {
        self.eviction = Arc::new(eviction);
        self
    }

    /// The longest a job may hold its worker; past it the job fails with
    /// [`Error::Timeout`](crate::Error::Timeout) and the worker is killed,
    /// or asked to cancel if it can (see [`Options::job_timeout`]).
    ///
    /// [`Options::job_timeout`]: crate::Options::job_timeout
    pub fn job_timeout(mut self, d: Duration) -> Self {
        self.options.job_timeout = Some(d);
        self
    }

    /// The hard limit on a job: past it the worker is killed, cancel or not
    /// (see [`Options::job_kill_after`](crate::Options::job_kill_after)).
    pub fn job_kill_after(mut self, d: Duration) -> Self {
        self.options.job_kill_after = Some(d);
        self
    }

    /// How long a worker asked to cancel has to answer before it is killed
    /// (default 5 s; see [`Options::cancel_grace`](crate::Options::cancel_grace)).
    pub fn cancel_grace(mut self, d: Duration) -> Self {
        self.options.cancel_grace = d;
        self
    }

    /// Lets each progress item of a job move its `job_timeout` deadline (see
    /// [`Options::progress_extends_timeout`](crate::Options::progress_extends_timeout)).
    pub fn progress_extends_timeout(mut self, on: bool) -> Self {
        self.options.progress_extends_timeout = on;
        self
    }

    /// The longest a warm-up may take; past it the worker is killed and the
    /// job waiting for it fails with `WarmupFailed`.
    pub fn warmup_timeout(mut self, d: Duration) -> Self {
        self.options.warmup_timeout = Some(d);
        self
    }

    /// The most jobs queued for a worker (default 8 × capacity); one more is
    /// rejected at once with `QueueFull`. 0 means no queue.
    pub fn max_waiting(mut self, n: usize) -> Self {
        self.options.max_waiting = Some(n);
        self
    }

    /// Rejects at once, with `QueueWait`, a job whose projected wait is
    /// above `d`; rejects nothing until a first job has been timed.
    pub fn max_queue_wait(mut self, d: Duration) -> Self {
        self.options.max_queue_wait = Some(d);
        self
    }

    /// How long `close` lets lent jobs finish before it kills their workers.
    pub fn job_grace(mut self, d: Duration) -> Self {
        self.options.job_grace = d;
        self
    }

    /// Which idle worker a job takes.
    pub fn dispatch(mut self, dispatch: Dispatch) -> Self {
        self.options.dispatch = dispatch;
        self
    }

    /// How many events a subscriber may fall behind before it misses some
    /// (default 1024).
    pub fn event_capacity(mut self, n: usize) -> Self {
        self.event_capacity = n;
        self
    }

    /// Closes and replaces a worker older than `d` (pooler's and HikariCP's
    /// `max_lifetime`): an idle one at once, a lent one when it comes back;
    /// a job is never cut short.
    pub fn max_lifetime(mut self, d: Duration) -> Self {
        self.options.max_lifetime = Some(d);
        self
    }

    /// Spreads lifetimes so workers do not all end together: each worker's
    /// lifetime is moved by a random amount in `[-j, +j]`. Must be below
    /// `max_lifetime`.
    pub fn max_lifetime_jitter(mut self, j: Duration) -> Self {
        self.options.max_lifetime_jitter = j;
        self
    }

    /// When the idle workers drop to `n`, starts one more running slot ahead
    /// of demand (pooler's `auto_grow_threshold`).
    pub fn auto_grow_threshold(mut self, n: usize) -> Self {
        self.options.auto_grow_threshold = Some(n);
        self
    }

    /// The crash-loop breaker: after `n` failed starts in a row with no
    /// worker ready between them, jobs fail at once with `Unavailable`
    /// while trial starts find out when the workers come up again (default
    /// 5; `None`: never). See [`Options::break_after_failed_starts`].
    pub fn break_after_failed_starts(mut self, n: Option<u32>) -> Self {
        self.options.break_after_failed_starts = n;
        self
    }

    /// How many times [`Pool::run_idempotent`] runs a job again when its
    /// worker crashed under it (default 0). See [`Options::retry_on_crash`].
    pub fn retry_on_crash(mut self, n: u32) -> Self {
        self.options.retry_on_crash = n;
        self
    }

    /// Retires a worker after `n` jobs (see [`Options::max_jobs`]).
    pub fn max_jobs(mut self, n: u64) -> Self {
        self.options.max_jobs = Some(n);
        self
    }

    /// Spreads `max_jobs` by a random `[-j, +j]` per worker.
    pub fn max_jobs_jitter(mut self, j: u64) -> Self {
        self.options.max_jobs_jitter = j;
        self
    }

    /// Lets up to `n` replacements warm above the capacity while the
    /// workers they replace keep serving (see [`Options::max_surge`]).
    pub fn max_surge(mut self, n: usize) -> Self {
        self.options.max_surge = n;
        self
    }

    /// Replaces running workers that started at another size when the
    /// running size changes (see [`Options::replace_on_resize`]); off by
    /// default.
    pub fn replace_on_resize(mut self, on: bool) -> Self {
        self.options.replace_on_resize = on;
        self
    }

    /// Keeps at least `n` idle or starting workers (see
    /// [`Options::min_idle`]).
    pub fn min_idle(mut self, n: usize) -> Self {
        self.options.min_idle = Some(n);
        self
    }

    /// Says `job:slow` once for a job that holds its worker longer than `d`.
    pub fn slow_job(mut self, d: Duration) -> Self {
        self.options.slow_job = Some(d);
        self
    }

    /// Retires a worker whose memory passes `bytes` (see
    /// [`Options::max_memory`]).
    pub fn max_memory(mut self, bytes: u64) -> Self {
        self.options.max_memory = Some(bytes);
        self
    }

    /// How often workers' memory is sampled for `max_memory` (default 10 s).
    pub fn memory_check_every(mut self, d: Duration) -> Self {
        self.options.memory_check_every = d;
        self
    }

    /// Probes each worker idle for `every` with [`Worker::check`] (see
    /// [`Options::probe_every`]).
    pub fn probe_every(mut self, every: Duration) -> Self {
        self.options.probe_every = Some(every);
        self
    }

    /// The longest a probe may take (default 5 s).
    pub fn probe_timeout(mut self, d: Duration) -> Self {
        self.options.probe_timeout = d;
        self
    }

    /// Probes every worker before a job gets it (see
    /// [`Options::probe_on_lend`]).
    pub fn probe_on_lend(mut self, on: bool) -> Self {
        self.options.probe_on_lend = on;
        self
    }

    /// Every option at once (what the service reads from its config).
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// Records the pool's metrics through the `metrics` facade: jobs,
    /// rejections, retirements, the warm-up, job and wait-time histograms
    /// and the gauges of its counts (see `docs/METRICS.md`). Off by default:
    /// the pool then reads the clock only for what else needs it.
    pub fn metrics(mut self, on: bool) -> Self {
        self.metrics = on;
        self
    }

    /// Seeds the pool's random draws (lifetime jitter), for reproducible runs.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Builds the pool and starts what its startup starts.
    ///
    /// # Errors
    ///
    /// A [`BuildError`] naming the first option out of its range.
    ///
    /// # Panics
    ///
    /// When called outside a tokio runtime.
    pub fn build(mut self) -> Result<Pool<W>, BuildError> {
        if self.name.is_empty() {
            return Err(BuildError::new(
                "name",
                "empty (allowed: any non-empty name)",
            ));
        }
        self.options.validate()?;
        if self.event_capacity == 0 || self.event_capacity > 1 << 20 {
            return Err(BuildError::new(
                "event_capacity",
                format!(
                    "{} is out of range (allowed: 1 to 1048576)",
                    self.event_capacity
                ),
            ));
        }
        let plan = self.sizing.plan()?;
        let capacity = plan.capacity.max(1);
        let parts = Parts {
            name: self.name.into(),
            capacity,
            size: plan.size.clamp(1, capacity),
            sizing_jobs: plan.observes_jobs,
            opts: self.options,
            startup: self.startup,
            sizing: self.sizing,
            eviction: self.eviction,
            metrics: self.metrics,
            rng: match self.seed {
                Some(seed) => rand::rngs::StdRng::seed_from_u64(seed),
                None => rand::rngs::StdRng::from_os_rng(),
            },
        };
        let engine = Engine::start(parts, self.factory, self.event_capacity, plan.warning);
        Ok(Pool::from_engine(engine))
    }
}
