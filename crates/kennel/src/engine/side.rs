//! The reports of a slot's side (`max_surge`, ADR 0040): its
//! replacement made, ready, failed or ended; the replacement taking the
//! slot; a replacement called off.

use std::time::Duration;

use super::effects::Effects;
use super::life::Made;
use super::state::State;
use crate::event::Event;
use crate::slot::Held;
use crate::slot::transitions::Step;
use crate::slot::{Live, Side, SlotState};
use crate::worker::{Exit, Worker};

impl<W: Worker> State<W> {
    /// Slot `i`'s replacement, if it has one, takes the slot: after its
    /// worker was retired (the slot holds it closing) or ended (the slot is
    /// empty). The old worker leaves through the side. False when there is
    /// no replacement.
    pub(crate) fn swap_in(&mut self, fx: &mut Effects<W>, i: usize) -> bool {
        // Only a replacement takes the slot; a worker leaving stays put.
        let taken = self.slots.set_side(i, |s| match s {
            Some(Side::Warming {
                generation,
                live,
                warmup,
                ..
            }) => {
                let next = SlotState::Starting {
                    awaited_by: None,
                    // Its record holds its key, if any.
                    key: None,
                    live,
                    warmup,
                };
                (None, Some((next, generation, None)))
            }
            Some(Side::Warm {
                generation,
                worker,
                live,
                ..
            }) => (
                None,
                Some((
                    SlotState::Ready {
                        live,
                        held: Held::Lent,
                    },
                    generation,
                    Some(worker),
                )),
            ),
            other => (other, None),
        });
        let Some((next, generation, warm)) = taken else {
            return false;
        };
        let old_generation = self.slots.generation(i);
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
            self.slots.set_side(i, |_| (Some(leaving), ()));
        }
        if let Some(worker) = warm {
            self.place(fx, i, worker, None);
            self.arm_surge_due(fx, i);
            // It started before a resize.
            self.replace_if_resized(fx, i);
        }
        self.start_queued_surges(fx);
        self.pump(fx);
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
        let (live, exited) = self.live_of(fx, i, generation, made);
        let registered = self.slots.set_side(i, |s| match s {
            Some(Side::Warming {
                generation,
                live: None,
                warmup,
                reason,
            }) => {
                let side = Side::Warming {
                    generation,
                    live: Some(live),
                    warmup,
                    reason,
                };
                (Some(side), true)
            }
            other => (other, false),
        });
        if registered {
            fx.watches.push((i, generation, exited));
        }
        registered
    }

    /// Slot `i`'s replacement is ready: it takes the slot now if the worker
    /// is idle, else when it comes back.
    pub(crate) fn side_ready(
        &mut self,
        fx: &mut Effects<W>,
        i: usize,
        worker: W,
        warmup: Duration,
    ) {
        let about = worker.about().map(std::sync::Arc::<str>::from);
        let pid = worker.pid();
        let warm = self.slots.set_side(i, |s| match s {
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
                (Some(side), Ok(reason))
            }
            other => (other, Err(worker)),
        });
        let reason = match warm {
            Ok(reason) => reason,
            Err(worker) => {
                fx.kill(worker.killer());
                fx.drops.push(worker);
                return;
            }
        };
        self.warmups.note(warmup);
        self.note_start_cost(fx, "a worker's warm-up", warmup);
        self.ever_ready = true;
        fx.emit(Event::Ready {
            slot: i,
            pid,
            warmup,
        });
        self.note_ready(fx);
        match self.slots.state(i) {
            SlotState::Ready {
                held: Held::Idle { .. },
                ..
            } => {
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
    pub(crate) fn side_failed(&mut self, fx: &mut Effects<W>, i: usize, message: &str) {
        let pid = self.slots.side(i).and_then(Side::cell).and_then(|c| c.pid);
        let gone = self.slots.set_side(i, |s| match s {
            Some(Side::Warming {
                generation, live, ..
            }) => (killed_warming(fx, generation, live), true),
            other => (other, false),
        });
        if gone {
            self.warmup_failed(fx, i, pid, message);
            self.give_up_surge(fx, i);
        }
    }

    /// The worker of slot `i` will get no replacement warm first: retire it
    /// now if its limit is an unknown deadline and it is idle (a lent one
    /// is retired when it comes back).
    fn give_up_surge(&mut self, fx: &mut Effects<W>, i: usize) {
        let reason = self
            .with_record(i, |r| r.replacement.give_up_surge())
            .flatten();
        if let (Some(reason), true) = (reason, self.slots.state(i).is_idle()) {
            self.retire_idle(fx, i, reason);
        }
        self.start_queued_surges(fx);
    }

    /// The exit of a worker of slot `i`'s side is seen.
    pub(crate) fn side_exit(&mut self, fx: &mut Effects<W>, i: usize, exit: Exit) {
        fx.ended = true;
        let was = self.slots.set_side(i, |s| (None, s));
        let Some(side) = was else {
            return;
        };
        if let Some(cell) = side.cell() {
            cell.set_dead(exit.clone());
        }
        match side {
            Side::Leaving { .. } => {}
            Side::Warming { live, .. } => {
                let pid = live.as_ref().and_then(|l| l.cell.pid);
                let message = format!("not ready: the worker ended its warm-up: {}", exit.status);
                self.warmup_failed(fx, i, pid, &message);
                self.give_up_surge(fx, i);
            }
            Side::Warm { worker, live, .. } => {
                fx.emit(Event::Exited {
                    slot: i,
                    pid: live.cell.pid,
                    exit,
                    early: true,
                });
                fx.drops.push(worker);
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
        self.slots.set_side(i, |s| match s {
            Some(Side::Warming {
                generation, live, ..
            }) => (killed_warming(fx, generation, live), ()),
            Some(Side::Warm {
                generation,
                worker,
                live,
                ..
            }) => {
                fx.closes.push((worker, live.cell.killer.clone()));
                let leaving = Side::Leaving {
                    generation,
                    cell: live.cell,
                };
                (Some(leaving), ())
            }
            other => (other, ()),
        });
        self.with_record(i, |r| r.replacement.call_off());
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
}

/// A warming replacement given up: a worker already made is killed and
/// leaves through the side until its exit is seen; one not made yet leaves
/// nothing.
fn killed_warming<W>(fx: &mut Effects<W>, generation: u64, live: Option<Live>) -> Option<Side<W>> {
    live.map(|l| {
        fx.kill(l.cell.killer.clone());
        Side::Leaving {
            generation,
            cell: l.cell,
        }
    })
}
