//! `PoolBuilder`: options and their validation.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;

use crate::dispatch::Dispatch;
use crate::error::BuildError;
use crate::eviction::{Eviction, NoEviction};
use crate::pool::Pool;
use crate::shared::{FactoryFn, Options, Shared};
use crate::sizing::{Fixed, Sizing};
use crate::startup::{OnDemand, Startup};
use crate::worker::Worker;

/// The longest time limit the builder takes (about 24.8 days), as for
/// evictions, so a limit read from a config cannot overflow a timer.
const MAX_LIMIT: Duration = Duration::from_millis(2_147_483_647);

/// Builds a [`Pool`]. Made by [`Pool::builder`].
///
/// Defaults: name `"pool"`, [`OnDemand`], `Fixed(cpus)`, [`NoEviction`], no
/// job or warm-up timeout, `max_waiting` = 8 × capacity, no `max_queue_wait`,
/// a close grace of 30 s, [`Dispatch::LowestSlot`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct PoolBuilder<W> {
    factory: FactoryFn<W>,
    name: String,
    startup: Arc<dyn Startup>,
    sizing: Box<dyn Sizing>,
    eviction: Arc<dyn Eviction>,
    job_timeout: Option<Duration>,
    warmup_timeout: Option<Duration>,
    max_waiting: Option<usize>,
    max_queue_wait: Option<Duration>,
    close_grace: Duration,
    dispatch: Dispatch,
    event_capacity: usize,
    max_lifetime: Option<Duration>,
    max_lifetime_jitter: Duration,
    auto_grow_threshold: Option<usize>,
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

pub(crate) fn check_limit(option: &'static str, d: Duration) -> Result<(), BuildError> {
    if d.is_zero() || d > MAX_LIMIT {
        return Err(BuildError::new(
            option,
            format!("{d:?} is out of range (allowed: above 0 and at most 2147483647 ms)"),
        ));
    }
    Ok(())
}

/// The close grace in range.
pub(crate) fn check_grace(d: Duration) -> Result<(), BuildError> {
    if d > MAX_LIMIT {
        return Err(BuildError::new(
            "close_grace",
            format!("{d:?} is out of range (allowed: at most 2147483647 ms)"),
        ));
    }
    Ok(())
}

/// `max_lifetime` in range, and its jitter below it.
pub(crate) fn check_lifetime(life: Option<Duration>, jitter: Duration) -> Result<(), BuildError> {
    match life {
        Some(life) => {
            check_limit("max_lifetime", life)?;
            if jitter >= life {
                return Err(BuildError::new(
                    "max_lifetime_jitter",
                    format!(
                        "{jitter:?} is not below max_lifetime {life:?} (allowed: 0 up to below max_lifetime)"
                    ),
                ));
            }
        }
        None if !jitter.is_zero() => {
            return Err(BuildError::new(
                "max_lifetime_jitter",
                format!("{jitter:?} without max_lifetime (allowed: 0 when no max_lifetime is set)"),
            ));
        }
        None => {}
    }
    Ok(())
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
            job_timeout: None,
            warmup_timeout: None,
            max_waiting: None,
            max_queue_wait: None,
            close_grace: Duration::from_secs(30),
            dispatch: Dispatch::LowestSlot,
            event_capacity: 1024,
            max_lifetime: None,
            max_lifetime_jitter: Duration::ZERO,
            auto_grow_threshold: None,
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
    /// [`Error::Timeout`](crate::Error::Timeout) and the worker is killed.
    pub fn job_timeout(mut self, d: Duration) -> Self {
        self.job_timeout = Some(d);
        self
    }

    /// The longest a warm-up may take; past it the worker is killed and the
    /// job waiting for it fails with `WarmupFailed`.
    pub fn warmup_timeout(mut self, d: Duration) -> Self {
        self.warmup_timeout = Some(d);
        self
    }

    /// The most jobs queued for a worker (default 8 × capacity); one more is
    /// rejected at once with `QueueFull`. 0 means no queue.
    pub fn max_waiting(mut self, n: usize) -> Self {
        self.max_waiting = Some(n);
        self
    }

    /// Rejects at once, with `QueueWait`, a job whose projected wait is
    /// above `d`.
    pub fn max_queue_wait(mut self, d: Duration) -> Self {
        self.max_queue_wait = Some(d);
        self
    }

    /// How long `close` lets lent jobs finish before it kills their workers.
    pub fn close_grace(mut self, d: Duration) -> Self {
        self.close_grace = d;
        self
    }

    /// Which idle worker a job takes.
    pub fn dispatch(mut self, dispatch: Dispatch) -> Self {
        self.dispatch = dispatch;
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
        self.max_lifetime = Some(d);
        self
    }

    /// Spreads lifetimes so workers do not all end together: each worker's
    /// lifetime is moved by a random amount in `[-j, +j]`. Must be below
    /// `max_lifetime`.
    pub fn max_lifetime_jitter(mut self, j: Duration) -> Self {
        self.max_lifetime_jitter = j;
        self
    }

    /// When the idle workers drop to `n`, starts one more running slot ahead
    /// of demand (pooler's `auto_grow_threshold`).
    pub fn auto_grow_threshold(mut self, n: usize) -> Self {
        self.auto_grow_threshold = Some(n);
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
        if let Some(d) = self.job_timeout {
            check_limit("job_timeout", d)?;
        }
        if let Some(d) = self.warmup_timeout {
            check_limit("warmup_timeout", d)?;
        }
        if let Some(d) = self.max_queue_wait {
            check_limit("max_queue_wait", d)?;
        }
        check_grace(self.close_grace)?;
        if self.event_capacity == 0 || self.event_capacity > 1 << 20 {
            return Err(BuildError::new(
                "event_capacity",
                format!(
                    "{} is out of range (allowed: 1 to 1048576)",
                    self.event_capacity
                ),
            ));
        }
        check_lifetime(self.max_lifetime, self.max_lifetime_jitter)?;
        let plan = self.sizing.plan()?;
        let capacity = plan.capacity.max(1);
        let size = plan.size.clamp(1, capacity);
        let opts = Options {
            job_timeout: self.job_timeout,
            warmup_timeout: self.warmup_timeout,
            max_waiting: self.max_waiting.unwrap_or(capacity.saturating_mul(8)),
            max_queue_wait: self.max_queue_wait,
            close_grace: self.close_grace,
            dispatch: self.dispatch,
            max_lifetime: self.max_lifetime,
            max_lifetime_jitter: self.max_lifetime_jitter,
            auto_grow_threshold: self.auto_grow_threshold,
        };
        let shared = Shared::new(
            self.name.into(),
            self.factory,
            capacity,
            size,
            plan.observes_jobs,
            opts,
            self.startup,
            self.sizing,
            self.eviction,
            self.event_capacity,
            match self.seed {
                Some(seed) => rand::rngs::StdRng::seed_from_u64(seed),
                None => rand::rngs::StdRng::from_os_rng(),
            },
        );
        shared.begin(plan.warning);
        Ok(Pool::from_shared(shared))
    }
}
