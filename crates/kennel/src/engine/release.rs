//! A lease's return: the worker goes back to the pool, to the oldest
//! waiting job, or away.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::effects::{Effects, Wake, When};
use super::state::State;
use crate::dispatch::{Granted, JobLimits};
use crate::event::{Event, RetireReason};
use crate::eviction::IdleWorker;
use crate::sizing::SizingInput;
use crate::slot::Held;
use crate::slot::{EndReason, SlotState, WorkerCell, transitions as t};
use crate::timer::Timer;
use crate::worker::Worker;

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

/// A lease coming back.
#[derive(Debug)]
pub(crate) struct Returned<'a, W> {
    pub(crate) slot: usize,
    pub(crate) worker: W,
    pub(crate) cell: &'a Arc<WorkerCell>,
    pub(crate) outcome: Outcome,
    /// How long the job held the worker, if the pool times jobs.
    pub(crate) held: Option<Duration>,
    /// Whether a job had it (not a lend given back unused, nor
    /// `for_each_idle`): it counts toward `max_jobs`.
    pub(crate) job: bool,
    /// The worker's memory, sampled when it came back (with `max_memory`).
    pub(crate) memory: Option<u64>,
    /// The job's key: the worker used it now.
    pub(crate) key: Option<&'a crate::Key>,
    /// The job's tenant, for a worker a job had or was handed: one job of
    /// that tenant fewer holds a worker.
    pub(crate) tenant: Option<&'a Option<crate::Tenant>>,
    /// How the worker used its threads, judged at this return (once per
    /// worker).
    pub(crate) threads: Option<crate::ThreadUse>,
}

impl<W: Worker> State<W> {
    /// A lease comes back.
    pub(crate) fn release(&mut self, fx: &mut Effects<W>, back: Returned<'_, W>) {
        let Returned {
            slot: i,
            worker,
            cell,
            outcome,
            held,
            job,
            memory,
            key,
            tenant,
            threads,
        } = back;
        if let Some(tenant) = tenant {
            self.waiters.shares.release(tenant);
        }
        if let Some(usage) = threads {
            self.note_threads(fx, i, cell, usage);
        }
        // One look at the slot: whether the lease is its own, and what its
        // return decides on (the job counted with it).
        let now = self.now;
        let ours = self.slots.edit(i, |s| match s {
            SlotState::Ready {
                live,
                held: Held::Lent,
            } if Arc::ptr_eq(&live.cell, cell) => Some(Look {
                served_all: job && count_job(live, held, key, now),
                replacing: live.record.replacement.reason().is_some(),
                expired: live.expired_by(now),
            }),
            SlotState::LentGone { cell: c, .. } if Arc::ptr_eq(c, cell) => Some(Look::default()),
            _ => None,
        });
        let Some(look) = ours else {
            // The slot moved on (cannot happen by invariant 2); end the worker.
            fx.kill(cell.killer.clone());
            fx.drops.push(worker);
            return;
        };
        if let (Outcome::Returned, Some(held), false) = (outcome, held, cell.is_dead()) {
            fx.job_done = Some(held);
            self.observe_job(held.as_secs_f64());
            if self.sizing_jobs {
                let view = self.view();
                let decision = self
                    .sizing
                    .observe(&view, SizingInput::JobDone { took: held });
                self.apply_sizing(fx, decision);
            }
        }
        // Back from its probe: idle again as idle since before it.
        let idle_since = if job { None } else { self.end_probe(i) };
        let over_memory = self.opts.max_memory.is_some() && self.note_memory(i, memory);
        let over_gpu = self.over_gpu_memory(i);
        if cell.is_dead() {
            // It ended while lent; its exit was handled when seen.
            fx.drops.push(worker);
            self.slots.apply(i, t::return_gone);
            // A replacement warming beside it takes the slot.
            if !self.swap_in(fx, i) {
                self.after_empty(fx);
            }
            return;
        }
        if !worker.is_alive() {
            // It ended during the job, and the pool's watcher has not seen
            // the exit yet: never lend it again; the exit empties the slot.
            fx.drops.push(worker);
            self.end_worker(i, |s| t::end_lent(s, EndReason::Crashed));
            return;
        }
        let retire = match outcome {
            Outcome::Retire(reason) => {
                fx.kill(cell.killer.clone());
                fx.drops.push(worker);
                self.end_worker(i, |s| t::end_lent(s, EndReason::Retired(reason)));
                fx.emit(Event::Retired {
                    slot: i,
                    pid: cell.pid,
                    reason,
                });
                self.replaced(fx, i, reason);
                return;
            }
            // Its slot was removed by a reconfiguration.
            Outcome::Returned if i >= self.slots.capacity() => Some(RetireReason::Reconfigured),
            // Never cut short; replaced when it comes back.
            Outcome::Returned if look.expired => Some(RetireReason::Lifetime),
            Outcome::Returned if look.served_all => Some(RetireReason::MaxJobs),
            // Its replacement is warm: it takes the slot now.
            Outcome::Returned if look.replacing && self.warm_replacement(i).is_some() => {
                self.warm_replacement(i)
            }
            Outcome::Returned if over_memory => {
                (!self.replace_later(fx, i, RetireReason::MaxMemory))
                    .then_some(RetireReason::MaxMemory)
            }
            Outcome::Returned if over_gpu => {
                (!self.replace_later(fx, i, RetireReason::MaxGpuMemory))
                    .then_some(RetireReason::MaxGpuMemory)
            }
            // Over an unknown deadline, and its replacement failed.
            Outcome::Returned if look.replacing && self.retire_when_free(i).is_some() => {
                self.retire_when_free(i)
            }
            Outcome::Returned => {
                if job && self.opts.max_surge > 0 && self.opts.max_jobs.is_some() {
                    self.surge_ahead_of_jobs(fx, i);
                }
                None
            }
        };
        match retire {
            Some(reason) => self.retire_lent(fx, i, worker, reason),
            None => self.place(fx, i, worker, idle_since),
        }
        self.keep_spares(fx);
    }

    /// A ready worker is free in slot `i`, whose state is `Lent`: close it,
    /// keep it, give it to the oldest job, or make it idle.
    /// `idle_since`: for a worker back from its probe, when it turned idle.
    pub(crate) fn place(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        worker: W,
        idle_since: Option<Instant>,
    ) {
        let SlotState::Ready {
            live,
            held: Held::Lent,
        } = self.slots.state(i)
        else {
            fx.drops.push(worker);
            return;
        };
        let (expired, started) = (live.expired_by(self.now), live.cell.started);
        if self.closed {
            let killer = live.cell.killer.clone();
            self.end_worker(i, |s| t::end_lent(s, EndReason::PoolClosed));
            fx.closes.push((worker, killer));
            return;
        }
        // Waiting keyed jobs take it through the keyed order, from idle.
        let next = (i < self.slots.size() && !self.waiters.any_keyed())
            .then(|| self.waiters.next(false))
            .flatten();
        if let Some(id) = next {
            // It stays lent, now to the job the fair shares put first.
            let g = Granted::new(i, worker, live.cell.clone(), JobLimits::of(&self.opts));
            self.arm_slow(fx, g.slot);
            self.grant_to(id, g);
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
        // Without an eviction that may evict or probes, nothing reads when
        // it turned idle.
        let since = idle_since.or_else(|| self.reads_idle_time().then_some(self.now));
        let evict = match since {
            Some(since) if i < self.slots.size() => self.arm_eviction(fx, i, since, started),
            _ => None,
        };
        match self.slots.apply(i, |s| t::to_idle(s, worker, since, evict)) {
            Some(Err(worker)) => fx.drops.push(worker),
            _ => self.probe_in_time(fx, i),
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

/// What a return decides on, read in its one look at the slot.
#[derive(Debug, Default, Clone, Copy)]
struct Look {
    /// The worker has served the jobs it may (`max_jobs`).
    served_all: bool,
    /// A replacement is on its way for it, or waits for room to (`max_surge`).
    replacing: bool,
    /// It has outlived its lifetime.
    expired: bool,
}

impl<W: Worker> State<W> {
    /// Records how the worker of slot `i` used its threads, and says so
    /// when it oversubscribes them.
    fn note_threads(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        cell: &Arc<WorkerCell>,
        usage: crate::ThreadUse,
    ) {
        let pid = self.slots.edit(i, |s| {
            let live = s.live_mut().filter(|l| Arc::ptr_eq(&l.cell, cell))?;
            live.record.threads = Some(usage);
            Some(live.record.pid)
        });
        if let Some(pid) = pid.filter(|_| usage.oversubscribed()) {
            fx.emit(Event::Oversubscribed {
                slot: i,
                pid,
                usage,
            });
        }
    }
}

/// Counts a job served by a lent worker (and ends its slow-job timer);
/// whether it has now served all it may.
fn count_job(
    live: &mut crate::slot::Live,
    held: Option<Duration>,
    key: Option<&crate::Key>,
    now: Instant,
) -> bool {
    if let Some(key) = key {
        live.record.keys.mark_used(key, now, None);
    }
    live.record.jobs += 1;
    live.record.last_job = held.or(live.record.last_job);
    live.record.slow = None;
    live.served_all()
}
