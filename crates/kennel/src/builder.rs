//! `PoolBuilder`: options and their validation.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

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

fn check_limit(option: &'static str, d: Duration) -> Result<(), BuildError> {
    if d.is_zero() || d > MAX_LIMIT {
        return Err(BuildError::new(
            option,
            format!("{d:?} is out of range (allowed: above 0 and at most 2147483647 ms)"),
        ));
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
        if self.close_grace > MAX_LIMIT {
            return Err(BuildError::new(
                "close_grace",
                format!(
                    "{:?} is out of range (allowed: at most 2147483647 ms)",
                    self.close_grace
                ),
            ));
        }
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
        let size = plan.size.clamp(1, capacity);
        let opts = Options {
            job_timeout: self.job_timeout,
            warmup_timeout: self.warmup_timeout,
            max_waiting: self.max_waiting.unwrap_or(capacity.saturating_mul(8)),
            max_queue_wait: self.max_queue_wait,
            close_grace: self.close_grace,
            dispatch: self.dispatch,
        };
        let shared = Shared::new(
            self.name.into(),
            self.factory,
            capacity,
            size,
            opts,
            self.startup,
            self.sizing,
            self.eviction,
            self.event_capacity,
        );
        shared.begin(plan.warning);
        Ok(Pool::from_shared(shared))
    }
}
