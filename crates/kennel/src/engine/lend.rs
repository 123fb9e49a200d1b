//! Lending and returning: the handlers a job's lend, its cancel and its
//! lease's return call.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::effects::{Effects, Wake, When};
use super::state::State;
use crate::dispatch::{Choice, Granted, Mailbox, Waiters, startable};
use crate::error::{Error, RejectReason};
use crate::event::{Event, RetireReason};
use crate::eviction::IdleWorker;
use crate::sizing::SizingInput;
use crate::slot::{EndReason, Now, SlotState, WorkerCell, transitions as t};
use crate::timer::Timer;
use crate::worker::Worker;

/// How long the pool waits before it looks again at a start its sizing
/// refused (memory was short) while jobs wait for it.
const START_RETRY: Duration = Duration::from_secs(1);

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

/// What a job asking for a worker gets.
#[derive(Debug)]
pub(crate) enum Acquired<W> {
    /// It would have to queue, and may not.
    WouldQueue,
    Now(Granted<W>),
    /// It waits, under this id.
    Wait(u64),
}

/// A lease coming back.
#[derive(Debug)]
pub(crate) struct Returned<'a, W> {
    pub(crate) slot: usize,
    pub(crate) worker: W,
    pub(crate) cell: &'a Arc<WorkerCell>,
    pub(crate) outcome: Outcome,
    /// How long the job held the worker, if the pool times jobs.
    pub(crate) held: Option<Duration>,
}

impl<W: Worker> State<W> {
    /// The lending order for a new job. With `queue` false, a job that would
    /// have to queue gets [`Acquired::WouldQueue`] (a group tries another
    /// pool).
    pub(crate) fn acquire(
        &mut self,
        fx: &mut Effects<W>,
        queue: bool,
    ) -> Result<Acquired<W>, Error> {
        if self.closed {
            return Err(Error::Closed);
        }
        match self.choose(true) {
            Choice::Idle(i) => {
                let granted = self.lend_idle(i);
                self.auto_grow(fx);
                Ok(Acquired::Now(granted))
            }
            Choice::Starting(i) => {
                let id = self.waiters.push(Some(i));
                self.slots.apply(i, |s| t::await_by(s, Some(id)));
                Ok(Acquired::Wait(id))
            }
            Choice::Start(i) => {
                let id = self.waiters.push(Some(i));
                self.start_slot(fx, i, Some(id));
                Ok(Acquired::Wait(id))
            }
            Choice::Queue if !queue => Ok(Acquired::WouldQueue),
            Choice::Queue => {
                if self.waiters.unbound() >= self.opts.waiting_bound(self.slots.capacity()) {
                    return Err(reject(fx, RejectReason::QueueFull));
                }
                if let Some(limit) = self.opts.max_queue_wait {
                    // Before any job time is known, the job timeout stands in.
                    let mean = self
                        .ewma
                        .or_else(|| self.opts.job_timeout.map(|d| d.as_secs_f64()));
                    if mean.is_some_and(|mean| self.projected(mean) > limit.as_secs_f64()) {
                        return Err(reject(fx, RejectReason::QueueWait));
                    }
                }
                let id = self.waiters.push(None);
                self.retry_refused_start(fx);
                self.hurry_closing(fx);
                Ok(Acquired::Wait(id))
            }
        }
    }

    /// The lending order; `new_worker` false looks only for an idle worker.
    fn choose(&mut self, new_worker: bool) -> Choice {
        let (slots, waiters, sizing) = (&self.slots, &self.waiters, &mut self.sizing);
        self.order
            .choose(slots, self.opts.dispatch, new_worker, || {
                sizing.may_start(&super::state::view_of(slots, waiters, Instant::now()))
            })
    }

    /// Lends the idle worker of slot `i`: the job gets the worker, and the
    /// slot keeps the cell, to kill the worker or see it end while lent.
    fn lend_idle(&mut self, i: usize) -> Granted<W> {
        let (worker, cell) = self
            .slots
            .apply(i, t::lend_idle)
            .expect("the lending order chose an idle slot");
        Granted {
            slot: i,
            worker,
            cell,
            at: None,
        }
    }

    /// Takes the idle worker of slot `i` (running or kept), for
    /// `for_each_idle`.
    pub(crate) fn take_slot(&mut self, i: usize) -> Option<Granted<W>> {
        if self.closed || i >= self.slots.len() {
            return None;
        }
        let (worker, cell) = self.slots.apply(i, t::lend_idle)?;
        Some(Granted {
            slot: i,
            worker,
            cell,
            at: None,
        })
    }

    /// The idle slots now (running and kept).
    pub(crate) fn idle_slots(&self) -> Vec<usize> {
        (0..self.slots.len())
            .filter(|&i| self.slots.state(i).is_idle())
            .collect()
    }

    /// When idle workers drop to `auto_grow_threshold`, starts one more
    /// running slot ahead of demand (pooler's `auto_grow_threshold`).
    fn auto_grow(&mut self, fx: &mut Effects<W>) {
        let Some(threshold) = self.opts.auto_grow_threshold else {
            return;
        };
        let c = self.slots.counts();
        if c.idle + c.starting > threshold {
            return;
        }
        if let Some(i) = startable(&self.slots) {
            if self.sizing.may_start(&self.view()) {
                self.start_slot(fx, i, None);
            }
        }
    }

    /// A waiting job gave up (dropped or timed out): forget it, and hand back
    /// a worker that was granted to it meanwhile.
    pub(crate) fn cancel_wait(&mut self, fx: &mut Effects<W>, id: u64, mailbox: &Mailbox<W>) {
        if let Some(w) = self.waiters.remove(id) {
            if let Some(b) = w.bound {
                self.slots.apply(b, |s| t::await_by(s, None));
            }
        } else if let Some(Ok(g)) = mailbox.take(id) {
            let back = Returned {
                slot: g.slot,
                worker: g.worker,
                cell: &g.cell,
                outcome: Outcome::Returned,
                held: None,
            };
            self.release(fx, back, &mut Now::unread());
        }
        self.pump(fx, None);
    }

    /// Gives waiting jobs what the pool has: idle workers, unawaited starting
    /// workers, empty running slots. `now` is the time if the caller read it.
    pub(crate) fn pump(&mut self, fx: &mut Effects<W>, now: Option<Instant>) {
        while !self.waiters.is_empty() && !self.closed {
            let unbound = self.waiters.unbound() > 0;
            match self.choose(unbound) {
                Choice::Idle(i) => {
                    let g = self.lend_idle(i);
                    self.grant_oldest(g, now);
                }
                Choice::Starting(i) => {
                    let id = oldest_unbound(&self.waiters);
                    self.waiters.set_bound(id, Some(i));
                    self.slots.apply(i, |s| t::await_by(s, Some(id)));
                }
                Choice::Start(i) => {
                    let id = oldest_unbound(&self.waiters);
                    self.waiters.set_bound(id, Some(i));
                    self.start_slot(fx, i, Some(id));
                }
                Choice::Queue => {
                    if unbound {
                        self.retry_refused_start(fx);
                        self.hurry_closing(fx);
                    }
                    return;
                }
            }
        }
    }

    /// Jobs wait while a running slot is empty: the sizing refused to start
    /// a worker there (memory is short). Memory may free without any worker
    /// of this pool returning or ending, so look again in a second.
    fn retry_refused_start(&mut self, fx: &mut Effects<W>) {
        if self.start_retry.is_some() || self.closed || self.waiters.unbound() == 0 {
            return;
        }
        if startable(&self.slots).is_none() {
            return;
        }
        self.start_retry = Some(fx.wake_at(Instant::now() + START_RETRY, Wake::StartRetry));
    }

    /// A job waits and the only free room is a running slot whose worker the
    /// pool is closing gracefully (evicted, expired): a job never waits for a
    /// graceful close, so kill it; its slot empties when the exit is seen.
    fn hurry_closing(&self, fx: &mut Effects<W>) {
        if self.slots.counts().closing == 0 {
            return;
        }
        let closing = self.slots.states(self.slots.size()).find_map(|s| match s {
            SlotState::Closing {
                cell,
                reason: EndReason::Evicted | EndReason::Retired(_),
            } => Some(cell.killer.clone()),
            _ => None,
        });
        if let Some(killer) = closing {
            fx.kill(killer);
        }
    }

    /// Hands a lent worker to the oldest waiting job: a worker that becomes
    /// idle goes to the oldest waiting job first.
    fn grant_oldest(&mut self, mut g: Granted<W>, now: Option<Instant>) {
        g.at = now;
        let (id, waiter) = self
            .waiters
            .take_oldest()
            .expect("a worker is granted only while a job waits");
        if let Some(b) = waiter.bound.filter(|&b| b != g.slot) {
            self.slots.apply(b, |s| t::await_by(s, None));
        }
        self.waiters.grant(id, waiter, Ok(g));
    }

    /// A lease comes back.
    pub(crate) fn release(&mut self, fx: &mut Effects<W>, back: Returned<'_, W>, now: &mut Now) {
        let Returned {
            slot: i,
            worker,
            cell,
            outcome,
            held,
        } = back;
        let ours = match self.slots.state(i) {
            SlotState::Lent { live } => Arc::ptr_eq(&live.cell, cell),
            SlotState::LentGone { cell: c, .. } => Arc::ptr_eq(c, cell),
            _ => false,
        };
        if !ours {
            // The slot moved on (cannot happen by invariant 2); end the worker.
            fx.kill(cell.killer.clone());
            fx.drops.push(worker);
            return;
        }
        if let (Outcome::Returned, Some(held), false) = (outcome, held, cell.is_dead()) {
            fx.job_done = Some(held);
            self.observe_job(held.as_secs_f64());
            if self.sizing_jobs {
                let view = self.view_at(now.get());
                let decision = self
                    .sizing
                    .observe(&view, SizingInput::JobDone { took: held });
                self.apply_sizing(fx, decision);
            }
        }
        if cell.is_dead() {
            // It ended while lent; its exit was handled when seen.
            fx.drops.push(worker);
            self.slots.apply(i, t::return_gone);
            self.after_empty(fx);
            return;
        }
        if !worker.is_alive() {
            // It ended during the job, and the pool's watcher has not seen
            // the exit yet: never lend it again; the exit empties the slot.
            fx.drops.push(worker);
            self.slots.apply(i, |s| t::end_lent(s, EndReason::Crashed));
            return;
        }
        let retire = match outcome {
            Outcome::Retire(reason) => {
                fx.kill(cell.killer.clone());
                fx.drops.push(worker);
                self.slots
                    .apply(i, |s| t::end_lent(s, EndReason::Retired(reason)));
                fx.emit(Event::Retired { slot: i, reason });
                return;
            }
            // Its slot was removed by a reconfiguration.
            Outcome::Returned if i >= self.slots.capacity() => Some(RetireReason::Reconfigured),
            // Never cut short; replaced when it comes back.
            Outcome::Returned if self.live_expired(i, now) => Some(RetireReason::Lifetime),
            Outcome::Returned => None,
        };
        match retire {
            Some(reason) => self.retire_lent(fx, i, worker, reason),
            None => self.place(fx, i, worker, now),
        }
    }

    /// A ready worker is free in slot `i`, whose state is `Lent`: close it,
    /// keep it, give it to the oldest job, or make it idle.
    pub(crate) fn place(&mut self, fx: &mut Effects<W>, i: usize, worker: W, now: &mut Now) {
        let SlotState::Lent { live } = self.slots.state(i) else {
            fx.drops.push(worker);
            return;
        };
        let (expired, cell) = (live.expired_by(now), live.cell.clone());
        if self.closed {
            self.slots
                .apply(i, |s| t::end_lent(s, EndReason::PoolClosed));
            fx.closes.push((worker, cell.killer.clone()));
            return;
        }
        if !self.waiters.is_empty() && i < self.slots.size() {
            // It stays lent, now to the oldest job.
            let g = Granted {
                slot: i,
                worker,
                cell,
                at: None,
            };
            self.grant_oldest(g, now.read());
            return;
        }
        if expired {
            // Its lifetime ended while it warmed up, and no job waits for
            // it: close it and start a fresh one.
            self.retire_lent(fx, i, worker, RetireReason::Lifetime);
            return;
        }
        if i >= self.slots.size() && i >= self.kept_limit {
            // Memory ran short: do not keep it.
            self.retire_lent(fx, i, worker, RetireReason::Memory);
            return;
        }
        // Without an eviction that may evict, nothing reads when it
        // turned idle: the clock is not read for it.
        let since = self.eviction.may_evict().then(|| now.get());
        let evict = match since {
            Some(since) if i < self.slots.size() => self.arm_eviction(fx, i, since, cell.started),
            _ => None,
        };
        let mut worker = Some(worker);
        self.slots
            .apply(i, |s| t::to_idle(s, &mut worker, since, evict));
        fx.drops.extend(worker);
    }

    /// Whether the live worker of slot `i` has outlived its lifetime.
    fn live_expired(&self, i: usize, now: &mut Now) -> bool {
        match self.slots.state(i) {
            SlotState::Lent { live } => live.expired_by(now),
            _ => false,
        }
    }

    /// Asks the eviction when the idle worker of slot `i` goes.
    pub(crate) fn arm_eviction(
        &self,
        fx: &mut Effects<W>,
        i: usize,
        since: Instant,
        started: Instant,
    ) -> Option<Timer> {
        let after = self.eviction.idle(IdleWorker {
            slot: i,
            idle_since: since,
            started,
        })?;
        let wake = Wake::Evict {
            slot: i,
            generation: self.slots.generation(i),
            since,
        };
        Some(fx.wake_on(When::On(after), wake))
    }
}

/// Emits the rejection and gives its error.
fn reject<W>(fx: &mut Effects<W>, reason: RejectReason) -> Error {
    fx.emit(Event::Rejected { reason });
    Error::Rejected { reason }
}

fn oldest_unbound<W>(waiters: &Waiters<W>) -> u64 {
    waiters
        .oldest_unbound()
        .expect("the lending order looks for a new worker only for an unbound job")
}
