//! `PoolBuilder`: the parts of a pool, its options, and their validation.

use std::fmt;
use std::sync::Arc;

use rand::SeedableRng;

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
/// [`Dispatch::LowestSlot`](crate::Dispatch::LowestSlot)), no metrics.
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
    computer: Arc<dyn crate::Computer>,
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
            computer: Arc::new(crate::SystemComputer),
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

    /// How many events a subscriber may fall behind before it misses some
    /// (default 1024).
    pub fn event_capacity(mut self, n: usize) -> Self {
        self.event_capacity = n;
        self
    }

    /// Every option at once (what the service reads from its config).
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// Changes the options by `f`, which gets the builder's own (the
    /// defaults, or what an earlier call set): one place for every limit
    /// and timeout of the pool, each documented on its field of
    /// [`Options`] and checked by [`build`](Self::build).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), kennel::BuildError> {
    /// use std::time::Duration;
    /// use kennel::{Pool, Worker};
    ///
    /// struct Model;
    /// impl Worker for Model {}
    ///
    /// let pool = Pool::builder(|_slot| async { Ok::<_, kennel::BoxError>(Model) })
    ///     .with_options(|o| {
    ///         o.job_timeout = Some(Duration::from_secs(30));
    ///         o.max_waiting = Some(100);
    ///     })
    ///     .build()?;
    /// # Ok(()) }
    /// ```
    pub fn with_options(mut self, f: impl FnOnce(&mut Options)) -> Self {
        f(&mut self.options);
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

    /// The computer whose GPUs `gpus_per_worker` places workers on (default
    /// [`SystemComputer`](crate::SystemComputer): the machine's, through
    /// NVIDIA's driver). A sizing reads its own computer.
    pub fn computer(mut self, computer: impl crate::Computer) -> Self {
        self.computer = Arc::new(computer);
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
        // The GPUs bound the capacity as the CPUs and memory do.
        let gpus = crate::gpu::placer::GpuPlacer::new(self.computer, &self.options)?;
        let capacity = plan
            .capacity
            .max(1)
            .min(gpus.as_ref().map_or(usize::MAX, |g| g.1));
        let parts = Parts {
            gpus: gpus.map(|g| g.0),
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
