//! `Pool`: lend workers to jobs, and close.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;

use crate::builder::PoolBuilder;
use crate::dispatch::{self, Ask};
use crate::engine::{Engine, State};
use crate::error::{Error, RejectReason};
use crate::event::Event;
use crate::lease::{InFlight, Lease};
use crate::options::Options;
use crate::run::{RunOptions, run_seen};
use crate::stats::Stats;
use crate::worker::{BoxError, SlotInfo, Worker};

/// A pool of workers of type `W`. Cheap to clone: clones share the pool.
///
/// Dropping the last clone without [`close`](Pool::close) kills every worker
/// at once; leases still out keep working until they are dropped.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use kennel::{Fixed, Parallel, Pool, Worker};
///
/// struct Adder;
/// impl Worker for Adder {}
///
/// let pool = Pool::builder(|_slot| async { Ok::<_, kennel::BoxError>(Adder) })
/// .startup(Parallel)
/// .sizing(Fixed(2))
/// .build()?;
///
/// let sum = pool.run(async |_adder: &mut Adder| 2 + 2).await?;
/// assert_eq!(sum, 4);
/// pool.close().await;
/// # Ok(()) }
/// ```
pub struct Pool<W: Worker> {
    handle: Arc<Handle<W>>,
}

struct Handle<W: Worker>(Arc<Engine<W>>);

impl<W: Worker> Drop for Handle<W> {
    fn drop(&mut self) {
        // The last handle is gone without a close: every worker ends now.
        self.0.act(State::kill_all);
    }
}

impl<W: Worker> Clone for Pool<W> {
    fn clone(&self) -> Self {
        Self {
            handle: self.handle.clone(),
        }
    }
}

impl<W: Worker> fmt::Debug for Pool<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.name())
            .field("stats", &self.stats())
            .finish()
    }
}

impl<W: Worker> Pool<W> {
    /// Starts building a pool whose workers `factory` makes, one per call,
    /// for the slot named in [`SlotInfo`].
    pub fn builder<F, Fut, E>(factory: F) -> PoolBuilder<W>
    where
        F: Fn(SlotInfo) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<W, E>> + Send + 'static,
        E: Into<BoxError>,
    {
        PoolBuilder::new(Arc::new(move |info| {
            let fut = factory(info);
            Box::pin(async move { fut.await.map_err(Into::into) })
        }))
    }

    pub(crate) fn from_engine(engine: Arc<Engine<W>>) -> Self {
        Self {
            handle: Arc::new(Handle(engine)),
        }
    }

    pub(crate) fn engine(&self) -> &Arc<Engine<W>> {
        &self.handle.0
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.engine().name
    }

    /// One consistent snapshot of the pool's counts.
    pub fn stats(&self) -> Stats {
        self.engine().lock().stats()
    }

    /// The tenants with jobs waiting or holding workers now, and how many.
    pub fn tenants(&self) -> Vec<crate::TenantLoad> {
        self.engine().lock().waiters.shares.busy()
    }

    /// Whether the pool still warms its first worker: it starts workers by
    /// itself (an eager startup, or `min_idle` above 0) and none of them
    /// has been ready yet. False for a pool that starts workers only for
    /// jobs, and for good once a first worker was ready.
    pub fn is_warming(&self) -> bool {
        self.engine().lock().is_warming()
    }

    /// How long a job that joined the queue now would wait for a worker, as
    /// `max_queue_wait` projects it: (jobs waiting + 1) / running slots ×
    /// the mean time of the jobs seen so far. `None` while no job time is
    /// known: before the first job comes back, or when the pool does not
    /// time jobs (no metrics recorder, `max_queue_wait` or learning sizing).
    /// A service can send it as `Retry-After`.
    pub fn projected_wait(&self) -> Option<Duration> {
        self.engine().lock().projected_wait()
    }

    /// How long a job of `tenant` that joined the queue now would wait:
    /// its jobs waiting + 1, over its part of the workers (its weight among
    /// the tenants with jobs here, at most its `max_running`), × the mean
    /// job time (1 s before one is known). What a refused tenant is told
    /// to wait.
    pub fn tenant_wait(&self, tenant: &crate::Tenant) -> Duration {
        let st = self.engine().lock();
        let mean = st.ewma.unwrap_or(1.0);
        let wait = (st.waiters.shares).projected(Some(tenant), mean, st.slots.capacity());
        Duration::try_from_secs_f64(wait).unwrap_or(Duration::MAX)
    }

    /// A stream of the pool's events. A subscriber that falls behind misses
    /// the oldest events (it gets `RecvError::Lagged`); it never slows the pool.
    ///
    /// The first call gets every event since the pool was built (the first
    /// workers starting, a capacity warning); later calls get the events
    /// from then on.
    pub fn events(&self) -> broadcast::Receiver<Event> {
        self.engine().subscribe()
    }

    /// Lends a worker: an idle one, a starting one, a new one, or the next
    /// one freed, in that order.
    ///
    /// # Errors
    ///
    /// [`Error::Rejected`] when the queue is full or the projected wait too
    /// long, [`Error::WarmupFailed`] when the worker started for this job
    /// failed its warm-up, [`Error::Closed`] when the pool is closed.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe. Dropping the future while it waits removes
    /// the job from the queue; a worker that was handed to it meanwhile goes
    /// back to the pool, and a warm-up it caused goes on for the next job.
    pub async fn lend(&self) -> Result<Lease<W>, Error> {
        self.lend_for(Ask::default()).await
    }

    /// As [`lend`](Pool::lend), for a job of `key`: a worker that holds the
    /// key, or one that loads it first (the pool's `key_binding`; the
    /// keyed lending order is in the pool's docs).
    ///
    /// # Errors
    ///
    /// As [`lend`](Pool::lend), and [`Error::LoadFailed`] when the worker
    /// could not load the key.
    ///
    /// # Cancel safety
    ///
    /// As [`lend`](Pool::lend); dropped while the worker loads the key, the
    /// worker is retired, since what it holds is unknown.
    pub async fn lend_keyed(&self, key: crate::Key) -> Result<Lease<W>, Error> {
        self.lend_with(&RunOptions::new().key(key)).await
    }

    async fn lend_for(&self, ask: Ask) -> Result<Lease<W>, Error> {
        // A job that may queue is never refused for having to.
        let reason = RejectReason::QueueFull;
        dispatch::lend(self.engine(), true, ask)
            .await?
            .ok_or(Error::Rejected { reason })
    }

    /// As [`lend`](Pool::lend), waiting at most `wait` for a worker.
    ///
    /// # Errors
    ///
    /// As [`lend`](Pool::lend), and [`Error::LendTimeout`] when no worker was
    /// lent within `wait`.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe, as [`lend`](Pool::lend).
    pub async fn lend_timeout(&self, wait: Duration) -> Result<Lease<W>, Error> {
        // The timer is looked at only after the lend was polled, so a worker
        // that is free at once is lent whatever the limit.
        let lent = tokio::time::timeout(wait, self.lend()).await;
        lent.unwrap_or(Err(Error::LendTimeout { after: wait }))
    }

    /// Lends a worker only if one can be had without queueing behind other
    /// jobs: an idle one, a starting one nobody awaits, or a new one in an
    /// empty slot (whose warm-up it then waits for). `Ok(None)` otherwise.
    ///
    /// # Errors
    ///
    /// [`Error::WarmupFailed`] when the worker started for it failed its
    /// warm-up; [`Error::Closed`] when the pool is closed.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe, as [`lend`](Pool::lend).
    pub async fn try_lend(&self) -> Result<Option<Lease<W>>, Error> {
        dispatch::lend(self.engine(), false, Ask::default()).await
    }

    /// As [`try_lend`](Pool::try_lend), with `options`' key, tenant and
    /// priority (a lend timeout does not apply: nothing waits). A tenant at
    /// its `max_running` gets `Ok(None)`.
    ///
    /// # Errors
    ///
    /// As [`try_lend`](Pool::try_lend), and [`Error::LoadFailed`] when the
    /// worker could not load the key.
    ///
    /// # Cancel safety
    ///
    /// As [`lend_keyed`](Pool::lend_keyed).
    pub async fn try_lend_with(&self, options: &RunOptions) -> Result<Option<Lease<W>>, Error> {
        dispatch::lend(self.engine(), false, options.ask()).await
    }

    /// Lends a worker to `job` and returns what the job returns.
    ///
    /// The pool's `job_timeout` applies. When the worker ends while the job
    /// holds it, the job is dropped and the call fails with
    /// [`Error::Crashed`].
    ///
    /// # Errors
    ///
    /// As [`lend`](Pool::lend); and [`Error::Timeout`] when the job ran past
    /// its time limit (its worker is killed and replaced),
    /// [`Error::Crashed`] when the worker ended during the job,
    /// [`Error::Closed`] when the pool closed and killed the worker after its
    /// grace period.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future while it waits for a worker is cancel safe, as
    /// [`lend`](Pool::lend). Dropping it while the job runs kills the worker,
    /// since its state is unknown; the pool replaces it.
    pub async fn run<R>(&self, job: impl AsyncFnOnce(&mut W) -> R) -> Result<R, Error> {
        self.run_with(RunOptions::new(), job).await
    }

    /// As [`run`](Pool::run), waiting at most `wait` for a worker.
    ///
    /// # Errors
    ///
    /// As [`run`](Pool::run), and [`Error::LendTimeout`].
    ///
    /// # Cancel safety
    ///
    /// As [`run`](Pool::run).
    pub async fn run_timeout<R>(
        &self,
        wait: Duration,
        job: impl AsyncFnOnce(&mut W) -> R,
    ) -> Result<R, Error> {
        self.run_with(RunOptions::new().lend_timeout(wait), job)
            .await
    }

    /// As [`run`](Pool::run), with per-call limits.
    ///
    /// # Errors
    ///
    /// As [`run`](Pool::run), and [`Error::LendTimeout`] when a lend timeout
    /// was given and ended.
    ///
    /// # Cancel safety
    ///
    /// As [`run`](Pool::run).
    pub async fn run_with<R>(
        &self,
        options: RunOptions,
        job: impl AsyncFnOnce(&mut W) -> R,
    ) -> Result<R, Error> {
        let lease = self.lend_with(&options).await?;
        run_seen(lease, options.job_timeout, job).await.0
    }

    /// As [`lend`](Pool::lend), with `options`' key, tenant, priority and
    /// lend timeout (its job timeout is for [`run_with`](Pool::run_with)).
    ///
    /// # Errors
    ///
    /// As [`lend_keyed`](Pool::lend_keyed) with a key, and
    /// [`Error::LendTimeout`] with a lend timeout, [`Error::TenantLimit`]
    /// when the tenant already has its `max_queued` jobs waiting.
    ///
    /// # Cancel safety
    ///
    /// As [`lend_keyed`](Pool::lend_keyed).
    pub async fn lend_with(&self, options: &RunOptions) -> Result<Lease<W>, Error> {
        let lend = self.lend_for(options.ask());
        match options.lend_timeout {
            None => lend.await,
            // The timer is looked at only after the lend was polled, as
            // `lend_timeout` does.
            Some(wait) => tokio::time::timeout(wait, lend)
                .await
                .unwrap_or(Err(Error::LendTimeout { after: wait })),
        }
    }

    /// Closes the pool: refuses new jobs with [`Error::Closed`],
    /// fails waiting jobs with `Closed`, closes idle and kept workers, lets
    /// lent jobs finish up to the job grace (`job_grace`) and then kills their workers,
    /// and resolves when every worker has ended.
    ///
    /// # Errors
    ///
    /// None: closing always completes. Jobs still waiting get
    /// [`Error::Closed`]; a job whose worker is killed after the grace gets
    /// `Closed` too.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops only the waiting: the pool stays closed and
    /// its workers keep closing.
    pub async fn close(&self) {
        self.begin_close();
        self.engine().wait_ended().await;
    }

    /// Runs `f` on every idle worker, each lent exclusively in turn, and
    /// returns each result with the worker's slot. Kept workers are idle too and are included;
    /// a worker that a job took meanwhile is skipped.
    ///
    /// # Errors
    ///
    /// None: a worker that cannot be lent (a job took it, the pool closed)
    /// is skipped, so the result may be shorter than the idle count.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future while `f` runs kills that worker, as dropping
    /// [`run`](Pool::run) does; workers not reached yet stay untouched.
    pub async fn for_each_idle<R>(&self, mut f: impl AsyncFnMut(&mut W) -> R) -> Vec<(usize, R)> {
        let mut out = Vec::new();
        let idle = self.engine().lock().idle_slots();
        for slot in idle {
            let Some(granted) = self.engine().act(|st, _| st.take_slot(slot)) else {
                continue;
            };
            let lease = Lease::new(self.engine().clone(), granted, None).not_a_job();
            let mut job = InFlight::new(lease);
            let r = f(&mut job).await;
            drop(job.disarm());
            out.push((slot, r));
        }
        out
    }

    /// Changes a live pool: sizing, eviction, limits, timeouts.
    /// Workers are started or ended as needed and timers set again; the
    /// result says what was done.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] naming the option when a value is out of range (or
    /// when a group is given: groups belong to a [`Registry`](crate::Registry));
    /// [`Error::Closed`] when the pool is closed. Nothing changes on error.
    pub fn reconfigure(&self, change: crate::Reconfig) -> Result<Vec<crate::Action>, Error> {
        if change.group.is_some() {
            return Err(Error::Config(crate::BuildError::new(
                "group",
                "a pool alone has no group (allowed: change it through the Registry that holds the pool)",
            )));
        }
        self.engine().act(|st, fx| st.reconfigure(fx, change))
    }

    /// Starts closing without waiting (the first half of [`close`](Pool::close)).
    pub(crate) fn begin_close(&self) {
        self.engine().act(State::begin_close);
    }

    /// One row per slot: what it holds, and its worker's pid, age, warm-up
    /// time, jobs served and scheduled retirement. One consistent snapshot, as [`stats`](Pool::stats).
    pub fn workers(&self) -> Vec<crate::WorkerRow> {
        self.engine().lock().workers()
    }

    /// The options the pool enforces now.
    pub fn options(&self) -> Options {
        self.engine().lock().opts.clone()
    }

    /// Whether [`close`](Pool::close) was called.
    pub fn is_closed(&self) -> bool {
        self.engine().lock().closed
    }
}
