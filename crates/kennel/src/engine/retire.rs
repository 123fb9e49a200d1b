//! What the pool retires itself: a worker past its lifetime or its jobs,
//! how it lets a worker go gracefully, and the one way a worker leaves its
//! slot (its keys' counts of jobs kept).

use std::time::Duration;

use tokio::time::Instant;

use super::effects::{Effects, Wake};
use super::state::State;
use crate::Killer;
use crate::event::{Event, RetireReason};
use crate::options::MIN_LIFETIME;
use crate::slot::Held;
use crate::slot::transitions::Step;
use crate::slot::{EndReason, Life, SlotState, transitions as t};
use crate::worker::Worker;

impl<W: Worker> State<W> {
    /// Applies `f`, a transition that ends the worker of slot `i` (the only
    /// way one ends): its record goes with it, but its keys' counts of jobs
    /// are kept, as an unloaded key's are, for the worker that holds them
    /// next.
    pub(crate) fn end_worker<R>(
        &mut self,
        i: usize,
        f: impl FnOnce(SlotState<W>) -> Step<W, R>,
    ) -> Option<R> {
        let held = self
            .with_record(i, |r| r.keys.held().to_vec())
            .unwrap_or_default();
        let ended = self.slots.apply(i, f)?;
        let (now, half_life) = (self.now, self.half_life());
        for k in &held {
            self.let_go.keep(k, now, half_life);
        }
        Some(ended)
    }

    /// A worker's warm-up, or its load of a key (`what`), took `took`: where
    /// that is half of `max_lifetime` or more, workers spend much of their
    /// lives starting, and the pool says so once (`pool:warning`) until
    /// `max_lifetime` changes.
    pub(crate) fn note_start_cost(&mut self, fx: &mut Effects<W>, what: &str, took: Duration) {
        let Some(life) = self.opts.max_lifetime else {
            return;
        };
        if self.short_lifetime_said || took < life / 2 {
            return;
        }
        self.short_lifetime_said = true;
        let message = format!(
            "{what} took {:.1} s, half of max_lifetime ({:.1} s) or more: \
             workers spend much of their lives starting; raise max_lifetime",
            took.as_secs_f64(),
            life.as_secs_f64()
        );
        fx.emit(Event::Warning { message });
    }

    /// The lifetime of the worker of slot `i` that carries `generation` (the
    /// slot's own, or a replacement's beside it) and started at `started`,
    /// by `max_lifetime` with a jitter drawn for it, and its timer.
    pub(crate) fn lifetime(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        generation: u64,
        started: Instant,
    ) -> Option<Life> {
        let life = self.opts.max_lifetime?;
        let j = self.opts.max_lifetime_jitter.as_secs_f64();
        let jitter = if j == 0.0 {
            0.0
        } else {
            use rand::Rng;
            self.rng.random_range(-j..=j)
        };
        // Whatever the jitter drew, a worker lives at least `MIN_LIFETIME`.
        let drawn = (life.as_secs_f64() + jitter).max(MIN_LIFETIME.as_secs_f64());
        let deadline = started + Duration::from_secs_f64(drawn);
        let wake = Wake::Lifetime {
            slot: i,
            generation,
        };
        Some(Life {
            deadline,
            timer: fx.wake_at(deadline, wake),
        })
    }

    /// The jobs a new worker may serve: `max_jobs` with a jitter drawn for
    /// it.
    pub(crate) fn draw_max_jobs(&mut self) -> Option<u64> {
        let n = self.opts.max_jobs?;
        let j = self.opts.max_jobs_jitter;
        if j == 0 {
            return Some(n);
        }
        use rand::Rng;
        // The jitter is below `max_jobs` (checked by `Options::validate`).
        Some(n - j + self.rng.random_range(0..=2 * j))
    }

    /// A worker outlived its lifetime: close it if idle; a lent one is
    /// replaced when it comes back, never cut short.
    pub(crate) fn on_lifetime(&mut self, fx: &mut Effects<W>, i: usize, generation: u64) {
        let expired = match self.slots.state(i) {
            SlotState::Ready {
                live,
                held: Held::Idle { .. },
            } => live.expired_by(self.now),
            _ => false,
        };
        if self.slots.generation(i) == generation && !self.closed && expired {
            self.retire_idle(fx, i, RetireReason::Lifetime);
        }
    }

    /// Retires the idle worker of slot `i`: says why and closes it
    /// gracefully. False when the slot holds no idle worker.
    pub(crate) fn retire_idle(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        reason: RetireReason,
    ) -> bool {
        self.retire_idle_by(fx, i, reason, |s| {
            t::close_idle(s, EndReason::Retired(reason))
        })
    }

    /// Retires the idle worker of slot `i` to start one for `key` in its
    /// place (`spawn`); `false` if it is not idle.
    pub(crate) fn move_idle(&mut self, fx: &mut Effects<W>, i: usize, key: crate::Key) -> bool {
        self.retire_idle_by(fx, i, RetireReason::KeyMoved, |s| t::move_idle(s, key))
    }

    fn retire_idle_by(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        reason: RetireReason,
        step: impl FnOnce(SlotState<W>) -> Step<W, (W, Killer)>,
    ) -> bool {
        let pid = self.pid_of(i);
        let Some(closing) = self.end_worker(i, step) else {
            return false;
        };
        fx.emit(Event::Retired {
            slot: i,
            pid,
            reason,
        });
        fx.closes.push(closing);
        self.replaced(fx, i, reason);
        true
    }

    /// Slot `i`'s worker was retired for `reason`: its replacement, if one
    /// warms beside it, takes the slot; one called off by a
    /// reconfiguration or short memory does not.
    pub(crate) fn replaced(&mut self, fx: &mut Effects<W>, i: usize, reason: RetireReason) {
        if matches!(reason, RetireReason::Reconfigured | RetireReason::Memory) {
            self.cancel_surge(fx, i);
        } else {
            self.swap_in(fx, i);
        }
    }

    /// Retires the lent worker of slot `i` that came back: says why and
    /// closes it gracefully.
    pub(crate) fn retire_lent(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        worker: W,
        reason: RetireReason,
    ) {
        let cell = self.slots.state(i).cell().cloned();
        match (
            self.end_worker(i, |s| t::end_lent(s, EndReason::Retired(reason))),
            cell,
        ) {
            (Some(()), Some(cell)) => {
                fx.emit(Event::Retired {
                    slot: i,
                    pid: cell.pid,
                    reason,
                });
                fx.closes.push((worker, cell.killer.clone()));
                self.replaced(fx, i, reason);
            }
            _ => fx.drops.push(worker),
        }
    }
}
