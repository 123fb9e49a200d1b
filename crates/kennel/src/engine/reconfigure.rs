//! Reconfiguration: a patch of the options, a new eviction or sizing, and
//! what the pool does about them.

use super::effects::Effects;
use super::state::State;
use crate::error::{Error, RejectReason};
use crate::event::{Event, RetireReason};
use crate::reconfig::{Action, Reconfig};
use crate::slot::Held;
use crate::slot::{EndReason, SlotState, transitions as t};
use crate::worker::Worker;

impl<W: Worker> State<W> {
    /// Applies a reconfiguration and says what it did. Nothing changes on
    /// error.
    pub(crate) fn reconfigure(
        &mut self,
        fx: &mut Effects<W>,
        mut r: Reconfig,
    ) -> Result<Vec<Action>, Error> {
        if self.closed {
            return Err(Error::Closed);
        }
        let opts = r.patch(&self.opts);
        opts.validate()?;
        if opts.gpus_per_worker.is_some() != self.gpus.is_some() {
            return Err(crate::BuildError::new(
                "gpus_per_worker",
                "placing workers on GPUs is chosen when the pool is built (allowed: another share or device list on a pool that places them; switching it on or off builds the pool again)",
            )
            .into());
        }
        let plan = match r.sizing.take() {
            Some(mut sizing) => Some((sizing.plan()?, sizing)),
            None => None,
        };
        if let Some(gpus) = &mut self.gpus
            && (opts.gpus_per_worker != self.opts.gpus_per_worker || opts.gpus != self.opts.gpus)
        {
            // The running workers keep their devices; later ones follow.
            gpus.reconfigure(&opts)?;
        }
        let before: Vec<bool> = self
            .slots
            .states(self.slots.len())
            .map(SlotState::is_empty)
            .collect();
        let changed = self.opts.changed(&opts);
        let old = std::mem::replace(&mut self.opts, opts);
        let mut actions: Vec<Action> = changed
            .iter()
            .map(|&option| Action::OptionChanged { option })
            .collect();
        if old.max_lifetime != self.opts.max_lifetime
            || old.max_lifetime_jitter != self.opts.max_lifetime_jitter
        {
            self.short_lifetime_said = false;
            self.reschedule_lifetimes(fx, &mut actions);
        }
        if old.max_surge != self.opts.max_surge {
            self.fit_surges(fx);
        }
        if old.replace_on_resize != self.opts.replace_on_resize {
            let replaced = self.replace_resized(fx);
            actions.extend(replaced.into_iter().map(|slot| Action::Replaced { slot }));
        }
        if old.max_memory != self.opts.max_memory
            || old.key_memory_budget != self.opts.key_memory_budget
            || old.memory_check_every != self.opts.memory_check_every
        {
            self.arm_memory(fx);
        }
        if old.probe_every != self.opts.probe_every {
            self.arm_probe(fx);
        }
        if old.tenants != self.opts.tenants {
            self.waiters.shares.set_table(&self.opts.tenants);
            self.retime();
        }
        if old.max_key_wait != self.opts.max_key_wait {
            self.rearm_key_waits(fx);
        }
        if old.min_workers_per_key != self.opts.min_workers_per_key {
            self.warm_failed.clear();
        }
        if old.max_waiting != self.opts.max_waiting {
            let bound = self.opts.waiting_bound(self.slots.capacity());
            self.turn_away_above(fx, bound, &mut actions);
        }

        if let Some(eviction) = r.eviction.take() {
            self.eviction = eviction;
            let count = self.rearm_evictions(fx);
            actions.push(Action::OptionChanged { option: "eviction" });
            actions.push(Action::TimersRescheduled { count });
        }

        if let Some((plan, sizing)) = plan {
            if let Some(message) = plan.warning {
                fx.emit(Event::Warning { message });
            }
            let (old_cap, old_size) = (self.slots.capacity(), self.slots.size());
            let cap = plan.capacity.max(1);
            if cap != old_cap {
                self.slots.set_capacity(cap);
                actions.push(Action::CapacityChanged {
                    from: old_cap,
                    to: cap,
                });
                for i in cap..self.slots.len() {
                    if self.drain_slot(fx, i) {
                        actions.push(Action::Retired { slot: i });
                    }
                }
            }
            self.sizing = sizing;
            self.sizing_jobs = plan.observes_jobs;
            self.sizing_wake = None;
            let mut replaced = self.resize(fx, plan.size.clamp(1, cap));
            // A lower capacity may have lowered the size without a resize.
            replaced.extend(self.replace_resized(fx));
            if self.slots.size() != old_size {
                actions.push(Action::Resized {
                    from: old_size,
                    to: self.slots.size(),
                });
            }
            actions.extend(replaced.into_iter().map(|slot| Action::Replaced { slot }));
            actions.push(Action::OptionChanged { option: "sizing" });
            self.wake_sizing(fx);
        }
        self.retime();
        self.kick_startup(fx);
        self.keep_spares(fx);
        self.pump(fx);
        for i in 0..self.slots.len() {
            // Slots added by a higher capacity were empty before, too.
            let was_empty = before.get(i).copied().unwrap_or(true);
            if was_empty && matches!(self.slots.state(i), SlotState::Starting { .. }) {
                actions.push(Action::Started { slot: i });
            }
        }
        Ok(actions)
    }

    /// Gives every live worker the lifetime the options say now, counted
    /// from its start; retires at once the idle ones past it.
    fn reschedule_lifetimes(&mut self, fx: &mut Effects<W>, actions: &mut Vec<Action>) {
        let mut count = 0;
        for i in 0..self.slots.len() {
            let started = match self.slots.state(i) {
                SlotState::Starting {
                    live: Some(live), ..
                }
                | SlotState::Ready { live, .. } => live.cell.started,
                _ => continue,
            };
            let life = self.lifetime(fx, i, self.slots.generation(i), started);
            let expired = self.slots.edit(i, |s| {
                let live = s.live_mut()?;
                live.life = life;
                Some(live.expired_by(self.now))
            });
            count += 1;
            if expired == Some(true) && self.retire_idle(fx, i, RetireReason::Lifetime) {
                actions.push(Action::Retired { slot: i });
            }
        }
        for i in 0..self.slots.len() {
            self.arm_surge_due(fx, i);
        }
        actions.push(Action::LifetimesRescheduled { count });
    }

    /// Turns away the youngest queued jobs above `bound` (a lower
    /// `max_waiting`).
    fn turn_away_above(&mut self, fx: &mut Effects<W>, bound: usize, actions: &mut Vec<Action>) {
        let mut count = 0;
        while self.waiters.unbound() > bound {
            let Some(id) = self.waiters.youngest_unbound() else {
                break;
            };
            let err = super::lend::reject(fx, RejectReason::QueueFull);
            self.waiters.fail(id, err);
            count += 1;
        }
        if count > 0 {
            actions.push(Action::JobsRejected { count });
        }
    }

    /// Ends the worker of a slot above the capacity. Returns whether there
    /// was one.
    fn drain_slot(&mut self, fx: &mut Effects<W>, i: usize) -> bool {
        self.cancel_surge(fx, i);
        self.slots.apply(i, t::end_backoff);
        let reason = RetireReason::Reconfigured;
        match self.slots.state(i) {
            SlotState::Empty { .. } | SlotState::Closing { .. } | SlotState::LentGone { .. } => {
                false
            }
            SlotState::Ready {
                held: Held::Lent, ..
            } => true,
            SlotState::Ready {
                held: Held::Idle { .. },
                ..
            } => self.retire_idle(fx, i, reason),
            SlotState::Starting { .. } => {
                let pid = self.pid_of(i);
                let aborted = self
                    .slots
                    .apply(i, |s| t::abort_start(s, EndReason::Retired(reason)));
                if let Some(id) = aborted.as_ref().and_then(|a| a.awaited_by) {
                    self.waiters.set_bound(id, None);
                }
                fx.kills.extend(aborted.and_then(|a| a.killer));
                fx.emit(Event::Retired {
                    slot: i,
                    pid,
                    reason,
                });
                true
            }
        }
    }
}
