//! The engine behind a pool: its state under one lock, and the handlers that
//! the pool's tasks (warm-ups, exit watchers, timers) report to.
//!
//! The lock is a `std::sync::Mutex` that is never held across `.await`
//! (ADR 0005). Tasks hold a `Weak` to the engine and re-check the slot's
//! generation when they report (slot invariant 4).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};

use parking_lot::MutexGuard;
use std::time::Duration;

use tokio::sync::{Notify, broadcast};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::backoff;
use crate::dispatch::{Dispatch, Granted, Mailbox, Waiters};
use crate::error::{Error, RejectReason};
use crate::event::{Event, RetireReason};
use crate::eviction::{Eviction, IdleWorker};
use crate::metrics::{PoolMetrics, Published};
use crate::reconfig::{Action, Reconfig};
use crate::sizing::{Sizing, SizingDecision, SizingInput, SizingView};
use crate::slot::{EndReason, Now, SlotState, Slots, WorkerCell};
use crate::startup::{SlotPhase, Starts, Startup};
use crate::stats::Stats;
use crate::worker::{BoxError, Exit, Exited, Killer, Worker};

/// What the factory gets: which pool and which slot the worker is for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SlotInfo {
    /// The pool's name.
    pub pool: Arc<str>,
    /// The slot the worker will live in.
    pub slot: usize,
}

pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;
pub(crate) type FactoryFn<W> =
    Arc<dyn Fn(SlotInfo) -> BoxFuture<Result<W, BoxError>> + Send + Sync>;

/// The options a pool enforces, changeable by reconfiguration.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) job_timeout: Option<Duration>,
    pub(crate) warmup_timeout: Option<Duration>,
    pub(crate) max_waiting: usize,
    pub(crate) max_queue_wait: Option<Duration>,
    pub(crate) close_grace: Duration,
    pub(crate) dispatch: Dispatch,
    pub(crate) max_lifetime: Option<Duration>,
    pub(crate) max_lifetime_jitter: Duration,
    pub(crate) auto_grow_threshold: Option<usize>,
}

/// How a lease comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The worker is fine: the job ended, or never used it (a job dropped
    /// after it was handed the worker, `for_each_idle`). Only a lease that
    /// carries its lend time counts as a timed job.
    Returned,
    /// The pool ends the worker.
    Retire(RetireReason),
}

pub(crate) struct State<W> {
    pub(crate) slots: Slots<W>,
    pub(crate) waiters: Waiters<W>,
    pub(crate) opts: Options,
    startup: Arc<dyn Startup>,
    sizing: Box<dyn Sizing>,
    /// Whether the sizing hears of finished jobs (its plan says).
    sizing_jobs: bool,
    /// Whether jobs are timed: something reads their times (ADR 0011).
    pub(crate) timing: bool,
    eviction: Arc<dyn Eviction>,
    pub(crate) closed: bool,
    ever_ready: bool,
    rr_next: usize,
    /// Mean job time (EWMA), in seconds.
    ewma: Option<f64>,
    sizing_wake: Option<(Instant, AbortHandle)>,
    /// The next look at a start the sizing refused while jobs wait.
    start_retry: Option<AbortHandle>,
    /// Draws the lifetime jitter of each worker.
    rng: rand::rngs::StdRng,
    /// Slots at or above this keep no worker (after a memory-forced shrink).
    kept_limit: usize,
    /// What the queue gauges show now.
    published: Published,
}

/// The engine: shared by the pool handles, leases and tasks.
pub(crate) struct Shared<W> {
    pub(crate) name: Arc<str>,
    factory: FactoryFn<W>,
    state: parking_lot::Mutex<State<W>>,
    /// What waiting jobs were handed (ADR 0005).
    pub(crate) mailbox: Mailbox<W>,
    events: broadcast::Sender<Event>,
    /// Subscribed at build, so the first subscriber sees the build's events.
    first_events: Mutex<Option<broadcast::Receiver<Event>>>,
    ended: Notify,
    me: Weak<Self>,
    pub(crate) metrics: PoolMetrics,
    /// The runtime the pool was built on: its tasks run there, also when a
    /// lease is dropped on a thread outside the runtime.
    rt: tokio::runtime::Handle,
}

impl<W> std::fmt::Debug for Shared<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Things to do after the lock is released (dropping a worker may kill a
/// process; it is not done under the lock).
type Later<W> = Vec<W>;

const EWMA_ALPHA: f64 = 0.2;

/// How soon the pool looks again at a start its sizing refused (memory was
/// short) while jobs wait for it.
const START_RETRY: Duration = Duration::from_secs(1);

impl<W: Worker> Shared<W> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        name: Arc<str>,
        factory: FactoryFn<W>,
        capacity: usize,
        size: usize,
        sizing_jobs: bool,
        opts: Options,
        startup: Arc<dyn Startup>,
        sizing: Box<dyn Sizing>,
        eviction: Arc<dyn Eviction>,
        event_capacity: usize,
        rng: rand::rngs::StdRng,
    ) -> Arc<Self> {
        let (events, first) = broadcast::channel(event_capacity.max(1));
        let metrics = PoolMetrics::new(&name);
        let shared = Arc::new_cyclic(|me| Self {
            name,
            factory,
            state: parking_lot::Mutex::new(State {
                slots: Slots::new(capacity, size),
                waiters: Waiters::new(),
                opts,
                startup,
                sizing,
                sizing_jobs,
                timing: false,
                eviction,
                closed: false,
                ever_ready: false,
                rr_next: 0,
                ewma: None,
                sizing_wake: None,
                start_retry: None,
                rng,
                kept_limit: usize::MAX,
                published: Published::none(),
            }),
            mailbox: Mailbox::new(),
            events,
            first_events: Mutex::new(Some(first)),
            ended: Notify::new(),
            me: me.clone(),
            rt: tokio::runtime::Handle::current(),
            metrics,
        });
        {
            let mut st = shared.lock();
            shared.retime(&mut st);
        }
        shared
    }

    /// Times jobs only when something reads their times: the metrics, the
    /// mean job time behind `max_queue_wait`, a sizing that learns from
    /// jobs (ADR 0011).
    fn retime(&self, st: &mut State<W>) {
        st.timing = self.metrics.on || st.opts.max_queue_wait.is_some() || st.sizing_jobs;
    }

    /// Enters the pool's runtime when called from outside any runtime (a
    /// lease dropped on a plain thread, a reconfiguration from sync code),
    /// so that timers and spawns work and read the pool's clock.
    fn enter_runtime(&self) -> Option<tokio::runtime::EnterGuard<'_>> {
        // A task runs inside its runtime. Asking for the task id reads a
        // thread-local; asking for the handle would clone it (an atomic
        // increment on a counter every thread of the runtime shares).
        if tokio::task::try_id().is_some() {
            return None;
        }
        tokio::runtime::Handle::try_current()
            .is_err()
            .then(|| self.rt.enter())
    }

    /// Locks the state. When the guard drops, the metric gauges that
    /// changed are set to the counts, so every change of state is published.
    pub(crate) fn lock(&self) -> StateGuard<'_, W> {
        StateGuard {
            guard: Some(self.state.lock()),
            metrics: &self.metrics,
            mailbox: &self.mailbox,
        }
    }

    pub(crate) fn emit(&self, event: Event) {
        event.trace(&self.name);
        self.metrics.event(&event);
        // No subscriber, or only slow ones: a broadcast never blocks the pool.
        let _ = self.events.send(event);
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Event> {
        let first = self
            .first_events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        first.unwrap_or_else(|| self.events.subscribe())
    }

    /// Called once after the pool is built: first sizing wake-up and the
    /// startup's first workers.
    pub(crate) fn begin(&self, warning: Option<String>) {
        if let Some(message) = warning {
            self.emit(Event::Warning { message });
        }
        let mut st = self.lock();
        let decision = {
            let view = self.view(&st);
            st.sizing.observe(&view, SizingInput::Wake)
        };
        self.apply_sizing(&mut st, decision);
        self.kick_startup(&mut st);
    }

    // ----- reading -----

    pub(crate) fn stats(&self) -> Stats {
        let st = self.lock();
        let c = st.slots.counts;
        Stats {
            starting: c.starting,
            idle: c.idle,
            lent: c.lent + c.lent_above,
            waiting: st.waiters.len(),
            capacity: st.slots.capacity(),
            size: st.slots.size,
            kept: c.kept,
        }
    }

    fn view(&self, st: &State<W>) -> SizingView {
        Self::view_at(st, Instant::now())
    }

    fn view_at(st: &State<W>, now: Instant) -> SizingView {
        let c = st.slots.counts;
        SizingView {
            now,
            size: st.slots.size,
            capacity: st.slots.capacity(),
            waiting: st.waiters.len(),
            all_ready: c.idle + c.lent == st.slots.size,
            alive: st.slots.alive(),
        }
    }

    // ----- lending -----

    /// SPEC S2: an idle worker, then a starting one not awaited, then a new
    /// one, then the queue.
    ///
    /// With `queue` false, a job that would have to queue (rule 4) gets
    /// [`Acquired::WouldQueue`] instead (a group tries another pool).
    pub(crate) fn acquire(&self, st: &mut State<W>, queue: bool) -> Result<Acquired<W>, Error> {
        if st.closed {
            return Err(Error::Closed);
        }
        if let Some(granted) = self.take_idle(st) {
            self.auto_grow(st);
            return Ok(Acquired::Now(granted));
        }
        if let Some(i) = Self::unawaited_starting(st) {
            let id = st.waiters.push(Some(i));
            Self::set_awaited(st, i, Some(id));
            return Ok(Acquired::Wait(id));
        }
        if let Some(i) = self.startable_slot(st) {
            let id = st.waiters.push(Some(i));
            self.start_slot(st, i, Some(id));
            return Ok(Acquired::Wait(id));
        }
        if !queue {
            return Ok(Acquired::WouldQueue);
        }
        if st.waiters.unbound() >= st.opts.max_waiting {
            return Err(self.reject(RejectReason::QueueFull));
        }
        if let Some(limit) = st.opts.max_queue_wait {
            // Before any job time is known, the job timeout stands in.
            let mean = st
                .ewma
                .or_else(|| st.opts.job_timeout.map(|d| d.as_secs_f64()));
            if mean.is_some_and(|mean| Self::projected(st, mean) > limit.as_secs_f64()) {
                return Err(self.reject(RejectReason::QueueWait));
            }
        }
        let id = st.waiters.push(None);
        self.retry_refused_start(st);
        self.hurry_closing(st);
        Ok(Acquired::Wait(id))
    }

    /// The wait of a job that joined the queue now, in seconds, with jobs
    /// that take `mean` seconds: (waiting + 1) / running slots × `mean`.
    fn projected(st: &State<W>, mean: f64) -> f64 {
        let running = st.slots.size.max(1) as f64;
        (st.waiters.len() as f64 + 1.0) / running * mean
    }

    /// As [`Pool::projected_wait`](crate::Pool::projected_wait).
    pub(crate) fn projected_wait(&self) -> Option<Duration> {
        let st = self.lock();
        let mean = st.ewma?;
        Duration::try_from_secs_f64(Self::projected(&st, mean)).ok()
    }

    /// SPEC S4 `auto_grow_threshold`: when idle workers drop to the
    /// threshold, start one more running slot ahead of demand.
    fn auto_grow(&self, st: &mut State<W>) {
        let Some(threshold) = st.opts.auto_grow_threshold else {
            return;
        };
        if st.slots.counts.idle + st.slots.counts.starting > threshold {
            return;
        }
        if let Some(i) = self.startable_slot(st) {
            self.start_slot(st, i, None);
        }
    }

    /// Takes the idle worker of slot `i` (running or kept), for `for_each_idle`.
    pub(crate) fn take_slot(&self, i: usize) -> Option<Granted<W>> {
        let mut st = self.lock();
        if st.closed || !matches!(st.slots.slots.get(i)?.state, SlotState::Idle { .. }) {
            return None;
        }
        Some(Self::lend_idle(&mut st, i))
    }

    /// Lends the idle worker of slot `i`: the job gets the worker, and the
    /// slot keeps the cell, to kill the worker or see it end while lent.
    fn lend_idle(st: &mut State<W>, i: usize) -> Granted<W> {
        let (worker, cell, timer) = st.slots.update(i, |old| {
            let SlotState::Idle {
                worker,
                cell,
                timer,
                ..
            } = old
            else {
                unreachable!("slot {i} was taken as idle but is not");
            };
            (
                SlotState::Lent { cell: cell.clone() },
                (worker, cell, timer),
            )
        });
        if let Some(t) = timer {
            t.abort();
        }
        Granted {
            slot: i,
            worker,
            cell,
            at: None,
        }
    }

    /// The idle slots now (running and kept).
    pub(crate) fn idle_slots(&self) -> Vec<usize> {
        let st = self.lock();
        (0..st.slots.slots.len())
            .filter(|&i| matches!(st.slots.slots[i].state, SlotState::Idle { .. }))
            .collect()
    }

    fn reject(&self, reason: RejectReason) -> Error {
        self.emit(Event::Rejected { reason });
        Error::Rejected { reason }
    }

    fn take_idle(&self, st: &mut State<W>) -> Option<Granted<W>> {
        let size = st.slots.size;
        let i = match st.opts.dispatch {
            Dispatch::LowestSlot => st.slots.idle.first_in(0, size)?,
            Dispatch::RoundRobin => {
                let from = st.rr_next.min(size);
                let i = st
                    .slots
                    .idle
                    .first_in(from, size)
                    .or_else(|| st.slots.idle.first_in(0, from))?;
                st.rr_next = i + 1;
                i
            }
        };
        Some(Self::lend_idle(st, i))
    }

    fn unawaited_starting(st: &State<W>) -> Option<usize> {
        if st.slots.counts.starting == 0 {
            return None;
        }
        st.slots.slots[..st.slots.size].iter().position(|s| {
            matches!(
                s.state,
                SlotState::Starting {
                    awaited_by: None,
                    ..
                }
            )
        })
    }

    fn startable_slot(&self, st: &mut State<W>) -> Option<usize> {
        let c = &st.slots.counts;
        if c.idle + c.lent >= st.slots.size {
            // Every running slot holds a ready worker (a busy pool's case).
            return None;
        }
        let i = st.slots.slots[..st.slots.size]
            .iter()
            .position(|s| s.is_empty())?;
        let view = self.view(st);
        st.sizing.may_start(&view).then_some(i)
    }

    fn set_awaited(st: &mut State<W>, slot: usize, id: Option<u64>) {
        if let SlotState::Starting { awaited_by, .. } = &mut st.slots.slots[slot].state {
            *awaited_by = id;
        }
    }

    /// A waiting job gave up (dropped or timed out): forget it, and hand back
    /// a worker that was granted to it meanwhile.
    pub(crate) fn cancel_wait(&self, id: u64) {
        let _rt = self.enter_runtime();
        let mut later = Later::new();
        {
            let mut st = self.lock();
            if let Some(w) = st.waiters.remove(id) {
                if let Some(b) = w.bound {
                    Self::set_awaited(&mut st, b, None);
                }
            } else if let Some(Ok(g)) = self.mailbox.take(id) {
                self.release_locked(
                    &mut st,
                    g.slot,
                    g.worker,
                    &g.cell,
                    Outcome::Returned,
                    None,
                    &mut Now::unread(),
                    &mut later,
                );
            }
            self.pump(&mut st);
        }
        drop(later);
    }

    /// Gives waiting jobs what the pool has: idle workers, unawaited starting
    /// workers, empty running slots.
    fn pump(&self, st: &mut State<W>) {
        self.pump_at(st, None);
    }

    /// As [`pump`](Self::pump), with the time now if the caller has read it.
    fn pump_at(&self, st: &mut State<W>, now: Option<Instant>) {
        while !st.waiters.is_empty() {
            if st.closed {
                return;
            }
            if let Some(g) = self.take_idle(st) {
                self.grant_oldest(st, g, now);
                continue;
            }
            let Some(id) = st.waiters.oldest_unbound() else {
                return;
            };
            if let Some(i) = Self::unawaited_starting(st) {
                st.waiters.set_bound(id, Some(i));
                Self::set_awaited(st, i, Some(id));
                continue;
            }
            if let Some(i) = self.startable_slot(st) {
                st.waiters.set_bound(id, Some(i));
                self.start_slot(st, i, Some(id));
                continue;
            }
            self.retry_refused_start(st);
            self.hurry_closing(st);
            return;
        }
    }

    /// Jobs wait while a running slot is empty: the sizing refused to start
    /// a worker there (memory is short). Memory may free without any worker
    /// of this pool returning or ending, so look again in a second.
    fn retry_refused_start(&self, st: &mut State<W>) {
        if st.start_retry.is_some() || st.closed || st.waiters.unbound() == 0 {
            return;
        }
        let c = &st.slots.counts;
        if c.idle + c.lent >= st.slots.size
            || !st.slots.slots[..st.slots.size].iter().any(|s| s.is_empty())
        {
            return;
        }
        let me = self.me.clone();
        let at = Instant::now() + START_RETRY;
        let task = self.rt.spawn(async move {
            tokio::time::sleep_until(at).await;
            if let Some(shared) = me.upgrade() {
                let mut st = shared.lock();
                st.start_retry = None;
                shared.pump(&mut st);
            }
        });
        st.start_retry = Some(task.abort_handle());
    }

    /// A job waits and the only free room is a running slot whose worker the
    /// pool is closing gracefully (evicted, expired): a job never waits for a
    /// graceful close, so kill it; its slot empties when the exit is seen.
    fn hurry_closing(&self, st: &mut State<W>) {
        if st.slots.counts.closing == 0 {
            return;
        }
        for s in &st.slots.slots[..st.slots.size] {
            if let SlotState::Closing {
                cell,
                reason: EndReason::Evicted | EndReason::Retired(_),
            } = &s.state
            {
                cell.killer.kill();
                return;
            }
        }
    }

    /// Hands a lent worker to the oldest waiting job (SPEC S2: a worker that
    /// becomes idle goes to the oldest waiting job first).
    fn grant_oldest(&self, st: &mut State<W>, mut g: Granted<W>, now: Option<Instant>) {
        g.at = now;
        let Some((id, waiter)) = st.waiters.take_oldest() else {
            unreachable!("grant_oldest with no waiter");
        };
        if let Some(b) = waiter.bound {
            if b != g.slot {
                Self::set_awaited(st, b, None);
            }
        }
        st.waiters.grant(id, waiter, Ok(g));
    }

    /// A lease comes back.
    pub(crate) fn release(
        &self,
        slot: usize,
        worker: W,
        cell: &Arc<WorkerCell>,
        outcome: Outcome,
        since: Option<Instant>,
    ) {
        // A lease may be dropped on a thread outside the runtime: read the
        // pool's clock and spawn on the pool's runtime all the same.
        let _rt = self.enter_runtime();
        let mut now = Now::unread();
        let held = since.map(|since| now.get().saturating_duration_since(since));
        let mut later = Later::new();
        {
            let mut st = self.lock();
            self.release_locked(
                &mut st, slot, worker, cell, outcome, held, &mut now, &mut later,
            );
            self.pump_at(&mut st, now.read());
        }
        drop(later);
    }

    #[allow(clippy::too_many_arguments)]
    fn release_locked(
        &self,
        st: &mut State<W>,
        i: usize,
        worker: W,
        cell: &Arc<WorkerCell>,
        outcome: Outcome,
        held: Option<Duration>,
        now: &mut Now,
        later: &mut Later<W>,
    ) {
        let ours = match &st.slots.slots[i].state {
            SlotState::Lent { cell: c } => Arc::ptr_eq(c, cell),
            SlotState::Closing {
                cell: c,
                reason: EndReason::Gone,
            } => Arc::ptr_eq(c, cell),
            _ => false,
        };
        if !ours {
            // The slot moved on (cannot happen by invariant 2); end the worker.
            cell.killer.kill();
            later.push(worker);
            return;
        }
        if let (Outcome::Returned, Some(held), false) = (outcome, held, cell.is_dead()) {
            self.metrics.job_done(held);
            let took = held.as_secs_f64();
            st.ewma = Some(match st.ewma {
                Some(m) => m + EWMA_ALPHA * (took - m),
                None => took,
            });
            if st.sizing_jobs {
                let decision = {
                    let view = Self::view_at(st, now.get());
                    st.sizing
                        .observe(&view, SizingInput::JobDone { took: held })
                };
                self.apply_sizing(st, decision);
            }
        }
        if !cell.is_dead() && !worker.is_alive() {
            // It ended during the job, and the pool's watcher has not seen
            // the exit yet: never lend it again; the exit empties the slot.
            later.push(worker);
            st.slots.set(
                i,
                SlotState::Closing {
                    cell: cell.clone(),
                    reason: EndReason::SelfExit,
                },
            );
            return;
        }
        if cell.is_dead() {
            // It ended while lent; its exit was handled when seen.
            later.push(worker);
            st.slots.set(i, SlotState::Empty);
            self.after_empty(st, i);
            return;
        }
        if !matches!(outcome, Outcome::Retire(_)) && i >= st.slots.capacity() {
            // Its slot was removed by a reconfiguration.
            self.retire_worker(st, i, worker, cell.clone(), RetireReason::Reconfigured);
            return;
        }
        if !matches!(outcome, Outcome::Retire(_)) && cell.expired_by(now) {
            // Never cut short; replaced when it comes back.
            self.retire_worker(st, i, worker, cell.clone(), RetireReason::Lifetime);
            return;
        }
        if let Outcome::Retire(reason) = outcome {
            cell.killer.kill();
            later.push(worker);
            st.slots.set(
                i,
                SlotState::Closing {
                    cell: cell.clone(),
                    reason: EndReason::Retired(reason),
                },
            );
            self.emit(Event::Retired { slot: i, reason });
            return;
        }
        self.place(st, i, worker, now);
    }

    /// A ready worker is free in slot `i`, whose state is `Lent` and holds
    /// its cell: close it, keep it, give it to the oldest job, or make it
    /// idle.
    fn place(&self, st: &mut State<W>, i: usize, worker: W, now: &mut Now) {
        let SlotState::Lent { cell } = &st.slots.slots[i].state else {
            unreachable!("slot {i} is placed from a state other than lent");
        };
        let (expired, started) = (cell.expired_by(now), cell.started);
        let lent_cell = |st: &State<W>| st.slots.slots[i].cell().cloned().expect("lent");
        if st.closed {
            let cell = lent_cell(st);
            self.close_worker(st, i, worker, cell, EndReason::PoolClosed);
            return;
        }

        if !st.waiters.is_empty() && i < st.slots.size {
            // It stays lent, now to the oldest job.
            let cell = lent_cell(st);
            self.grant_oldest(
                st,
                Granted {
                    slot: i,
                    worker,
                    cell,
                    at: None,
                },
                now.read(),
            );
            return;
        }
        if expired {
            // Its lifetime ended while it warmed up or worked, and no job waits
            // for it: close it and start a fresh one.
            let cell = lent_cell(st);
            self.retire_worker(st, i, worker, cell, RetireReason::Lifetime);
            return;
        }
        if i >= st.slots.size && i >= st.kept_limit {
            // Memory ran short: do not keep it.
            let cell = lent_cell(st);
            self.retire_worker(st, i, worker, cell, RetireReason::Memory);
            return;
        }
        // Without an eviction that may evict, nothing reads when it
        // turned idle: the clock is not read for it.
        let since = st.eviction.may_evict().then(|| now.get());
        let timer = match since {
            Some(since) if i < st.slots.size => self.arm_eviction(st, i, since, started),
            _ => None,
        };
        st.slots.update(i, |old| {
            let SlotState::Lent { cell } = old else {
                unreachable!("checked lent above")
            };
            let idle = SlotState::Idle {
                worker,
                since,
                cell,
                timer,
            };
            (idle, ())
        });
    }

    // ----- starting -----

    fn start_slot(&self, st: &mut State<W>, i: usize, awaited_by: Option<u64>) {
        let generation = {
            let slot = &mut st.slots.slots[i];
            slot.cancel_backoff();
            slot.evicted = false;
            slot.generation += 1;
            slot.generation
        };
        let info = SlotInfo {
            pool: self.name.clone(),
            slot: i,
        };
        let task = self.rt.spawn(warm_up(
            self.me.clone(),
            self.factory.clone(),
            st.opts.warmup_timeout,
            info,
            generation,
        ));
        st.slots.set(
            i,
            SlotState::Starting {
                awaited_by,
                cell: None,
                task: task.abort_handle(),
            },
        );
        self.emit(Event::Starting { slot: i });
        if std::mem::take(&mut st.slots.slots[i].replacing) {
            self.emit(Event::Respawned { slot: i });
        }
    }

    /// The factory made the worker: keep its kill switch and watch its exit.
    fn register(
        &self,
        slot: usize,
        generation: u64,
        killer: Killer,
        exited: Exited,
        started: Instant,
    ) -> bool {
        let mut st = self.lock();
        let s = &st.slots.slots[slot];
        if s.generation != generation || !matches!(s.state, SlotState::Starting { .. }) {
            return false;
        }
        let deadline = st.opts.max_lifetime.map(|life| {
            let j = st.opts.max_lifetime_jitter.as_secs_f64();
            let jitter = if j == 0.0 {
                0.0
            } else {
                use rand::Rng;
                st.rng.random_range(-j..=j)
            };
            // The jitter is below the lifetime (checked when built).
            started + Duration::from_secs_f64((life.as_secs_f64() + jitter).max(0.001))
        });
        let new = Arc::new(WorkerCell::new(killer, started, deadline));
        if let Some(at) = deadline {
            let me = self.me.clone();
            let timer = self.rt.spawn(async move {
                tokio::time::sleep_until(at).await;
                if let Some(shared) = me.upgrade() {
                    shared.on_lifetime(slot, generation);
                }
            });
            *new.timer.lock().unwrap_or_else(|e| e.into_inner()) = Some(timer.abort_handle());
        }
        if let SlotState::Starting { cell, .. } = &mut st.slots.slots[slot].state {
            *cell = Some(new);
        }
        self.rt
            .spawn(watch_exit(self.me.clone(), slot, generation, exited));
        true
    }

    /// A worker outlived its lifetime: close it if idle; a lent one is
    /// replaced when it comes back (SPEC S5).
    fn on_lifetime(&self, i: usize, generation: u64) {
        let mut st = self.lock();
        let slot = &st.slots.slots[i];
        if slot.generation != generation
            || st.closed
            || !matches!(slot.state, SlotState::Idle { .. })
        {
            return;
        }
        self.retire_idle(&mut st, i, RetireReason::Lifetime);
    }

    /// Retires the idle worker of slot `i`: stops its eviction timer, says
    /// why, and closes it gracefully.
    fn retire_idle(&self, st: &mut State<W>, i: usize, reason: RetireReason) {
        let SlotState::Idle {
            worker,
            cell,
            timer,
            ..
        } = st.slots.set(i, SlotState::Empty)
        else {
            unreachable!("slot {i} is retired as idle but is not");
        };
        if let Some(t) = timer {
            t.abort();
        }
        self.retire_worker(st, i, worker, cell, reason);
    }

    /// Retires a worker taken out of slot `i`: says why and closes it
    /// gracefully.
    fn retire_worker(
        &self,
        st: &mut State<W>,
        i: usize,
        worker: W,
        cell: Arc<WorkerCell>,
        reason: RetireReason,
    ) {
        self.emit(Event::Retired { slot: i, reason });
        self.close_worker(st, i, worker, cell, EndReason::Retired(reason));
    }

    fn on_ready(&self, i: usize, generation: u64, worker: W, warmup: Duration) {
        let mut later = Later::new();
        {
            let mut st = self.lock();
            let slot = &st.slots.slots[i];
            let current = slot.generation == generation;
            let (cell, awaited_by) = match &slot.state {
                SlotState::Starting {
                    cell: Some(cell),
                    awaited_by,
                    ..
                } if current => (cell.clone(), *awaited_by),
                _ => {
                    worker.killer().kill();
                    later.push(worker);
                    drop(st);
                    drop(later);
                    return;
                }
            };
            st.ever_ready = true;
            self.emit(Event::Ready { slot: i, warmup });
            if let Some(id) = awaited_by {
                // Its job still waits; it may get this worker or an older
                // job may. Either way it is no longer bound to this slot.
                st.waiters.set_bound(id, None);
            }
            // Through Lent so that `place` sees one starting point: it gives
            // the worker to the oldest job, or keeps it idle.
            st.slots.set(i, SlotState::Lent { cell });
            self.place(&mut st, i, worker, &mut Now::unread());
            self.kick_startup(&mut st);
            self.pump(&mut st);
        }
        drop(later);
    }

    fn on_warmup_failed(
        &self,
        i: usize,
        generation: u64,
        message: String,
        source: Option<BoxError>,
    ) {
        let mut st = self.lock();
        let slot = &st.slots.slots[i];
        if slot.generation != generation || !matches!(slot.state, SlotState::Starting { .. }) {
            return;
        }
        self.emit(Event::WarmupFailed {
            slot: i,
            message: message.clone(),
        });
        let SlotState::Starting {
            awaited_by, cell, ..
        } = st.slots.set(i, SlotState::Empty)
        else {
            unreachable!()
        };
        if let Some(id) = awaited_by {
            st.waiters.fail(id, Error::warmup(i, message, source));
        }
        st.slots.slots[i].early_exits += 1;
        match cell {
            Some(cell) => {
                cell.killer.kill();
                st.slots.set(
                    i,
                    SlotState::Closing {
                        cell,
                        reason: EndReason::WarmupFailed,
                    },
                );
            }
            None => {
                self.schedule_refill(&mut st, i);
                self.after_empty(&mut st, i);
            }
        }
        self.pump(&mut st);
    }

    fn on_exit(&self, i: usize, generation: u64, exit: Exit) {
        let mut later = Later::new();
        {
            let mut st = self.lock();
            let slot = &st.slots.slots[i];
            if slot.generation != generation {
                return;
            }
            let Some(cell) = slot.cell().cloned() else {
                return;
            };
            cell.mark_dead(Some(exit.clone()));
            cell.stop_timer();
            let ran_for = cell.started.elapsed();
            let early = ran_for < backoff::EARLY_EXIT;
            match &slot.state {
                SlotState::Empty => {}
                SlotState::Starting { .. } => {
                    self.emit(Event::Exited {
                        slot: i,
                        exit: exit.clone(),
                        early: true,
                    });
                    let SlotState::Starting {
                        awaited_by, task, ..
                    } = st.slots.set(i, SlotState::Empty)
                    else {
                        unreachable!()
                    };
                    task.abort();
                    let message = format!("worker {} during its warm-up", exit.status);
                    self.emit(Event::WarmupFailed {
                        slot: i,
                        message: message.clone(),
                    });
                    if let Some(id) = awaited_by {
                        st.waiters.fail(id, Error::warmup(i, message, None));
                    }
                    st.slots.slots[i].early_exits += 1;
                    self.schedule_refill(&mut st, i);
                    self.after_empty(&mut st, i);
                }
                SlotState::Idle { .. } => {
                    self.emit(Event::Exited {
                        slot: i,
                        exit,
                        early,
                    });
                    let SlotState::Idle { worker, timer, .. } = st.slots.set(i, SlotState::Empty)
                    else {
                        unreachable!()
                    };
                    if let Some(t) = timer {
                        t.abort();
                    }
                    later.push(worker);
                    self.count_exit(&mut st, i, early);
                    self.schedule_refill(&mut st, i);
                    self.after_empty(&mut st, i);
                }
                SlotState::Lent { .. } => {
                    // The job learns it through the cell; the slot empties
                    // when the lease comes back. Meanwhile the worker is in
                    // no count (SPEC S8): it has ended.
                    st.slots.set(
                        i,
                        SlotState::Closing {
                            cell,
                            reason: EndReason::Gone,
                        },
                    );
                    if !st.closed {
                        self.crashed(&mut st, i, exit, early);
                    }
                }
                SlotState::Closing { reason, .. } => {
                    let reason = *reason;
                    st.slots.set(i, SlotState::Empty);
                    match reason {
                        EndReason::Evicted => {
                            st.slots.slots[i].evicted = true;
                            if !early {
                                st.slots.slots[i].early_exits = 0;
                            }
                        }
                        EndReason::Retired(reason) => {
                            st.slots.slots[i].replacing = true;
                            if !early {
                                // It ran 10 minutes: the slot is healthy.
                                st.slots.slots[i].early_exits = 0;
                            }
                            // A failed or expired worker is replaced whatever
                            // the startup (pooler's `fail`, SPEC S5 lifetime);
                            // eager startups replace the others too.
                            let always =
                                matches!(reason, RetireReason::Failed | RetireReason::Lifetime);
                            if always && i < st.slots.size && !st.closed {
                                self.start_slot(&mut st, i, None);
                            }
                        }
                        EndReason::WarmupFailed => self.schedule_refill(&mut st, i),
                        EndReason::PoolClosed | EndReason::Gone => {}
                        EndReason::SelfExit => {
                            // It ended while its job held it: a crash, though
                            // the job gave it back before the exit was seen.
                            self.crashed(&mut st, i, exit, early);
                        }
                    }
                    self.after_empty(&mut st, i);
                }
            }
        }
        drop(later);
        self.ended.notify_waiters();
    }

    /// The worker of slot `i` ended while a job held it: report the crash
    /// and the exit, and replace it after its back-off.
    fn crashed(&self, st: &mut State<W>, i: usize, exit: Exit, early: bool) {
        self.emit(Event::Crashed {
            slot: i,
            exit: exit.clone(),
        });
        self.emit(Event::Exited {
            slot: i,
            exit,
            early,
        });
        self.count_exit(st, i, early);
        st.slots.slots[i].replacing = true;
        self.schedule_refill(st, i);
    }

    fn count_exit(&self, st: &mut State<W>, i: usize, early: bool) {
        let slot = &mut st.slots.slots[i];
        if early {
            slot.early_exits += 1;
        } else {
            slot.early_exits = 0;
        }
    }

    /// For eager startups: start slot `i` again after its back-off.
    fn schedule_refill(&self, st: &mut State<W>, i: usize) {
        if st.closed || !st.startup.is_eager() {
            return;
        }
        let early_exits = st.slots.slots[i].early_exits;
        let delay = backoff::delay(early_exits);
        st.slots.slots[i].cancel_backoff();
        if delay.is_zero() {
            return;
        }
        let at = Instant::now() + delay;
        let me = self.me.clone();
        let generation = st.slots.slots[i].generation;
        let task = self.rt.spawn(async move {
            tokio::time::sleep_until(at).await;
            if let Some(shared) = me.upgrade() {
                shared.on_backoff_done(i, generation);
            }
        });
        st.slots.slots[i].backoff = Some((at, task.abort_handle()));
        self.emit(Event::Backoff {
            slot: i,
            delay,
            early_exits,
        });
    }

    fn on_backoff_done(&self, i: usize, generation: u64) {
        let mut st = self.lock();
        let slot = &mut st.slots.slots[i];
        if slot.generation != generation {
            return;
        }
        slot.backoff = None;
        self.kick_startup(&mut st);
    }

    /// A slot became empty: let the startup refill and the jobs take it.
    fn after_empty(&self, st: &mut State<W>, _i: usize) {
        self.kick_startup(st);
        self.pump(st);
    }

    /// Asks the startup which running slots to fill now.
    fn kick_startup(&self, st: &mut State<W>) {
        if st.closed || !st.startup.is_eager() {
            return;
        }
        let size = st.slots.size;
        let phases: Vec<SlotPhase> = st.slots.slots[..size]
            .iter()
            .map(|s| match s.state {
                SlotState::Empty if s.evicted || s.backoff.is_some() => SlotPhase::Resting,
                SlotState::Empty => SlotPhase::Wanted,
                SlotState::Starting { .. } => SlotPhase::Starting,
                _ => SlotPhase::Up,
            })
            .collect();
        let wanted: Vec<usize> = match st.startup.next(&phases, st.ever_ready) {
            Starts::None => Vec::new(),
            Starts::One(i) if phases.get(i) == Some(&SlotPhase::Wanted) => vec![i],
            Starts::One(_) => Vec::new(),
            Starts::AllWanted => (0..size)
                .filter(|&i| phases[i] == SlotPhase::Wanted)
                .collect(),
        };
        for i in wanted {
            let view = self.view(st);
            if !st.sizing.may_start(&view) {
                break;
            }
            self.start_slot(st, i, None);
        }
    }

    // ----- eviction -----

    fn arm_eviction(
        &self,
        st: &State<W>,
        i: usize,
        since: Instant,
        started: Instant,
    ) -> Option<AbortHandle> {
        let wait = st.eviction.idle(IdleWorker {
            slot: i,
            idle_since: since,
            started,
        })?;
        let me = self.me.clone();
        let generation = st.slots.slots[i].generation;
        let task = self.rt.spawn(async move {
            wait.await;
            if let Some(shared) = me.upgrade() {
                shared.on_evict(i, generation, since);
            }
        });
        Some(task.abort_handle())
    }

    fn on_evict(&self, i: usize, generation: u64, since: Instant) {
        let mut st = self.lock();
        let slot = &st.slots.slots[i];
        let is_this_idle = slot.generation == generation
            && i < st.slots.size
            && matches!(&slot.state, SlotState::Idle { since: s, .. } if *s == Some(since));
        if !is_this_idle || st.closed {
            return;
        }
        let up = st.slots.slots[..st.slots.size]
            .iter()
            .filter(|s| {
                matches!(
                    s.state,
                    SlotState::Starting { .. } | SlotState::Idle { .. } | SlotState::Lent { .. }
                )
            })
            .count();
        if up <= st.eviction.floor() {
            // At the floor: keep it, and let a new idle period begin.
            let now = Instant::now();
            let started = st.slots.slots[i].cell().map_or(now, |c| c.started);
            let timer = self.arm_eviction(&st, i, now, started);
            if let SlotState::Idle {
                since, timer: t, ..
            } = &mut st.slots.slots[i].state
            {
                *since = Some(now);
                *t = timer;
            }
            return;
        }
        let SlotState::Idle { worker, cell, .. } = st.slots.set(i, SlotState::Empty) else {
            unreachable!()
        };
        self.emit(Event::Evicted {
            slot: i,
            idle_for: since.elapsed(),
        });
        self.close_worker(&mut st, i, worker, cell, EndReason::Evicted);
    }

    /// Closes a worker gracefully on a task of its own; the slot is
    /// `Closing` until its exit is seen.
    fn close_worker(
        &self,
        st: &mut State<W>,
        i: usize,
        worker: W,
        cell: Arc<WorkerCell>,
        reason: EndReason,
    ) {
        let killer = cell.killer.clone();
        st.slots.set(i, SlotState::Closing { cell, reason });
        self.rt.spawn(async move {
            worker.close().await;
            // A worker whose close resolved has ended; make sure of it.
            killer.kill();
        });
    }

    // ----- sizing -----

    fn apply_sizing(&self, st: &mut State<W>, decision: SizingDecision) {
        for step in decision.steps {
            self.emit(Event::SizingStep(step));
        }
        if let Some(at) = decision.wake_at {
            if let Some((_, h)) = st.sizing_wake.take() {
                h.abort();
            }
            let me = self.me.clone();
            let task = self.rt.spawn(async move {
                tokio::time::sleep_until(at).await;
                if let Some(shared) = me.upgrade() {
                    shared.on_sizing_wake();
                }
            });
            st.sizing_wake = Some((at, task.abort_handle()));
        }
        if let Some(size) = decision.size {
            if size > st.slots.size {
                st.kept_limit = usize::MAX;
            }
            self.resize(st, size);
        }
        if let Some(limit) = decision.close_kept_above {
            st.kept_limit = limit.max(st.slots.size);
            for i in st.kept_limit..st.slots.slots.len() {
                if matches!(st.slots.slots[i].state, SlotState::Idle { .. }) {
                    self.retire_idle(st, i, RetireReason::Memory);
                }
            }
        }
    }

    fn on_sizing_wake(&self) {
        let mut st = self.lock();
        st.sizing_wake = None;
        if st.closed {
            return;
        }
        let decision = {
            let view = self.view(&st);
            st.sizing.observe(&view, SizingInput::Wake)
        };
        self.apply_sizing(&mut st, decision);
    }

    /// Changes the running size: fewer keeps workers alive (kept), more uses
    /// kept workers first.
    pub(crate) fn resize(&self, st: &mut State<W>, size: usize) {
        let size = size.clamp(1, st.slots.capacity());
        let old = st.slots.size;
        if size == old {
            return;
        }
        st.slots.resize(size);
        if size < old {
            for i in size..old {
                let slot = &mut st.slots.slots[i];
                slot.cancel_backoff();
                match &mut slot.state {
                    SlotState::Idle { timer, .. } => {
                        if let Some(t) = timer.take() {
                            t.abort();
                        }
                    }
                    SlotState::Starting { awaited_by, .. } => {
                        if let Some(id) = awaited_by.take() {
                            st.waiters.set_bound(id, None);
                        }
                    }
                    _ => {}
                }
            }
        } else {
            for i in old..size {
                if matches!(st.slots.slots[i].state, SlotState::Idle { .. }) {
                    // Through Lent, as `place` wants it.
                    let worker = st.slots.update(i, |old| {
                        let SlotState::Idle { worker, cell, .. } = old else {
                            unreachable!("matched idle")
                        };
                        (SlotState::Lent { cell }, worker)
                    });
                    self.place(st, i, worker, &mut Now::unread());
                }
            }
        }
        self.kick_startup(st);
        self.pump(st);
    }

    // ----- reconfiguration -----

    /// Applies a reconfiguration (SPEC S12) and says what it did.
    pub(crate) fn reconfigure(&self, r: Reconfig) -> Result<Vec<Action>, Error> {
        use crate::builder::{check_lifetime, check_limit};
        for (option, value) in [
            ("job_timeout", r.job_timeout),
            ("warmup_timeout", r.warmup_timeout),
            ("max_queue_wait", r.max_queue_wait),
        ] {
            if let Some(Some(d)) = value {
                check_limit(option, d)?;
            }
        }
        if let Some(d) = r.close_grace {
            crate::builder::check_grace(d)?;
        }
        let _rt = self.enter_runtime();
        let mut actions = Vec::new();
        let mut st = self.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        let life = r.max_lifetime.unwrap_or(st.opts.max_lifetime);
        let jitter = r.max_lifetime_jitter.unwrap_or(st.opts.max_lifetime_jitter);
        check_lifetime(life, jitter)?;
        let plan = match r.sizing {
            Some(mut sizing) => Some((sizing.plan()?, sizing)),
            None => None,
        };
        let before: Vec<bool> = st.slots.slots.iter().map(|s| s.is_empty()).collect();

        macro_rules! set {
            ($field:ident) => {
                if let Some(v) = r.$field {
                    st.opts.$field = v;
                    actions.push(Action::OptionChanged {
                        option: stringify!($field),
                    });
                }
            };
        }
        set!(job_timeout);
        set!(warmup_timeout);
        set!(max_waiting);
        set!(max_queue_wait);
        set!(max_lifetime);
        set!(max_lifetime_jitter);
        set!(auto_grow_threshold);
        set!(close_grace);

        if let Some(eviction) = r.eviction {
            st.eviction = eviction;
            let mut count = 0;
            for i in 0..st.slots.size {
                if let SlotState::Idle { since, cell, .. } = &st.slots.slots[i].state {
                    // A worker that turned idle under an eviction that never
                    // evicts has no time of its own: it counts from now.
                    let (since, started) = (since.unwrap_or_else(Instant::now), cell.started);
                    let timer = st
                        .eviction
                        .may_evict()
                        .then(|| self.arm_eviction(&st, i, since, started))
                        .flatten();
                    if let SlotState::Idle {
                        timer: t, since: s, ..
                    } = &mut st.slots.slots[i].state
                    {
                        *s = Some(since);
                        if let Some(old) = std::mem::replace(t, timer) {
                            old.abort();
                        }
                    }
                    count += 1;
                }
            }
            actions.push(Action::OptionChanged { option: "eviction" });
            actions.push(Action::TimersRescheduled { count });
        }

        if let Some((plan, sizing)) = plan {
            if let Some(message) = plan.warning {
                self.emit(Event::Warning { message });
            }
            let (old_cap, old_size) = (st.slots.capacity(), st.slots.size);
            let cap = plan.capacity.max(1);
            if cap != old_cap {
                st.slots.set_capacity(cap);
                actions.push(Action::CapacityChanged {
                    from: old_cap,
                    to: cap,
                });
                for i in cap..st.slots.slots.len() {
                    if self.drain_slot(&mut st, i) {
                        actions.push(Action::Retired { slot: i });
                    }
                }
            }
            st.sizing = sizing;
            st.sizing_jobs = plan.observes_jobs;
            if let Some((_, h)) = st.sizing_wake.take() {
                h.abort();
            }
            let size = plan.size.clamp(1, cap);
            self.resize(&mut st, size);
            if st.slots.size != old_size {
                actions.push(Action::Resized {
                    from: old_size,
                    to: st.slots.size,
                });
            }
            actions.push(Action::OptionChanged { option: "sizing" });
            let decision = {
                let view = self.view(&st);
                st.sizing.observe(&view, SizingInput::Wake)
            };
            self.apply_sizing(&mut st, decision);
        }
        self.retime(&mut st);
        self.kick_startup(&mut st);
        self.pump(&mut st);
        for i in 0..st.slots.slots.len() {
            // Slots added by a higher capacity were empty before, too.
            let was_empty = before.get(i).copied().unwrap_or(true);
            if was_empty && matches!(st.slots.slots[i].state, SlotState::Starting { .. }) {
                actions.push(Action::Started { slot: i });
            }
        }
        Ok(actions)
    }

    /// Ends the worker of a slot above the capacity. Returns whether there
    /// was one.
    fn drain_slot(&self, st: &mut State<W>, i: usize) -> bool {
        st.slots.slots[i].cancel_backoff();
        match &st.slots.slots[i].state {
            SlotState::Empty | SlotState::Closing { .. } => false,
            SlotState::Lent { .. } => true,
            SlotState::Idle { .. } => {
                self.retire_idle(st, i, RetireReason::Reconfigured);
                true
            }
            SlotState::Starting { .. } => {
                let SlotState::Starting {
                    cell,
                    task,
                    awaited_by,
                } = st.slots.set(i, SlotState::Empty)
                else {
                    unreachable!("matched starting")
                };
                task.abort();
                if let Some(id) = awaited_by {
                    st.waiters.set_bound(id, None);
                }
                if let Some(cell) = cell {
                    cell.killer.kill();
                    st.slots.set(
                        i,
                        SlotState::Closing {
                            cell,
                            reason: EndReason::Retired(RetireReason::Reconfigured),
                        },
                    );
                }
                self.emit(Event::Retired {
                    slot: i,
                    reason: RetireReason::Reconfigured,
                });
                true
            }
        }
    }

    // ----- closing -----

    /// Refuses new jobs, fails waiting ones, closes idle, kept and starting
    /// workers. Lent workers close when they come back.
    pub(crate) fn begin_close(&self) -> bool {
        let first;
        {
            let mut st = self.lock();
            first = !st.closed;
            if first {
                st.closed = true;
                st.waiters.close();
                if let Some((_, h)) = st.sizing_wake.take() {
                    h.abort();
                }
                if let Some(h) = st.start_retry.take() {
                    h.abort();
                }
                for i in 0..st.slots.slots.len() {
                    st.slots.slots[i].cancel_backoff();
                    match &st.slots.slots[i].state {
                        SlotState::Idle { .. } => {
                            let SlotState::Idle {
                                worker,
                                cell,
                                timer,
                                ..
                            } = st.slots.set(i, SlotState::Empty)
                            else {
                                unreachable!()
                            };
                            if let Some(t) = timer {
                                t.abort();
                            }
                            self.close_worker(&mut st, i, worker, cell, EndReason::PoolClosed);
                        }
                        SlotState::Starting { .. } => {
                            let SlotState::Starting { cell, task, .. } =
                                st.slots.set(i, SlotState::Empty)
                            else {
                                unreachable!()
                            };
                            task.abort();
                            if let Some(cell) = cell {
                                cell.killer.kill();
                                st.slots.set(
                                    i,
                                    SlotState::Closing {
                                        cell,
                                        reason: EndReason::PoolClosed,
                                    },
                                );
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        if first {
            self.emit(Event::Closed);
        }
        self.ended.notify_waiters();
        first
    }

    /// Whether every worker has ended.
    fn all_ended(&self) -> bool {
        let st = self.lock();
        st.slots.slots.iter().all(|s| match &s.state {
            SlotState::Empty => true,
            SlotState::Starting { .. } => false,
            _ => s.cell().is_some_and(|c| c.is_dead()),
        })
    }

    fn kill_lent(&self) {
        let st = self.lock();
        for s in &st.slots.slots {
            if let SlotState::Lent { cell, .. } | SlotState::Closing { cell, .. } = &s.state {
                cell.killer.kill();
            }
        }
    }

    /// Waits until every worker has ended; kills lent ones after the grace.
    pub(crate) async fn wait_ended(&self) {
        let grace = self.lock().opts.close_grace;
        let deadline = Instant::now() + grace;
        let mut killed = false;
        loop {
            let notified = self.ended.notified();
            if self.all_ended() {
                return;
            }
            if killed {
                notified.await;
            } else {
                tokio::select! {
                    () = notified => {}
                    () = tokio::time::sleep_until(deadline) => {
                        killed = true;
                        self.kill_lent();
                    }
                }
            }
        }
    }

    /// The last pool handle is gone without a close: kill every worker now.
    pub(crate) fn kill_all(&self) {
        let mut later = Later::new();
        {
            let mut st = self.lock();
            st.closed = true;
            st.waiters.close();
            if let Some((_, h)) = st.sizing_wake.take() {
                h.abort();
            }
            for i in 0..st.slots.slots.len() {
                st.slots.slots[i].cancel_backoff();
                if let Some(cell) = st.slots.slots[i].cell() {
                    cell.killer.kill();
                    cell.stop_timer();
                }
                match &st.slots.slots[i].state {
                    SlotState::Starting { task, .. } => task.abort(),
                    SlotState::Idle { .. } => {
                        let SlotState::Idle {
                            worker,
                            cell,
                            timer,
                            ..
                        } = st.slots.set(i, SlotState::Empty)
                        else {
                            unreachable!()
                        };
                        if let Some(t) = timer {
                            t.abort();
                        }
                        later.push(worker);
                        st.slots.set(
                            i,
                            SlotState::Closing {
                                cell,
                                reason: EndReason::PoolClosed,
                            },
                        );
                    }
                    _ => {}
                }
            }
        }
        drop(later);
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    pub(crate) fn default_job_timeout(&self) -> Option<Duration> {
        self.lock().opts.job_timeout
    }

    pub(crate) fn timed_out(&self, slot: usize, after: Duration) {
        self.emit(Event::TimedOut { slot, after });
    }
}

/// The locked state. When dropped it publishes the gauges that changed,
/// releases the lock, and then wakes the jobs handed a worker meanwhile.
pub(crate) struct StateGuard<'a, W> {
    /// `None` only inside `drop`.
    guard: Option<MutexGuard<'a, State<W>>>,
    metrics: &'a PoolMetrics,
    mailbox: &'a Mailbox<W>,
}

impl<W> std::ops::Deref for StateGuard<'_, W> {
    type Target = State<W>;
    fn deref(&self) -> &State<W> {
        self.guard.as_ref().expect("held until dropped")
    }
}

impl<W> std::ops::DerefMut for StateGuard<'_, W> {
    fn deref_mut(&mut self) -> &mut State<W> {
        self.guard.as_mut().expect("held until dropped")
    }
}

impl<W> Drop for StateGuard<'_, W> {
    fn drop(&mut self) {
        let Some(mut guard) = self.guard.take() else {
            return;
        };
        let st = &mut *guard;
        let changes = st.slots.take_changes();
        let waiting = st.waiters.len();
        // Without a recorder every gauge is a no-op: nothing to publish.
        if self.metrics.on && (!changes.is_empty() || waiting != st.published.waiting) {
            self.metrics.publish(
                changes,
                &st.slots.counts,
                (waiting, st.slots.capacity(), st.slots.size),
                &mut st.published,
            );
        }
        let wakes = st.waiters.deliver(self.mailbox);
        drop(guard);
        if let Some((one, more)) = wakes {
            one.wake();
            for waker in more {
                waker.wake();
            }
        }
    }
}

/// What `acquire` gives a job.
pub(crate) enum Acquired<W> {
    WouldQueue,
    Now(Granted<W>),
    /// It waits, under this id.
    Wait(u64),
}

/// The warm-up, on a task of the pool (ADR 0003).
async fn warm_up<W: Worker>(
    me: Weak<Shared<W>>,
    factory: FactoryFn<W>,
    limit: Option<Duration>,
    info: SlotInfo,
    generation: u64,
) {
    let slot = info.slot;
    let started = Instant::now();
    let work = async {
        let mut worker = factory(info)
            .await
            .map_err(|e| (format!("the factory failed: {e}"), Some(e)))?;
        let exited = worker.exited();
        let killer = worker.killer();
        let registered = me
            .upgrade()
            .is_some_and(|s| s.register(slot, generation, killer.clone(), exited, started));
        if !registered {
            killer.kill();
            return Err(("the slot moved on".to_owned(), None));
        }
        worker
            .ready()
            .await
            .map_err(|e| (format!("ready() failed: {e}"), Some(e)))?;
        Ok(worker)
    };
    let result = match limit {
        Some(d) => tokio::time::timeout(d, work)
            .await
            .unwrap_or_else(|_| Err((format!("the warm-up exceeded its {d:?} limit"), None))),
        None => work.await,
    };
    let Some(shared) = me.upgrade() else {
        if let Ok(worker) = result {
            worker.killer().kill();
        }
        return;
    };
    match result {
        Ok(worker) => shared.on_ready(slot, generation, worker, started.elapsed()),
        Err((message, source)) => shared.on_warmup_failed(slot, generation, message, source),
    }
}

async fn watch_exit<W: Worker>(me: Weak<Shared<W>>, slot: usize, generation: u64, exited: Exited) {
    let exit = exited.await;
    if let Some(shared) = me.upgrade() {
        shared.on_exit(slot, generation, exit);
    }
}
