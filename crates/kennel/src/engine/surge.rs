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
use super::state::State;
use crate::event::{Event, RetireReason};
use crate::slot::Held;
use crate::slot::{Record, Replacement, Side, SlotState};
use crate::timer::Timer;
use crate::worker::Worker;

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
    /// Runs `f` on the record of slot `i`'s lent worker.
    pub(super) fn with_lent_record<R>(
        &mut self,
        i: usize,
        f: impl FnOnce(&mut Record) -> R,
    ) -> Option<R> {
        self.slots.edit(i, |s| match s {
            SlotState::Ready {
                live,
                held: Held::Lent,
            } => Some(f(&mut live.record)),
            _ => None,
        })
    }

    /// Runs `f` on the record of slot `i`'s ready worker (idle or lent).
    pub(super) fn with_record<R>(
        &mut self,
        i: usize,
        f: impl FnOnce(&mut Record) -> R,
    ) -> Option<R> {
        self.slots.edit(i, |s| match s {
            SlotState::Ready { live, .. } => Some(f(&mut live.record)),
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
        if self
            .with_record(i, |r| r.replacement.surge_refused())
            .unwrap_or(true)
        {
            return Surge::Refused;
        }
        if self.surge_room() == 0 || !self.may_try_start() {
            return self.queue_surge(i, reason);
        }
        // Memory for it is checked as for any start, and a GPU with room
        // (beside the one the worker it replaces holds).
        let gpu = match self.sizing.may_start(&self.view()) {
            true => self.place_gpu(),
            false => Err(()),
        };
        let Ok(gpu) = gpu else {
            fx.emit(Event::SurgeSkipped { slot: i, reason });
            // A later replacement retires it first, whatever the reason.
            self.with_record(i, |r| r.replacement = Replacement::SurgeGivenUp);
            return Surge::Refused;
        };
        let generation = self.slots.issue(i);
        if let (Some(gpus), Some(place)) = (&mut self.gpus, &gpu) {
            gpus.hold(i, generation, place.clone());
        }
        let (warmup, token) = Timer::new();
        self.slots.set_side(i, |_| {
            let side = Side::Warming {
                generation,
                live: None,
                warmup,
                reason,
            };
            (Some(side), ())
        });
        // Not refused (looked at above), so it is marked.
        self.with_record(i, |r| r.replacement.warm_first_for(reason));
        // A worker started for one key is replaced by one for the same key.
        let key = match self.slots.state(i) {
            SlotState::Ready { live, .. } => live.spawned_for.clone(),
            _ => None,
        };
        fx.warmups.push(Warmup {
            slot: i,
            size: self.slots.size(),
            generation,
            limit: self.opts.warmup_timeout,
            token,
            key,
            gpu,
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
        match self.with_record(i, |r| r.replacement.warm_first_for(reason)) {
            Some(true) => Surge::Queued,
            _ => Surge::Refused,
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
            let Some(reason) = self
                .with_record(i, |r| r.replacement.warm_first())
                .flatten()
            else {
                continue;
            };
            self.want_surge(fx, i, reason);
        }
    }

    /// Arms the timer that starts the replacement of slot `i`'s worker ahead
    /// of its lifetime, by the longest warm-up seen.
    pub(crate) fn arm_surge_due(&mut self, fx: &mut Effects<W>, i: usize) {
        let due = match self.slots.state(i) {
            SlotState::Ready { live, .. } if self.opts.max_surge > 0 => live.life.as_ref(),
            _ => None,
        }
        .map(|l| {
            let ahead = self.warmups.ahead();
            let at = l.deadline.checked_sub(ahead).unwrap_or(l.deadline);
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
    /// at the pace it has served them, or sooner when the workers due after
    /// it need the room next ([`lead`](super::lead)).
    pub(crate) fn surge_ahead_of_jobs(&mut self, fx: &mut Effects<W>, i: usize) {
        if self.slots.state(i).is_lent() && self.jobs_lead_reached(i) {
            self.want_surge(fx, i, RetireReason::MaxJobs);
        }
    }

    /// The worker of slot `i` is over a limit whose deadline is unknown
    /// (`max_memory`, a probe it survived): whether it keeps serving while
    /// its replacement warms (false: retire it now, as without a surge).
    pub(crate) fn replace_later(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        reason: RetireReason,
    ) -> bool {
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

    /// Why slot `i`'s lent worker is retired when its job returns, if it
    /// is: its replacement could not warm first (it failed, or a resize
    /// found no room).
    pub(crate) fn retire_when_free(&self, i: usize) -> Option<RetireReason> {
        let SlotState::Ready {
            live,
            held: Held::Lent,
        } = self.slots.state(i)
        else {
            return None;
        };
        live.record.replacement.when_free()
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
}
