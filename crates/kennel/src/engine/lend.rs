//! Lending and returning: the handlers a job's lend, its cancel and its
//! lease's return call.

use std::time::Duration;

use super::effects::{Effects, Wake};
use super::release::{Outcome, Returned};
use super::state::State;
use crate::dispatch::{Ask, Choice, Class, Grant, Granted, JobLimits, Waiting, startable};
use crate::error::{Error, RejectReason};
use crate::event::Event;
use crate::key::Key;
use crate::slot::{EndReason, SlotState, transitions as t};
use crate::worker::Worker;

/// How long the pool waits before it looks again at a start its sizing
/// refused (memory was short) while jobs wait for it.
const START_RETRY: Duration = Duration::from_secs(1);

/// The most a key's load is charged to a tenant, in job times.
const MAX_LOAD_COST: f64 = 100.0;

/// A lend of the slot the lending order found idle.
const CHOSE_IDLE: &str = "the lending order chose an idle slot";

/// What a job asking for a worker gets.
#[derive(Debug)]
pub(crate) enum Acquired<W> {
    /// It would have to queue, and may not.
    WouldQueue,
    Now(Granted<W>),
    /// It waits: for its worker, handed through `Waiting`.
    Wait(Waiting<W>),
}

impl<W: Worker> State<W> {
    /// The lending order for a new job. With `queue` false, a job that would
    /// have to queue gets [`Acquired::WouldQueue`] (a group tries another
    /// pool).
    pub(crate) fn acquire(
        &mut self,
        fx: &mut Effects<W>,
        queue: bool,
        ask: Ask,
    ) -> Result<Acquired<W>, Error> {
        let Ask { key, class } = ask;
        if let Some(key) = key {
            return self.acquire_keyed(fx, queue, key, &class);
        }
        if self.closed {
            return Err(Error::Closed);
        }
        let choice = match self.choose(true) {
            // A tenant at its `max_running` waits, whatever is free.
            _ if !self.waiters.shares.may_run(class.tenant.as_ref()) => Choice::Queue,
            // A tripped breaker starts trials, not workers for each job.
            Choice::Start(_) if !self.job_may_start() => Choice::Queue,
            choice => choice,
        };
        match choice {
            Choice::Idle(i) if self.opts.probe_on_lend => {
                // The job waits for the worker's probe, then gets it (or,
                // if it fails, the next free worker).
                let waiting = self.waiters.push(None, &class);
                self.probe_slot(fx, i, None);
                Ok(Acquired::Wait(waiting))
            }
            Choice::Idle(i) => {
                let mut granted = self.take_slot(i).expect(CHOSE_IDLE);
                self.charge(&class, &mut granted, false);
                self.arm_slow(fx, i);
                // When idle workers drop to `auto_grow_threshold`, one
                // more running slot starts ahead of demand.
                if let Some(threshold) = self.opts.auto_grow_threshold {
                    self.start_spares(fx, threshold.saturating_add(1), 1);
                }
                self.keep_spares(fx);
                Ok(Acquired::Now(granted))
            }
            Choice::Starting(i) => {
                let waiting = self.waiters.push(Some(i), &class);
                let id = waiting.id;
                self.slots.apply(i, |s| t::await_by(s, Some(id)));
                Ok(Acquired::Wait(waiting))
            }
            Choice::Start(i) => {
                let waiting = self.waiters.push(Some(i), &class);
                self.start_slot(fx, i, Some(waiting.id));
                Ok(Acquired::Wait(waiting))
            }
            Choice::Queue => self.enqueue(fx, queue, None, &class),
        }
    }

    /// A job of `class` gets `g`: its tenant is charged the job (and the
    /// key's load the worker does first, in job times), and holds one more
    /// worker. `waited`: the job came from the queue.
    pub(super) fn charge(&mut self, class: &Class, g: &mut Granted<W>, waited: bool) {
        let load = match (&g.load, self.load_ewma, self.ewma) {
            (None, ..) => 0.0,
            (Some(_), Some(load), Some(job)) if job > 0.0 => (load / job).min(MAX_LOAD_COST),
            (Some(_), ..) => 1.0,
        };
        self.waiters.shares.grant(class, 1.0 + load, waited);
        g.tenant.clone_from(&class.tenant);
        if let Some(key) = &g.key {
            let tenant = class.tenant.as_ref();
            self.with_record(g.slot, |r| r.keys.set_tenant(key, tenant));
        }
    }

    /// A job that found nothing now waits in the queue (with its key), if
    /// it may and the queue's bounds admit it.
    pub(super) fn enqueue(
        &mut self,
        fx: &mut Effects<W>,
        queue: bool,
        key: Option<Key>,
        class: &Class,
    ) -> Result<Acquired<W>, Error> {
        if self.broken() {
            return Err(self.unavailable());
        }
        if !queue {
            return Ok(Acquired::WouldQueue);
        }
        let tenant = class.tenant.as_ref();
        if !self.waiters.shares.may_queue(tenant) {
            // Its own projected wait, at the mean job time (a second
            // before one is measured).
            let mean = self.ewma.unwrap_or(1.0);
            let wait = self
                .waiters
                .shares
                .projected(tenant, mean, self.slots.capacity());
            fx.emit(Event::Rejected {
                reason: RejectReason::TenantLimit,
            });
            return Err(Error::TenantLimit {
                tenant: class.tenant.clone(),
                retry_after: Duration::try_from_secs_f64(wait).unwrap_or(Duration::MAX),
            });
        }
        if self.waiters.unbound() >= self.opts.waiting_bound(self.slots.capacity()) {
            return Err(reject(fx, RejectReason::QueueFull));
        }
        // Only a measured mean job time rejects: before a first job
        // comes back, a cold pool accepts what `max_waiting` admits.
        if let (Some(limit), Some(mean)) = (self.opts.max_queue_wait, self.ewma)
            && self.projected(mean) > limit.as_secs_f64()
        {
            return Err(reject(fx, RejectReason::QueueWait));
        }
        let keyed = key.map(|k| self.key_timer(fx, k));
        let waiting = self.waiters.push_keyed(None, keyed, class);
        self.retry_refused_start(fx);
        self.hurry_closing(fx);
        Ok(Acquired::Wait(waiting))
    }

    /// The lending order; `new_worker` false looks only for an idle worker.
    pub(super) fn choose(&mut self, new_worker: bool) -> Choice {
        let (slots, waiters, sizing, now) =
            (&self.slots, &self.waiters, &mut self.sizing, self.now);
        let gpus = &mut self.gpus;
        self.order
            .choose(slots, self.opts.dispatch, new_worker, || {
                sizing.may_start(&super::state::view_of(slots, waiters, now))
                    && super::gpus::gpu_has_room(gpus, slots)
            })
    }

    /// Takes the idle worker of slot `i` (running or kept): the job gets the
    /// worker, and the slot keeps the cell, to kill the worker or see it end
    /// while lent.
    pub(crate) fn take_slot(&mut self, i: usize) -> Option<Granted<W>> {
        if self.closed || i >= self.slots.len() {
            return None;
        }
        let (worker, cell) = self.slots.apply(i, t::lend_idle)?;
        Some(Granted::new(i, worker, cell, JobLimits::of(&self.opts)))
    }

    /// The idle slots now (running and kept).
    pub(crate) fn idle_slots(&self) -> Vec<usize> {
        (0..self.slots.len())
            .filter(|&i| self.slots.state(i).is_idle())
            .collect()
    }

    /// Starts workers in empty running slots while fewer than `min_idle`
    /// are idle or starting.
    pub(crate) fn keep_spares(&mut self, fx: &mut Effects<W>) {
        if let Some(min) = self.opts.min_idle {
            self.start_spares(fx, min, usize::MAX);
        }
    }

    /// Starts at most `most` workers in empty running slots while fewer
    /// than `want` are idle or starting, as the sizing allows.
    fn start_spares(&mut self, fx: &mut Effects<W>, want: usize, most: usize) {
        for _ in 0..most {
            let c = self.slots.counts();
            if self.closed || self.tripped() || c.idle + c.starting >= want {
                return;
            }
            let Some(i) = startable(&self.slots) else {
                return;
            };
            if !self.may_start_worker() {
                return;
            }
            self.start_slot(fx, i, None);
        }
    }

    /// Arms the `slow_job` timer of the worker a job just got in slot `i`.
    pub(crate) fn arm_slow(&mut self, fx: &mut Effects<W>, i: usize) {
        let Some(after) = self.opts.slow_job else {
            return;
        };
        let wake = Wake::Slow {
            slot: i,
            generation: self.slots.generation(i),
        };
        let timer = fx.wake_at(self.now + after, wake);
        self.with_lent_record(i, |r| r.slow = Some(timer));
    }

    /// The job on the worker of slot `i` has run past `slow_job`.
    pub(crate) fn on_slow(&mut self, fx: &mut Effects<W>, i: usize, generation: u64) {
        if self.slots.generation(i) != generation {
            return;
        }
        let fired = self.with_lent_record(i, |r| r.slow.take().is_some());
        if let (Some(true), Some(running_for)) = (fired, self.opts.slow_job) {
            fx.emit(Event::SlowJob {
                slot: i,
                pid: self.pid_of(i),
                running_for,
            });
        }
    }

    /// A waiting job gave up (dropped or timed out): forget it, and hand back
    /// what it was handed meanwhile (`handed`, taken from its hand-over).
    pub(crate) fn cancel_wait(&mut self, fx: &mut Effects<W>, id: u64, handed: Option<Grant<W>>) {
        if let Some(b) = self.waiters.remove(id).and_then(|w| w.bound) {
            self.slots.apply(b, |s| t::await_by(s, None));
        }
        match handed {
            Some(Ok(g)) => self.take_back(fx, g),
            _ => self.pump(fx),
        }
    }

    /// A worker handed to a job that gave up before it took it comes back
    /// unused: to the next waiting job, or idle.
    pub(crate) fn take_back(&mut self, fx: &mut Effects<W>, g: Granted<W>) {
        if let Some(load) = &g.load {
            self.undo_load(g.slot, load);
        }
        let back = Returned {
            slot: g.slot,
            worker: g.worker,
            cell: &g.cell,
            outcome: Outcome::Returned,
            held: None,
            job: false,
            memory: None,
            key: None,
            tenant: Some(&g.tenant),
            threads: None,
        };
        self.release(fx, back);
        self.pump(fx);
    }

    /// Gives waiting jobs what the pool has: idle workers, unawaited starting
    /// workers, empty running slots.
    pub(crate) fn pump(&mut self, fx: &mut Effects<W>) {
        if self.waiters.any_keyed() {
            self.pump_keyed(fx);
            self.arm_guard_lapse(fx);
            if self.waiters.unbound() > 0 {
                self.retry_refused_start(fx);
                self.hurry_closing(fx);
            }
        } else {
            self.pump_fifo(fx);
        }
        self.keep_keys_warm(fx);
    }

    /// The pump of a queue without keyed jobs: the lending order for the
    /// job the fair shares put first, then the next.
    fn pump_fifo(&mut self, fx: &mut Effects<W>) {
        while let Some(first) = self.waiters.next(false) {
            if self.closed || self.jobs_covered_by_probes() {
                // The freed workers go to them when their probes pass.
                return;
            }
            let unbound = self.waiters.next(true);
            match self.choose(unbound.is_some()) {
                Choice::Idle(i) if self.opts.probe_on_lend => self.probe_slot(fx, i, None),
                Choice::Idle(i) => {
                    let g = self.take_slot(i).expect(CHOSE_IDLE);
                    self.arm_slow(fx, g.slot);
                    self.grant_to(first, g);
                }
                Choice::Starting(i) => {
                    let id = unbound.expect(UNBOUND);
                    self.waiters.set_bound(id, Some(i));
                    self.slots.apply(i, |s| t::await_by(s, Some(id)));
                }
                Choice::Start(i) if self.job_may_start() => {
                    let id = unbound.expect(UNBOUND);
                    self.waiters.set_bound(id, Some(i));
                    self.start_slot(fx, i, Some(id));
                }
                Choice::Start(_) | Choice::Queue => {
                    if unbound.is_some() {
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
        let none_empty = startable(&self.slots).is_none();
        if self.start_retry.is_some() || self.closed || self.waiters.unbound() == 0 || none_empty {
            return;
        }
        self.start_retry = Some(fx.wake_at(self.now + START_RETRY, Wake::StartRetry));
    }

    /// A job waits and the only free room is a running slot whose worker the
    /// pool is closing gracefully (evicted, expired): a job never waits for a
    /// graceful close, so kill it; its slot empties when the exit is seen.
    fn hurry_closing(&self, fx: &mut Effects<W>) {
        let closing = self.slots.states(self.slots.size()).find_map(|s| match s {
            SlotState::Closing {
                cell,
                reason: EndReason::Evicted | EndReason::Retired(_),
                ..
            } => Some(cell.killer.clone()),
            _ => None,
        });
        fx.kills.extend(closing);
    }

    /// Hands a lent worker to waiting job `id` (its `slow_job` timer is
    /// armed by the caller).
    pub(super) fn grant_to(&mut self, id: u64, g: Granted<W>) {
        if let Some(waiter) = self.waiters.remove(id) {
            self.hand(waiter, g);
        }
    }

    fn hand(&mut self, waiter: crate::dispatch::Waiter<W>, mut g: Granted<W>) {
        g.at = Some(self.now);
        self.charge(&waiter.class, &mut g, true);
        if let Some(b) = waiter.bound.filter(|&b| b != g.slot) {
            self.slots.apply(b, |s| t::await_by(s, None));
        }
        self.waiters.grant(waiter, Ok(g));
    }
}

/// Emits the rejection and gives its error.
pub(super) fn reject<W>(fx: &mut Effects<W>, reason: RejectReason) -> Error {
    fx.emit(Event::Rejected { reason });
    Error::Rejected { reason }
}

/// A new worker is looked for only for a job bound to none.
const UNBOUND: &str = "the lending order looks for a new worker only for an unbound job";
