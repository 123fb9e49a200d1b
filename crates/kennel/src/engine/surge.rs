//! Warm replacement first (`max_surge`, ADR 0040): a worker due for
//! retirement keeps serving while its replacement warms beside it, in the
//! slot's [`Side`], above the capacity; once warm, the replacement takes
//! the slot the moment the old worker is free (idle, or back from its job),
//! and the old one is retired.
//!
//! - Known deadlines start the replacement ahead, by the longest warm-up
//!   the pool has seen lately: a lifetime by a timer, the last of
//!   `max_jobs` by the worker's own pace of jobs, checked as each returns.
//!   The old worker is still never lent past its lifetime nor given more
//!   than its jobs: at the deadline it is retired whatever its replacement
//!   is doing, which then warms in its place.
//! - Unknown ones (`max_memory`, a probe it failed but survived) keep the
//!   old worker serving until its replacement is ready.
//! - At most `max_surge` replacements warm at once; one more waits for
//!   room (the worker's `replace` is set). One that does not fit in memory
//!   is not started (`worker:surge-skipped`): the worker is retired first,
//!   as without a surge.

use std::collections::VecDeque;
use std::time::Duration;

use super::effects::{Effects, Wake, Warmup};
use super::life::Made;
use super::state::State;
use crate::event::{Event, RetireReason};
use crate::slot::transitions::Step;
use crate::slot::{Live, Now, Record, Side, SlotState, WorkerCell};
use crate::timer::Timer;
use crate::worker::{Exit, Worker};

/// The warm-ups the pool has seen lately.
#[derive(Debug, Default)]
pub(crate) struct WarmupsSeen {
    last: VecDeque<Duration>,
}

impl WarmupsSeen {
    const KEPT: usize = 8;

    /// A worker warmed up in `d`.
    pub(crate) fn note(&mut self, d: Duration) {
        if self.last.len() == Self::KEPT {
            self.last.pop_front();
        }
        self.last.push_back(d);
    }

    /// How far ahead of a known deadline a replacement starts: the longest
    /// of the last warm-ups, and a quarter more for their spread (zero
    /// before any).
    pub(crate) fn ahead(&self) -> Duration {
        let longest = self.last.iter().copied().max().unwrap_or_default();
        longest + longest / 4
    }
}

/// What became of a wish to replace a worker warm first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Surge {
    /// Its replacement warms (or is warm) beside it.
    Started,
    /// No room now: it starts when a replacement takes its slot or ends.
    Queued,
    /// No surge: off, the pool closes, no memory for it, or one failed for
    /// this worker. It is retired first, as without a surge.
    Refused,
}

impl<W: Worker> State<W> {
    /// Runs `f` on the record of slot `i`'s ready worker (idle or lent).
    fn with_record<R>(&mut self, i: usize, f: impl FnOnce(&mut Record) -> R) -> Option<R> {
        self.slots.edit(i, |s| match s {
            SlotState::Idle { live, .. } | SlotState::Lent { live } => Some(f(&mut live.record)),
            _ => None,
        })
    }

    /// Replaces slot `i`'s ready worker warm first, for `reason`, if the
    /// options, the room and the memory allow.
    pub(crate) fn want_surge(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        reason: RetireReason,
    ) -> Surge {
        if self.opts.max_surge == 0 || self.closed || i >= self.slots.size() {
            return Surge::Refused;
        }
        match self.slots.side(i) {
            Some(side) if side.is_surge() => return Surge::Started,
            Some(_) => {
                // The worker it replaced is still leaving: wait for its exit.
                return self.queue_surge(i, reason);
            }
            None => {}
        }
        if self.with_record(i, |r| r.no_surge).unwrap_or(true) {
            return Surge::Refused;
        }
        if self.surge_room() == 0 || !self.may_try_start() {
            return self.queue_surge(i, reason);
        }
        // Memory for it is checked as for any start.
        if !self.sizing.may_start(&self.view()) {
            fx.emit(Event::SurgeSkipped { slot: i, reason });
            self.with_record(i, |r| {
                r.no_surge = true;
                r.replace = None;
            });
            return Surge::Refused;
        }
        let generation = self.slots.issue(i);
        let (warmup, token) = Timer::new();
        self.slots.set_side(i, |_| {
            let side = Side::Warming {
                generation,
                live: None,
                warmup,
                reason,
            };
            (Some(Box::new(side)), ())
        });
        self.with_record(i, |r| r.replace = Some(reason));
        fx.add().warmups.push(Warmup {
            slot: i,
            size: self.slots.size(),
            generation,
            limit: self.opts.warmup_timeout,
            token,
        });
        fx.emit(Event::Surging { slot: i, reason });
        Surge::Started
    }

    /// How many more replacements may warm now: a worker a replacement took
    /// the slot of counts until its exit is seen, so the pool never runs
    /// more than capacity + `max_surge` workers.
    fn surge_room(&self) -> usize {
        self.opts
            .max_surge
            .saturating_sub(self.slots.surging() + self.slots.leaving())
    }

    fn queue_surge(&mut self, i: usize, reason: RetireReason) -> Surge {
        let queued = self.with_record(i, |r| {
            if !r.no_surge {
                r.replace = Some(reason);
            }
            !r.no_surge
        });
        if queued == Some(true) {
            Surge::Queued
        } else {
            Surge::Refused
        }
    }

    /// Room for a replacement opened: start those that wait for it.
    pub(crate) fn start_queued_surges(&mut self, fx: &mut Effects<W>) {
        for i in 0..self.slots.size() {
            if self.surge_room() == 0 || self.closed {
                return;
            }
            if self.slots.side(i).is_some() {
                continue;
            }
            let Some(reason) = self.with_record(i, |r| r.replace).flatten() else {
                continue;
            };
            self.want_surge(fx, i, reason);
        }
    }

    /// Arms the timer that starts the replacement of slot `i`'s worker ahead
    /// of its lifetime, by the longest warm-up seen.
    pub(crate) fn arm_surge_due(&mut self, fx: &mut Effects<W>, i: usize) {
        let deadline = match self.slots.state(i) {
            SlotState::Idle { live, .. } | SlotState::Lent { live } => live.life.as_ref(),
            _ => None,
        }
        .map(|l| l.deadline);
        let due = (self.opts.max_surge > 0)
            .then_some(deadline)
            .flatten()
            .map(|d| {
                let at = d.checked_sub(self.warmups.ahead()).unwrap_or(d);
                let wake = Wake::SurgeDue {
                    slot: i,
                    generation: self.slots.generation(i),
                };
                fx.wake_at(at, wake)
            });
        self.with_record(i, |r| r.surge_due = due);
    }

    /// A replacement is due ahead of a lifetime.
    pub(crate) fn on_surge_due(&mut self, fx: &mut Effects<W>, i: usize, generation: u64) {
        if self.slots.generation(i) == generation && !self.closed {
            self.want_surge(fx, i, RetireReason::Lifetime);
        }
    }

    /// A job came back to slot `i`'s worker, which has jobs left: start its
    /// replacement if its last job is due within the longest warm-up seen,
    /// at the pace it has served them.
    pub(crate) fn surge_ahead_of_jobs(&mut self, fx: &mut Effects<W>, i: usize, now: &mut Now) {
        let ahead = self.warmups.ahead();
        let due = match self.slots.state(i) {
            SlotState::Lent { live } if self.slots.side(i).is_none() => {
                let r = &live.record;
                match (r.max_jobs, r.ready_after, r.replace, r.no_surge) {
                    (Some(max), Some(ready_after), None, false) if r.jobs > 0 => {
                        let ready_at = live.cell.started + ready_after;
                        let served = now.get().saturating_duration_since(ready_at);
                        let left = max.saturating_sub(r.jobs);
                        let per_job = served.as_secs_f64() / r.jobs as f64;
                        per_job * left as f64 <= ahead.as_secs_f64()
                    }
                    _ => false,
                }
            }
            _ => false,
        };
        if due {
            self.want_surge(fx, i, RetireReason::MaxJobs);
        }
    }

    /// The worker of slot `i` is over a limit whose deadline is unknown
    /// (`max_memory`, a probe it survived): whether it keeps serving while
    /// its replacement warms (false: retire it now, as without a surge).
    pub(crate) fn replace_later(&mut self, fx: &mut Effects<W>, i: usize, reason: RetireReason) -> bool {
        match self.slots.side(i) {
            // Its replacement is warm: it takes the slot now.
            Some(Side::Warm { .. }) => false,
            _ => self.want_surge(fx, i, reason) != Surge::Refused,
        }
    }

    /// The warm replacement of slot `i`, if one waits for the worker to be
    /// free: why the worker is replaced.
    pub(crate) fn warm_replacement(&self, i: usize) -> Option<RetireReason> {
        match self.slots.side(i) {
            Some(Side::Warm { reason, .. }) => Some(*reason),
            _ => None,
        }
    }

    /// A worker over an unknown deadline whose replacement failed: it is
    /// retired when free.
    pub(crate) fn retire_when_free(&self, i: usize) -> Option<RetireReason> {
        let SlotState::Lent { live } = self.slots.state(i) else {
            return None;
        };
        let r = &live.record;
        r.replace
            .filter(|&reason| r.no_surge && !matches!(reason, RetireReason::Lifetime | RetireReason::MaxJobs))
    }

    /// Slot `i`'s replacement, if it has one, takes the slot: after its
    /// worker was retired (the slot holds it closing) or ended (the slot is
    /// empty). The old worker leaves through the side. False when there is
    /// no replacement.
    pub(crate) fn swap_in(&mut self, fx: &mut Effects<W>, i: usize) -> bool {
        let side = self.slots.set_side(i, |s| match s {
            Some(side) if side.is_surge() => (None, Some(side)),
            other => (other, None),
        });
        let Some(side) = side else {
            return false;
        };
        let old_generation = self.slots.generation(i);
        let (next, generation, warm) = match *side {
            Side::Warming {
                generation,
                live,
                warmup,
                ..
            } => (
                SlotState::Starting {
                    awaited_by: None,
                    live,
                    warmup,
                },
                generation,
                None,
            ),
            Side::Warm {
                generation,
                worker,
                live,
                ..
            } => (SlotState::Lent { live }, generation, Some(worker)),
            Side::Leaving { .. } => unreachable!("only a surge is taken"),
        };
        let old = self
            .slots
            .apply(i, |old| Step::To(next, old))
            .unwrap_or_else(SlotState::new);
        self.slots.adopt(i, generation);
        if let SlotState::Closing { cell, .. } = old {
            let leaving = Side::Leaving {
                generation: old_generation,
                cell,
            };
            self.slots.set_side(i, |_| (Some(Box::new(leaving)), ()));
        }
        if let Some(worker) = warm {
            self.place(fx, i, worker, &mut Now::unread(), None);
            self.arm_surge_due(fx, i);
        }
        self.start_queued_surges(fx);
        self.pump(fx, None);
        true
    }

    /// The factory made slot `i`'s replacement.
    pub(crate) fn register_side(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        generation: u64,
        made: Made,
    ) -> bool {
        let life = self.lifetime_for(fx, i, generation, made.started);
        let max_jobs = self.draw_max_jobs();
        let Made {
            killer,
            exited,
            started,
            pid,
            meter,
        } = made;
        let registered = self.slots.set_side(i, |s| match s.map(|b| *b) {
            Some(Side::Warming {
                generation,
                live: None,
                warmup,
                reason,
            }) => {
                let live = Live {
                    cell: std::sync::Arc::new(WorkerCell::new(killer, started, meter, pid)),
                    life,
                    record: Box::new(Record {
                        pid,
                        max_jobs,
                        ..Record::default()
                    }),
                };
                let side = Side::Warming {
                    generation,
                    live: Some(live),
                    warmup,
                    reason,
                };
                (Some(Box::new(side)), true)
            }
            other => (other.map(Box::new), false),
        });
        if registered {
            fx.add().watches.push((i, generation, exited));
        }
        registered
    }

    /// Slot `i`'s replacement is ready: it takes the slot now if the worker
    /// is idle, else when it comes back.
    pub(crate) fn side_ready(&mut self, fx: &mut Effects<W>, i: usize, worker: W, warmup: Duration) {
        let about = worker.about().map(std::sync::Arc::<str>::from);
        let pid = worker.pid();
        let warm = self.slots.set_side(i, |s| match s.map(|b| *b) {
            Some(Side::Warming {
                generation,
                live: Some(mut live),
                reason,
                ..
            }) => {
                live.record.ready_after = Some(warmup);
                live.record.about = about;
                let side = Side::Warm {
                    generation,
                    worker,
                    live,
                    reason,
                };
                (Some(Box::new(side)), Ok(reason))
            }
            other => (other.map(Box::new), Err(worker)),
        });
        let reason = match warm {
            Ok(reason) => reason,
            Err(worker) => {
                fx.kill(worker.killer());
                fx.add().drops.push(worker);
                return;
            }
        };
        self.warmups.note(warmup);
        self.ever_ready = true;
        fx.emit(Event::Ready {
            slot: i,
            pid,
            warmup,
        });
        self.note_ready(fx);
        match self.slots.state(i) {
            SlotState::Idle { .. } => {
                self.retire_idle(fx, i, reason);
            }
            // Its worker ended meanwhile: it takes the empty slot.
            SlotState::Empty { .. } => {
                self.swap_in(fx, i);
            }
            _ => {}
        }
    }

    /// Slot `i`'s replacement did not warm up, or its worker ended: the old
    /// worker stays, and is retired first when its time comes.
    pub(crate) fn side_failed(&mut self, fx: &mut Effects<W>, i: usize, message: String) {
        let pid = self.slots.side(i).and_then(Side::cell).and_then(|c| c.pid);
        let gone = self.slots.set_side(i, |s| match s.map(|b| *b) {
            Some(Side::Warming {
                generation, live, ..
            }) => {
                let leaving = live.map(|l| {
                    fx.kill(l.cell.killer.clone());
                    Box::new(Side::Leaving {
                        generation,
                        cell: l.cell,
                    })
                });
                (leaving, true)
            }
            other => (other.map(Box::new), false),
        });
        if !gone {
            return;
        }
        fx.emit(Event::WarmupFailed {
            slot: i,
            pid,
            message: message.clone(),
        });
        self.note_failed_start(fx, &message);
        self.give_up_surge(fx, i);
    }

    /// The worker of slot `i` will get no replacement warm first: retire it
    /// now if its limit is an unknown deadline and it is idle (a lent one
    /// is retired when it comes back).
    fn give_up_surge(&mut self, fx: &mut Effects<W>, i: usize) {
        let reason = self
            .with_record(i, |r| {
                r.no_surge = true;
                if matches!(r.replace, Some(RetireReason::Lifetime | RetireReason::MaxJobs)) {
                    r.replace = None;
                }
                r.replace
            })
            .flatten();
        if let (Some(reason), true) = (reason, self.slots.state(i).is_idle()) {
            self.retire_idle(fx, i, reason);
        }
        self.start_queued_surges(fx);
    }

    /// The exit of a worker of slot `i`'s side is seen.
    pub(crate) fn side_exit(&mut self, fx: &mut Effects<W>, i: usize, exit: Exit) {
        fx.add().ended = true;
        let was = self.slots.set_side(i, |s| (None, s));
        let Some(side) = was else {
            return;
        };
        if let Some(cell) = side.cell() {
            cell.set_dead(exit.clone());
        }
        match *side {
            Side::Leaving { .. } => {}
            Side::Warming { live, .. } => {
                let pid = live.as_ref().and_then(|l| l.cell.pid);
                let message = format!("not ready: the worker ended its warm-up: {}", exit.status);
                fx.emit(Event::WarmupFailed {
                    slot: i,
                    pid,
                    message: message.clone(),
                });
                self.note_failed_start(fx, &message);
                self.give_up_surge(fx, i);
            }
            Side::Warm { worker, live, .. } => {
                fx.emit(Event::Exited {
                    slot: i,
                    pid: live.cell.pid,
                    exit,
                    early: true,
                });
                fx.add().drops.push(worker);
                self.give_up_surge(fx, i);
            }
        }
        self.start_queued_surges(fx);
    }

    /// Calls off slot `i`'s replacement (a close, a smaller size, a lower
    /// `max_surge`): its worker closes through the side.
    pub(crate) fn cancel_surge(&mut self, fx: &mut Effects<W>, i: usize) {
        if !self.slots.side(i).is_some_and(Side::is_surge) {
            return;
        }
        self.slots.set_side(i, |s| match s.map(|b| *b) {
            Some(Side::Warming {
                generation, live, ..
            }) => {
                let leaving = live.map(|l| {
                    fx.kill(l.cell.killer.clone());
                    Box::new(Side::Leaving {
                        generation,
                        cell: l.cell,
                    })
                });
                (leaving, ())
            }
            Some(Side::Warm {
                generation,
                worker,
                live,
                ..
            }) => {
                fx.add().closes.push((worker, live.cell.killer.clone()));
                let leaving = Side::Leaving {
                    generation,
                    cell: live.cell,
                };
                (Some(Box::new(leaving)), ())
            }
            other => (other.map(Box::new), ()),
        });
        self.with_record(i, |r| r.replace = None);
    }

    /// Calls off replacements above `max_surge` (the highest slots first)
    /// and starts those that wait, when it was raised.
    pub(crate) fn fit_surges(&mut self, fx: &mut Effects<W>) {
        for i in (0..self.slots.len()).rev() {
            if self.slots.surging() <= self.opts.max_surge {
                break;
            }
            self.cancel_surge(fx, i);
        }
        for i in 0..self.slots.len() {
            self.arm_surge_due(fx, i);
        }
        self.start_queued_surges(fx);
    }

    /// Kills the workers of the sides (the pool is dropped, or the grace
    /// of its close is over).
    pub(crate) fn kill_sides(&self, fx: &mut Effects<W>) {
        for i in 0..self.slots.len() {
            if let Some(cell) = self.slots.side(i).and_then(Side::cell) {
                fx.kill(cell.killer.clone());
            }
        }
    }

    /// Whether any slot holds a second worker.
    pub(crate) fn any_side(&self) -> bool {
        (0..self.slots.len()).any(|i| self.slots.side(i).is_some())
    }
}
