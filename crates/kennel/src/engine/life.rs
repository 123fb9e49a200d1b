//! A worker's life: start, ready, failed warm-up, exit, lifetime and
//! retirement (the rest and back-off after an exit are in [`super::refill`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::effects::{Effects, Warmup};
use super::state::State;
use crate::backoff;
use crate::error::Error;
use crate::event::{Event, RetireReason};
use crate::options::MIN_LIFETIME;
use crate::slot::{EndReason, Live, Record, SlotState, WorkerCell, transitions as t};
use crate::timer::Timer;
use crate::worker::{BoxError, Exit, Exited, Killer, Worker};

/// What the warm-up learned of a worker the factory made.
#[derive(Debug)]
pub(crate) struct Made {
    pub(crate) killer: Killer,
    pub(crate) exited: Exited,
    /// When its warm-up began.
    pub(crate) started: Instant,
    pub(crate) pid: Option<u32>,
    pub(crate) meter: Option<crate::worker::Meter>,
    /// Reads its threads (the oversubscription check).
    pub(crate) threads: Option<crate::worker::Meter<crate::ThreadSample>>,
    /// The running size it was started at.
    pub(crate) size: usize,
    /// The key it was started for (`spawn`).
    pub(crate) key: Option<crate::Key>,
}

impl<W: Worker> State<W> {
    /// Starts a worker in the empty slot `i`, for the job `awaited_by`.
    pub(crate) fn start_slot(&mut self, fx: &mut Effects<W>, i: usize, awaited_by: Option<u64>) {
        // A worker started for no job, in a `spawn` pool, is started for a
        // key kept warm that lacks one, else for the key of the worker it
        // renews.
        let key = match (awaited_by, self.slots.state(i)) {
            (Some(_), _) => None,
            (None, SlotState::Empty { restart_for, .. }) => {
                let renewed = restart_for.clone();
                self.warm_key_wanted().or(renewed)
            }
            (None, _) => self.warm_key_wanted(),
        };
        self.start_slot_for(fx, i, awaited_by, key);
    }

    /// Starts a worker in the empty slot `i`, for the job `awaited_by`,
    /// bound to `key` (`spawn`).
    pub(crate) fn start_slot_for(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        awaited_by: Option<u64>,
        key: Option<crate::Key>,
    ) {
        let Ok(gpu) = self.place_gpu() else {
            self.wait_for_gpu(fx, i, awaited_by);
            return;
        };
        let (warmup, token) = Timer::new();
        let Some(respawn) = self
            .slots
            .apply(i, |s| t::start(s, awaited_by, key.clone(), warmup))
        else {
            return;
        };
        let size = self.slots.size();
        let generation = self.slots.issue(i);
        self.slots.adopt(i, generation);
        if let (Some(gpus), Some(place)) = (&mut self.gpus, &gpu) {
            gpus.hold(i, generation, place.clone());
        }
        fx.warmups.push(Warmup {
            slot: i,
            size,
            generation,
            limit: self.opts.warmup_timeout,
            token,
            key,
            gpu,
        });
        fx.emit(Event::Starting { slot: i });
        if respawn {
            fx.emit(Event::Respawned { slot: i });
        }
    }

    /// The factory made the worker of slot `i`: keep its kill switch, set
    /// its lifetime and watch its exit. False when the slot moved on.
    pub(crate) fn register(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        generation: u64,
        made: Made,
    ) -> bool {
        if self.slots.side_generation(i) == Some(generation) {
            return self.register_side(fx, i, generation, made);
        }
        if self.slots.generation(i) != generation {
            return false;
        }
        let (live, exited) = self.live_of(fx, i, generation, made);
        if self.slots.apply(i, |s| t::register(s, live)).is_none() {
            return false;
        }
        fx.watches.push((i, generation, exited));
        true
    }

    /// What the pool keeps of a worker the factory made for slot `i` with
    /// `generation` (its cell, lifetime and record), and its exit to watch.
    pub(crate) fn live_of(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        generation: u64,
        made: Made,
    ) -> (Live, Exited) {
        let life = self.lifetime(fx, i, generation, made.started);
        let mut record = Record {
            pid: made.pid,
            max_jobs: self.draw_max_jobs(),
            size: made.size,
            ..Record::default()
        };
        if let Some(key) = &made.key {
            // A worker started for a key resumes the key's count of jobs:
            // the one of the worker it replaces warm in this slot, else the
            // one kept when the key was let go.
            let (now, half_life) = (self.now, self.half_life());
            let count = self
                .with_record(i, |r| r.keys.count_of(key, now, half_life))
                .flatten()
                .unwrap_or_else(|| self.let_go.take(key, now, half_life));
            record.keys.add(key, made.started, false, count);
        }
        if let Some(gpus) = &mut self.gpus {
            record.gpu = gpus.made(i, generation, made.pid);
        }
        let cell = WorkerCell::new(
            made.killer,
            made.started,
            made.meter,
            made.pid,
            made.threads,
        );
        let live = Live {
            cell: Arc::new(cell),
            life,
            record,
            spawned_for: made.key,
        };
        (live, made.exited)
    }

    /// The worker of slot `i` is ready.
    pub(crate) fn on_ready(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        generation: u64,
        worker: W,
        warmup: Duration,
    ) {
        if self.slots.side_generation(i) == Some(generation) {
            self.side_ready(fx, i, worker, warmup);
            return;
        }
        let warmed = (self.slots.generation(i) == generation)
            .then(|| self.slots.apply(i, t::warm))
            .flatten();
        let Some(awaited_by) = warmed else {
            fx.kill(worker.killer());
            fx.drops.push(worker);
            return;
        };
        self.ever_ready = true;
        self.key_started(i);
        self.warmups.note(warmup);
        self.note_start_cost(fx, "a worker's warm-up", warmup);
        let about = worker.about().map(Arc::<str>::from);
        self.with_lent_record(i, |r| {
            r.ready_after = Some(warmup);
            r.about = about;
        });
        fx.emit(Event::Ready {
            slot: i,
            pid: worker.pid(),
            warmup,
        });
        self.note_ready(fx);
        if let Some(id) = awaited_by {
            // Its job still waits; it may get this worker or an older
            // job may. Either way it is no longer bound to this slot.
            self.waiters.set_bound(id, None);
        }
        self.place(fx, i, worker, None);
        // It started before a resize.
        self.replace_if_resized(fx, i);
        self.arm_surge_due(fx, i);
        self.kick_startup(fx);
        self.pump(fx);
        // The worker may have gone to a job: spares are counted again.
        self.keep_spares(fx);
    }

    /// The warm-up of slot `i` failed or timed out.
    pub(crate) fn on_warmup_failed(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        generation: u64,
        message: String,
        source: Option<BoxError>,
    ) {
        if self.slots.side_generation(i) == Some(generation) {
            self.side_failed(fx, i, &message);
            return;
        }
        if self.slots.generation(i) != generation {
            return;
        }
        let pid = self.pid_of(i);
        let Some(aborted) = self
            .slots
            .apply(i, |s| t::abort_start(s, EndReason::WarmupFailed))
        else {
            return;
        };
        let awaited_by = self.key_start_failed(fx, i, aborted.key, &message, aborted.awaited_by);
        self.failed_start(fx, i, pid, message, awaited_by, source);
        match aborted.killer {
            // The slot is closing: the back-off starts when the exit is seen.
            Some(killer) => fx.kill(killer),
            None => {
                self.schedule_refill(fx, i);
                self.after_empty(fx);
            }
        }
        self.pump(fx);
    }

    /// The worker of slot `i` ended.
    pub(crate) fn on_exit(&mut self, fx: &mut Effects<W>, i: usize, generation: u64, exit: Exit) {
        if self.slots.side_generation(i) == Some(generation) {
            self.side_exit(fx, i, exit);
            return;
        }
        if self.slots.generation(i) != generation {
            return;
        }
        let Some(cell) = self.slots.state(i).cell().cloned() else {
            return;
        };
        cell.set_dead(exit.clone());
        fx.holders.push(cell.clone());
        fx.ended = true;
        let early = self.now.saturating_duration_since(cell.started) < backoff::EARLY_EXIT;
        if self.slots.state(i).is_lent() {
            // The job learns it through the cell; the slot empties when the
            // lease comes back. Meanwhile the worker is in no count: it
            // has ended.
            self.end_worker(i, t::lent_gone);
            if !self.closed {
                self.crashed(fx, i, cell.pid, exit, early);
            }
            return;
        }
        let Some(ended) = self.end_worker(i, t::exit_seen) else {
            return;
        };
        match ended {
            t::Ended::Starting { awaited_by, key } => {
                fx.emit(Event::Exited {
                    slot: i,
                    pid: cell.pid,
                    exit: exit.clone(),
                    early: true,
                });
                // The same words as a warm-up that saw the end itself.
                let message = format!("not ready: the worker ended its warm-up: {}", exit.status);
                let awaited_by = self.key_start_failed(fx, i, key, &message, awaited_by);
                self.failed_start(fx, i, cell.pid, message, awaited_by, None);
                self.schedule_refill(fx, i);
            }
            t::Ended::Idle(worker) => {
                fx.emit(Event::Exited {
                    slot: i,
                    pid: cell.pid,
                    exit,
                    early,
                });
                fx.drops.push(worker);
                self.count_exit(i, early);
                // A replacement warming beside it takes the slot.
                if !self.swap_in(fx, i) {
                    self.schedule_refill(fx, i);
                }
            }
            t::Ended::Closing(reason) => {
                let ran = self.now.saturating_duration_since(cell.started);
                self.closed_exit(fx, i, reason, exit, ran, cell.pid);
            }
        }
        self.after_empty(fx);
    }

    /// The exit of a worker the pool was ending is seen.
    /// A start that failed: said (`worker:warmup-failed`), counted by the
    /// breaker and as an early exit, and told to the job it was for.
    fn failed_start(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        pid: Option<u32>,
        message: String,
        awaited_by: Option<u64>,
        source: Option<BoxError>,
    ) {
        self.warmup_failed(fx, i, pid, &message);
        if let Some(id) = awaited_by {
            self.waiters.fail(id, Error::warmup(i, message, source));
        }
        *self.slots.early_exits_mut(i) += 1;
    }

    /// Says that the warm-up in slot `i` failed, and counts it for the
    /// crash-loop breaker.
    pub(crate) fn warmup_failed(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        pid: Option<u32>,
        message: &str,
    ) {
        fx.emit(Event::WarmupFailed {
            slot: i,
            pid,
            message: message.to_owned(),
        });
        self.note_failed_start(fx, message);
    }

    fn closed_exit(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        reason: EndReason,
        exit: Exit,
        ran: Duration,
        pid: Option<u32>,
    ) {
        let early = ran < backoff::EARLY_EXIT;
        match reason {
            EndReason::Evicted | EndReason::Retired(_) if !early => {
                // It ran long enough: the slot is healthy.
                *self.slots.early_exits_mut(i) = 0;
            }
            _ => {}
        }
        match reason {
            EndReason::Retired(reason) => {
                // A failed or expired worker is replaced whatever the startup
                // (a failed lease, the lifetime rule); eager startups
                // replace the others too.
                let always = matches!(
                    reason,
                    RetireReason::Failed
                        | RetireReason::Discarded
                        | RetireReason::Lifetime
                        | RetireReason::MaxJobs
                        | RetireReason::MaxMemory
                        | RetireReason::MaxGpuMemory
                        | RetireReason::ProbeFailed
                );
                // The pool's own limits (all of those but a failed or
                // discarded lease) never restart a slot more than once a
                // second, however they are set: a worker they retired
                // younger than that is replaced once it would have been
                // that old (a job that needs the slot still starts one at
                // once).
                let own_limit = !matches!(reason, RetireReason::Failed | RetireReason::Discarded);
                if always && i < self.slots.size() && !self.closed {
                    if own_limit && ran < MIN_LIFETIME {
                        self.rest_until(fx, i, MIN_LIFETIME - ran);
                    } else {
                        self.start_slot(fx, i, None);
                    }
                }
            }
            EndReason::WarmupFailed => self.schedule_refill(fx, i),
            // It ended while its job held it: a crash, though the job gave
            // it back before the exit was seen.
            EndReason::Crashed => self.crashed(fx, i, pid, exit, early),
            EndReason::Evicted | EndReason::PoolClosed => {}
        }
    }

    /// The worker of slot `i` ended while a job held it: report the crash
    /// and the exit, and replace it after its back-off.
    fn crashed(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        pid: Option<u32>,
        exit: Exit,
        early: bool,
    ) {
        fx.emit(Event::Crashed {
            slot: i,
            pid,
            exit: exit.clone(),
        });
        fx.emit(Event::Exited {
            slot: i,
            pid,
            exit,
            early,
        });
        self.count_exit(i, early);
        self.schedule_refill(fx, i);
    }

    fn count_exit(&mut self, i: usize, early: bool) {
        let early_exits = self.slots.early_exits_mut(i);
        *early_exits = if early { *early_exits + 1 } else { 0 };
    }

    /// The process id of the worker in slot `i`, if it has one.
    pub(crate) fn pid_of(&self, i: usize) -> Option<u32> {
        self.slots.state(i).cell().and_then(|c| c.pid)
    }
}
