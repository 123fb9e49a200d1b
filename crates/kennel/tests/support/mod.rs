//! An in-process fake worker whose warm-up, job time, exit and failure a
//! test controls, and helpers shared by the behaviour tests.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kennel::{
    BoxError, Error, Event, ExitSignal, ExitStatus, Exited, Fixed, Killer, Lease, Meter, OnDemand,
    Parallel, Pool, PoolBuilder, RetireReason, SlotInfo, Startup, Worker,
};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How one fake worker warms up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Warmup {
    /// Ready after this long.
    Takes(Duration),
    /// `ready()` fails after this long.
    Fails(Duration),
    /// `ready()` never resolves.
    Hangs,
}

/// How one fake worker answers its probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Health {
    /// Passes at once.
    #[default]
    Good,
    /// Passes after this long.
    Slow(Duration),
    /// Fails at once.
    Bad,
    /// Never answers.
    Hangs,
}

/// What a fake worker's probes see and say.
#[derive(Debug, Default)]
struct Probes {
    health: Health,
    count: usize,
}

#[derive(Debug)]
struct Made {
    id: usize,
    slot: usize,
    /// The pool's running size it was started at.
    size: usize,
    signal: ExitSignal,
    started: Instant,
    memory: Arc<AtomicU64>,
    probes: Arc<Mutex<Probes>>,
}

#[derive(Debug, Default)]
struct FarmState {
    made: Vec<Made>,
    warmup: Option<Duration>,
    plan: VecDeque<Warmup>,
    factory_fails: usize,
}

/// Makes fake workers and lets the test reach each of them.
#[derive(Debug, Clone, Default)]
pub struct Farm {
    state: Arc<Mutex<FarmState>>,
}

impl Farm {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every worker warms up in `d` (default: ready at once).
    pub fn with_warmup(d: Duration) -> Self {
        let farm = Self::new();
        farm.state.lock().unwrap().warmup = Some(d);
        farm
    }

    /// The next workers warm up as planned, in order; then as by default.
    pub fn plan(&self, warmups: impl IntoIterator<Item = Warmup>) {
        self.state.lock().unwrap().plan.extend(warmups);
    }

    /// The next `n` factory calls fail.
    pub fn fail_factory(&self, n: usize) {
        self.state.lock().unwrap().factory_fails += n;
    }

    /// A factory for `Pool::builder`.
    pub fn factory(
        &self,
    ) -> impl Fn(SlotInfo) -> std::future::Ready<Result<Fake, BoxError>> + Send + Sync + 'static
    {
        let farm = self.clone();
        move |info: SlotInfo| std::future::ready(farm.make(&info))
    }

    fn make(&self, info: &SlotInfo) -> Result<Fake, BoxError> {
        let slot = info.slot;
        let mut st = self.state.lock().unwrap();
        if st.factory_fails > 0 {
            st.factory_fails -= 1;
            return Err("factory refused".into());
        }
        let warmup = st
            .plan
            .pop_front()
            .unwrap_or(Warmup::Takes(st.warmup.unwrap_or(Duration::ZERO)));
        let (signal, exited) = ExitSignal::new();
        let id = st.made.len();
        let memory = Arc::new(AtomicU64::new(0));
        let probes = Arc::new(Mutex::new(Probes::default()));
        st.made.push(Made {
            id,
            slot,
            size: info.size,
            signal: signal.clone(),
            started: Instant::now(),
            memory: memory.clone(),
            probes: probes.clone(),
        });
        Ok(Fake {
            id,
            slot,
            jobs: 0,
            warmup,
            signal,
            exited: Some(exited),
            memory,
            probes,
        })
    }

    /// Slots of the workers made so far, in the order they were made.
    pub fn started_slots(&self) -> Vec<usize> {
        self.state
            .lock()
            .unwrap()
            .made
            .iter()
            .map(|m| m.slot)
            .collect()
    }

    /// The running size of the pool as each worker was made, in the order
    /// they were made.
    pub fn started_sizes(&self) -> Vec<usize> {
        self.state
            .lock()
            .unwrap()
            .made
            .iter()
            .map(|m| m.size)
            .collect()
    }

    /// How many workers were made.
    pub fn made(&self) -> usize {
        self.state.lock().unwrap().made.len()
    }

    /// How many workers have not exited.
    pub fn alive(&self) -> usize {
        self.state
            .lock()
            .unwrap()
            .made
            .iter()
            .filter(|m| !m.signal.has_exited())
            .count()
    }

    /// Whether worker `id` has exited (killed, closed or on its own).
    pub fn has_exited(&self, id: usize) -> bool {
        self.state.lock().unwrap().made[id].signal.has_exited()
    }

    /// Makes worker `id` exit on its own.
    pub fn exit(&self, id: usize) {
        self.state.lock().unwrap().made[id]
            .signal
            .exit(ExitStatus::Code(1));
    }

    /// The id of the newest live worker in `slot`.
    pub fn in_slot(&self, slot: usize) -> Option<usize> {
        self.state
            .lock()
            .unwrap()
            .made
            .iter()
            .rev()
            .find(|m| m.slot == slot && !m.signal.has_exited())
            .map(|m| m.id)
    }

    /// Sets the memory worker `id`'s meter reads, in bytes.
    pub fn set_memory(&self, id: usize, bytes: u64) {
        self.state.lock().unwrap().made[id]
            .memory
            .store(bytes, Ordering::SeqCst);
    }

    /// How worker `id` answers its probes from now.
    pub fn set_health(&self, id: usize, health: Health) {
        self.state.lock().unwrap().made[id]
            .probes
            .lock()
            .unwrap()
            .health = health;
    }

    /// How many probes worker `id` has been asked.
    pub fn probes(&self, id: usize) -> usize {
        self.state.lock().unwrap().made[id]
            .probes
            .lock()
            .unwrap()
            .count
    }

    /// When worker `id` was made.
    pub fn started_at(&self, id: usize) -> Instant {
        self.state.lock().unwrap().made[id].started
    }
}

/// A fake worker.
#[derive(Debug)]
pub struct Fake {
    pub id: usize,
    pub slot: usize,
    pub jobs: u64,
    warmup: Warmup,
    signal: ExitSignal,
    exited: Option<Exited>,
    memory: Arc<AtomicU64>,
    probes: Arc<Mutex<Probes>>,
}

impl Fake {
    /// A job that takes `d` and returns this worker's id.
    pub async fn work(&mut self, d: Duration) -> usize {
        tokio::time::sleep(d).await;
        self.jobs += 1;
        self.id
    }

    /// Exits on its own (as if it crashed).
    pub fn crash(&self) {
        self.signal.exit(ExitStatus::Code(101));
    }
}

impl Worker for Fake {
    async fn ready(&mut self) -> Result<(), BoxError> {
        match self.warmup {
            Warmup::Takes(d) => {
                tokio::time::sleep(d).await;
                Ok(())
            }
            Warmup::Fails(d) => {
                tokio::time::sleep(d).await;
                Err("model file is corrupt".into())
            }
            Warmup::Hangs => std::future::pending().await,
        }
    }

    fn exited(&mut self) -> Exited {
        self.exited.take().unwrap_or_else(Exited::never)
    }

    fn killer(&self) -> Killer {
        self.signal.killer()
    }

    fn is_alive(&self) -> bool {
        !self.signal.has_exited()
    }

    fn about(&self) -> Option<String> {
        Some(format!("{{\"fake\":{}}}", self.id))
    }

    async fn check(&mut self) -> Result<(), BoxError> {
        let health = {
            let mut p = self.probes.lock().unwrap();
            p.count += 1;
            p.health
        };
        match health {
            Health::Good => Ok(()),
            Health::Slow(d) => {
                tokio::time::sleep(d).await;
                Ok(())
            }
            Health::Bad => Err("the model answers garbage".into()),
            Health::Hangs => std::future::pending().await,
        }
    }

    fn meter(&self) -> Option<Meter> {
        let memory = self.memory.clone();
        Some(Meter::new(move || Some(memory.load(Ordering::SeqCst))))
    }

    async fn close(self) {
        self.signal.exit(ExitStatus::Closed);
    }
}

/// Lets every ready task run, without moving the clock.
pub async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

/// Moves the paused clock by `d`, letting tasks run before and after.
pub async fn advance(d: Duration) {
    settle().await;
    tokio::time::advance(d).await;
    settle().await;
}

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Drains the events received so far.
pub fn drain(rx: &mut broadcast::Receiver<Event>) -> Vec<Event> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}

/// The names of the events received so far.
pub fn names(rx: &mut broadcast::Receiver<Event>) -> Vec<&'static str> {
    drain(rx).iter().map(Event::name).collect()
}

/// A sizing a test steers by hand: it runs `size` of `capacity` slots, moves
/// to the size set with [`Steer::set_size`] at its next wake-up (every
/// [`Steer::TICK`]), and lets new workers start only while allowed.
///
/// Clones share the settings: keep one, hand the other to the builder.
#[derive(Debug, Clone)]
pub struct Steer {
    capacity: usize,
    size: usize,
    target: Arc<std::sync::atomic::AtomicUsize>,
    refuse: Arc<std::sync::atomic::AtomicBool>,
    /// `(size, all_ready)` of the view at each finished job.
    jobs_seen: Arc<Mutex<Vec<(usize, bool)>>>,
}

impl Steer {
    /// How often the pool wakes the sizing.
    pub const TICK: Duration = Duration::from_millis(100);

    pub fn new(capacity: usize, size: usize) -> Self {
        Self {
            capacity,
            size,
            target: Arc::new(std::sync::atomic::AtomicUsize::new(size)),
            refuse: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            jobs_seen: Arc::default(),
        }
    }

    /// The running size and whether every running worker was ready (and
    /// counted, for a learning sizing), as the pool showed them at each
    /// finished job so far.
    pub fn jobs_seen(&self) -> Vec<(usize, bool)> {
        self.jobs_seen.lock().unwrap().clone()
    }

    /// The size the pool moves to at the next wake-up.
    pub fn set_size(&self, n: usize) {
        self.target.store(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the sizing refuses every new worker (as when memory is short).
    pub fn refuse_starts(&self, refuse: bool) {
        self.refuse
            .store(refuse, std::sync::atomic::Ordering::Relaxed);
    }
}

impl kennel::Sizing for Steer {
    fn plan(&mut self) -> Result<kennel::SizePlan, kennel::BuildError> {
        Ok(kennel::SizePlan::new(self.capacity, self.size))
    }

    fn observe(
        &mut self,
        view: &kennel::SizingView,
        input: kennel::SizingInput,
    ) -> kennel::SizingDecision {
        if let kennel::SizingInput::JobDone { .. } = input {
            let seen = (view.size, view.all_ready);
            self.jobs_seen.lock().unwrap().push(seen);
        }
        let mut decision = kennel::SizingDecision::default();
        let target = self.target.load(std::sync::atomic::Ordering::Relaxed);
        if target != view.size {
            decision.size = Some(target);
        }
        decision.wake_at = Some(view.now + Self::TICK);
        decision
    }

    fn may_start(&mut self, _view: &kennel::SizingView) -> bool {
        !self.refuse.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// How the pool first ended a [`Watched`] worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Its `close()` was called.
    Closed,
    /// Its kill switch was used.
    Killed,
}

/// How each [`Watched`] worker was ended, by worker id; the first way counts.
#[derive(Debug, Clone, Default)]
pub struct Endings(Arc<Mutex<Vec<(usize, Ending)>>>);

impl Endings {
    fn note(&self, id: usize, how: Ending) {
        let mut v = self.0.lock().unwrap();
        if !v.iter().any(|(i, _)| *i == id) {
            v.push((id, how));
        }
    }

    /// How worker `id` was ended, if it was.
    pub fn of(&self, id: usize) -> Option<Ending> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, how)| *how)
    }
}

/// A [`Fake`] that notes whether the pool closed it or killed it, and whose
/// `close()` takes a set time.
#[derive(Debug)]
pub struct Watched {
    pub fake: Fake,
    endings: Endings,
    close_takes: Duration,
}

impl std::ops::Deref for Watched {
    type Target = Fake;
    fn deref(&self) -> &Fake {
        &self.fake
    }
}

impl std::ops::DerefMut for Watched {
    fn deref_mut(&mut self) -> &mut Fake {
        &mut self.fake
    }
}

impl Worker for Watched {
    async fn ready(&mut self) -> Result<(), BoxError> {
        self.fake.ready().await
    }

    fn exited(&mut self) -> Exited {
        self.fake.exited()
    }

    fn killer(&self) -> Killer {
        let (id, endings, inner) = (self.fake.id, self.endings.clone(), self.fake.killer());
        Killer::new(move || {
            endings.note(id, Ending::Killed);
            inner.kill();
        })
    }

    async fn close(self) {
        self.endings.note(self.fake.id, Ending::Closed);
        tokio::time::sleep(self.close_takes).await;
        self.fake.close().await;
    }
}

impl Farm {
    /// A factory of [`Watched`] workers that note their ending in `endings`
    /// and take `close_takes` to close.
    pub fn watched_factory(
        &self,
        endings: &Endings,
        close_takes: Duration,
    ) -> impl Fn(SlotInfo) -> std::future::Ready<Result<Watched, BoxError>> + Send + Sync + 'static
    {
        let farm = self.clone();
        let endings = endings.clone();
        move |info: SlotInfo| {
            std::future::ready(farm.make(&info).map(|fake| Watched {
                fake,
                endings: endings.clone(),
                close_takes,
            }))
        }
    }
}

/// Awaits `fut` for at most `d` of the (paused) clock, and panics past it,
/// so that a test fails instead of hanging when the pool never answers.
pub async fn within<F: std::future::Future>(d: Duration, fut: F) -> F::Output {
    match tokio::time::timeout(d, fut).await {
        Ok(out) => out,
        Err(_) => panic!("not done within {d:?}"),
    }
}

// ----- pools of fake workers -----

/// A builder of a pool of fake workers from `farm`, with `startup` and
/// `Fixed(n)`: add the options a test needs, then build.
pub fn fixed(farm: &Farm, startup: impl Startup, n: usize) -> PoolBuilder<Fake> {
    Pool::builder(farm.factory())
        .startup(startup)
        .sizing(Fixed(n))
}

/// A pool of `n` fake workers from `farm`, with `startup` and `Fixed(n)`.
pub fn pool_of(farm: &Farm, startup: impl Startup, n: usize) -> Pool<Fake> {
    fixed(farm, startup, n).build().unwrap()
}

/// A pool of `n` fake workers that all start when it is built
/// (`Parallel`, `Fixed(n)`).
pub fn parallel(farm: &Farm, n: usize) -> Pool<Fake> {
    pool_of(farm, Parallel, n)
}

/// A pool of up to `n` fake workers, each started when a job needs one
/// (`OnDemand`, `Fixed(n)`).
pub fn on_demand(farm: &Farm, n: usize) -> Pool<Fake> {
    pool_of(farm, OnDemand, n)
}

/// [`parallel`], named `name` (for a registry).
pub fn named_parallel(farm: &Farm, name: &str, n: usize) -> Pool<Fake> {
    fixed(farm, Parallel, n).name(name).build().unwrap()
}

/// [`on_demand`], named `name` (for a registry).
pub fn named_on_demand(farm: &Farm, name: &str, n: usize) -> Pool<Fake> {
    fixed(farm, OnDemand, n).name(name).build().unwrap()
}

/// Waits (on the paused clock, in steps of 100 ms) until worker `id` has
/// been made, and panics if it never is.
pub async fn until_made(farm: &Farm, id: usize) {
    for _ in 0..10_000 {
        if farm.made() > id {
            return;
        }
        advance(ms(100)).await;
    }
    panic!("worker {id} was never made");
}

// ----- jobs -----

/// Holds `n` workers of `pool`, lent one after the other.
pub async fn hold(pool: &Pool<Fake>, n: usize) -> Vec<Lease<Fake>> {
    let mut leases = Vec::with_capacity(n);
    for _ in 0..n {
        leases.push(pool.lend().await.unwrap());
    }
    leases
}

/// Spawns a job that runs on a worker of `pool` and returns that worker's id.
pub fn spawn_run_id(pool: &Pool<Fake>) -> JoinHandle<Result<usize, Error>> {
    let p = pool.clone();
    tokio::spawn(async move { p.run(async |w: &mut Fake| w.id).await })
}

/// Spawns a job that runs on a worker of `pool` and returns that worker's
/// slot.
pub fn spawn_run_slot(pool: &Pool<Fake>) -> JoinHandle<Result<usize, Error>> {
    let p = pool.clone();
    tokio::spawn(async move { p.run(async |w: &mut Fake| w.slot).await })
}

/// Spawns a job that lends a worker of `pool`, gives it back at once and
/// returns the slot it was lent from.
pub fn spawn_lend_slot(pool: &Pool<Fake>) -> JoinHandle<Result<usize, Error>> {
    let p = pool.clone();
    tokio::spawn(async move { p.lend().await.map(|l| l.slot()) })
}

/// Spawns a job that lends a worker of `pool`, gives it back at once and
/// returns its id.
pub fn spawn_lend_id(pool: &Pool<Fake>) -> JoinHandle<Result<usize, Error>> {
    let p = pool.clone();
    tokio::spawn(async move { p.lend().await.map(|l| l.id) })
}

/// Spawns a close of `pool`; the task ends when the pool has closed.
pub fn spawn_close<W: Worker>(pool: &Pool<W>) -> JoinHandle<()> {
    let p = pool.clone();
    tokio::spawn(async move { p.close().await })
}

/// The answer of a call that must not wait (a refusal, never a queue).
pub async fn at_once<F: std::future::Future>(call: F) -> F::Output {
    tokio::time::timeout(secs(1), call)
        .await
        .expect("answered at once, not queued")
}

// ----- events -----

/// The `worker:retired` events among `events`: (slot, reason), in order.
pub fn retired(events: &[Event]) -> Vec<(usize, RetireReason)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Retired { slot, reason, .. } => Some((*slot, *reason)),
            _ => None,
        })
        .collect()
}

/// How many of `events` are named `name` (as `worker:crashed`).
pub fn count(events: &[Event], name: &str) -> usize {
    events.iter().filter(|e| e.name() == name).count()
}
