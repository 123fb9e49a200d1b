//! The slot state machine's transitions: each takes the state by value and
//! gives back the next state and what moved out of the old one, or the
//! state unchanged (`Step::Same`) when it does not apply. [`Slots::apply`]
//! runs them; nothing else changes a slot's kind.
//! `rearm`, which changes an idle worker's data and not its kind, runs
//! through [`Slots::edit`].
//!
//! ```text
//!            start                 warm       Ready:     to_idle
//!   Empty ─────────▶ Starting ─────────▶ Lent ◀────────▶ Idle
//!     ▲                 │ abort_start      │  lend_idle    │ close_idle
//!     │                 ▼                  ▼ end_lent      ▼
//!     │              Closing ◀─────────────┴───────────────┘
//!     │ exit_seen       │                  │ lent_gone
//!     └─────────────────┘              LentGone ── return_gone ──▶ Empty
//! ```
//!
//! [`Slots::apply`]: super::Slots::apply
//! [`Slots::edit`]: super::Slots::edit

use std::sync::Arc;

use tokio::time::Instant;

use super::{EndReason, Held, Live, Rest, SlotState, WorkerCell};
use crate::timer::Timer;
use crate::worker::Killer;

/// What a transition made of a state: the next one and what moved out of
/// the old one, or the same state when the transition does not apply.
#[derive(Debug)]
pub(crate) enum Step<W, R> {
    To(SlotState<W>, R),
    Same(SlotState<W>),
}

/// Empty → Starting: a worker is being made for this slot. Gives whether it
/// replaces one that crashed or was retired. A back-off is dropped: a job
/// that needs the slot never waits for it.
pub(crate) fn start<W>(
    s: SlotState<W>,
    awaited_by: Option<u64>,
    key: Option<crate::Key>,
    warmup: Timer,
) -> Step<W, bool> {
    match s {
        SlotState::Empty { respawn, .. } => Step::To(
            SlotState::Starting {
                awaited_by,
                key,
                live: None,
                warmup,
            },
            respawn,
        ),
        other => Step::Same(other),
    }
}

/// Starting → Starting: the job the worker is meant for.
pub(crate) fn await_by<W>(s: SlotState<W>, id: Option<u64>) -> Step<W, ()> {
    match s {
        SlotState::Starting {
            key, live, warmup, ..
        } => Step::To(
            SlotState::Starting {
                awaited_by: id,
                key,
                live,
                warmup,
            },
            (),
        ),
        other => Step::Same(other),
    }
}

/// Starting → Starting: the factory made the worker; the slot keeps its
/// cell (and lifetime) from now on.
pub(crate) fn register<W>(s: SlotState<W>, live: Live) -> Step<W, ()> {
    match s {
        SlotState::Starting {
            awaited_by,
            key,
            live: None,
            warmup,
        } => Step::To(
            SlotState::Starting {
                awaited_by,
                key,
                live: Some(live),
                warmup,
            },
            (),
        ),
        other => Step::Same(other),
    }
}

/// Starting → Lent: the worker is ready; it passes through `Lent` to be
/// placed (given to the oldest job, or made idle). Gives the job it was
/// meant for.
pub(crate) fn warm<W>(s: SlotState<W>) -> Step<W, Option<u64>> {
    match s {
        SlotState::Starting {
            awaited_by,
            live: Some(live),
            ..
        } => Step::To(
            SlotState::Ready {
                live,
                held: Held::Lent,
            },
            awaited_by,
        ),
        other => Step::Same(other),
    }
}

/// What a start that is given up leaves.
#[derive(Debug)]
pub(crate) struct Aborted {
    /// The job the worker was meant for.
    pub(crate) awaited_by: Option<u64>,
    /// The worker's kill switch, when the factory had made it.
    pub(crate) killer: Option<Killer>,
    /// The key it was started for (`spawn`).
    pub(crate) key: Option<crate::Key>,
}

/// Starting → Closing (the worker was made: it must be seen to end) or
/// Empty (it was not). Its warm-up task is cancelled.
pub(crate) fn abort_start<W>(s: SlotState<W>, reason: EndReason) -> Step<W, Aborted> {
    match s {
        SlotState::Starting {
            awaited_by,
            live,
            key,
            ..
        } => {
            let killer = live.as_ref().map(|l| l.cell.killer.clone());
            let next = match live {
                Some(live) => SlotState::Closing {
                    cell: live.cell,
                    reason,
                    restart_for: None,
                },
                None => SlotState::new(),
            };
            Step::To(
                next,
                Aborted {
                    awaited_by,
                    killer,
                    key,
                },
            )
        }
        other => Step::Same(other),
    }
}

/// Idle → Lent: a job takes the worker; the slot keeps its cell (and the
/// rest of `live`). The eviction timer is cancelled.
pub(crate) fn lend_idle<W>(s: SlotState<W>) -> Step<W, (W, Arc<WorkerCell>)> {
    match s {
        SlotState::Ready {
            live,
            held: Held::Idle { worker, .. },
        } => {
            let cell = live.cell.clone();
            Step::To(
                SlotState::Ready {
                    live,
                    held: Held::Lent,
                },
                (worker, cell),
            )
        }
        other => Step::Same(other),
    }
}

/// Idle → Closing: the pool ends the idle worker; gives the worker to close
/// and its kill switch.
pub(crate) fn close_idle<W>(s: SlotState<W>, reason: EndReason) -> Step<W, (W, Killer)> {
    end_idle(s, reason, None)
}

/// Idle → Closing, retired to start a worker for `key` in its place
/// (`spawn`): until its exit is seen, the slot is on its way to `key` (the
/// key's other jobs wait for it); then the job of the key takes a place.
pub(crate) fn move_idle<W>(s: SlotState<W>, key: crate::Key) -> Step<W, (W, Killer)> {
    end_idle(
        s,
        EndReason::Retired(crate::RetireReason::KeyMoved),
        Some(key),
    )
}

fn end_idle<W>(
    s: SlotState<W>,
    reason: EndReason,
    moved_to: Option<crate::Key>,
) -> Step<W, (W, Killer)> {
    match s {
        SlotState::Ready {
            live,
            held: Held::Idle { worker, .. },
        } => {
            let killer = live.cell.killer.clone();
            Step::To(
                SlotState::Closing {
                    restart_for: moved_to.or_else(|| live.restart_for(reason)),
                    cell: live.cell,
                    reason,
                },
                (worker, killer),
            )
        }
        other => Step::Same(other),
    }
}

/// Idle, in place (the kind stays): a new idle period and eviction timer (`since`
/// `None`: the same period; `evict` `None`: no eviction runs, as in a kept
/// slot). `None` when it is not idle.
pub(crate) fn rearm<W>(
    s: &mut SlotState<W>,
    since: Option<Instant>,
    evict: Option<Timer>,
) -> Option<()> {
    let SlotState::Ready {
        held:
            Held::Idle {
                since: was,
                evict: timer,
                ..
            },
        ..
    } = s
    else {
        return None;
    };
    *was = since.or(*was);
    *timer = evict;
    Some(())
}

/// Lent → Idle: the worker came back and no job waits for it. Gives the
/// worker back (`Err`, the state unchanged) when the slot is not lent.
pub(crate) fn to_idle<W>(
    s: SlotState<W>,
    worker: W,
    since: Option<Instant>,
    evict: Option<Timer>,
) -> Step<W, Result<(), W>> {
    match s {
        SlotState::Ready {
            live,
            held: Held::Lent,
        } => Step::To(
            SlotState::Ready {
                live,
                held: Held::Idle {
                    worker,
                    since,
                    evict,
                },
            },
            Ok(()),
        ),
        other => Step::To(other, Err(worker)),
    }
}

/// Lent → Closing: the pool ends the worker that came back (retired), or
/// waits for the exit of one that ended under its job (`Crashed`).
pub(crate) fn end_lent<W>(s: SlotState<W>, reason: EndReason) -> Step<W, ()> {
    match s {
        SlotState::Ready {
            live,
            held: Held::Lent,
        } => Step::To(
            SlotState::Closing {
                restart_for: live.restart_for(reason),
                cell: live.cell,
                reason,
            },
            (),
        ),
        other => Step::Same(other),
    }
}

/// Lent → LentGone: the worker's exit was seen while a job holds it.
pub(crate) fn lent_gone<W>(s: SlotState<W>) -> Step<W, ()> {
    match s {
        SlotState::Ready {
            live,
            held: Held::Lent,
        } => Step::To(
            SlotState::LentGone {
                cell: live.cell,
                backoff: None,
            },
            (),
        ),
        other => Step::Same(other),
    }
}

/// LentGone → Empty: the lease of an ended worker came back; the next
/// worker replaces it, after the back-off its exit scheduled.
pub(crate) fn return_gone<W>(s: SlotState<W>) -> Step<W, ()> {
    match s {
        SlotState::LentGone { backoff, .. } => Step::To(
            SlotState::Empty {
                rest: backoff.map_or(Rest::Wanted, Rest::BackOff),
                respawn: true,
                restart_for: None,
            },
            (),
        ),
        other => Step::Same(other),
    }
}

/// What was in a slot whose worker's exit was seen.
#[derive(Debug)]
pub(crate) enum Ended<W> {
    /// It was warming up, for this job (and for this key, `spawn`).
    Starting {
        awaited_by: Option<u64>,
        key: Option<crate::Key>,
    },
    /// It was idle.
    Idle(W),
    /// The pool was ending it.
    Closing(EndReason),
}

/// Starting, Idle or Closing → Empty: the worker's exit was seen. A worker
/// let go by an eviction leaves the slot to jobs; one retired or crashed
/// is replaced by the next (a retired one's `restart_for` carried over).
pub(crate) fn exit_seen<W>(s: SlotState<W>) -> Step<W, Ended<W>> {
    let (rest, respawn, restart_for, ended) = match s {
        SlotState::Starting {
            awaited_by, key, ..
        } => (
            Rest::Wanted,
            false,
            None,
            Ended::Starting { awaited_by, key },
        ),
        SlotState::Ready {
            held: Held::Idle { worker, .. },
            ..
        } => (Rest::Wanted, false, None, Ended::Idle(worker)),
        SlotState::Closing {
            reason,
            restart_for,
            ..
        } => match reason {
            EndReason::Evicted => (Rest::Evicted, false, None, Ended::Closing(reason)),
            // A worker moved to a key leaves the slot to the job of that
            // key, which takes a place as any job does.
            EndReason::Retired(crate::RetireReason::KeyMoved) => {
                (Rest::Wanted, true, None, Ended::Closing(reason))
            }
            EndReason::Retired(_) => (Rest::Wanted, true, restart_for, Ended::Closing(reason)),
            EndReason::Crashed => (Rest::Wanted, true, None, Ended::Closing(reason)),
            EndReason::WarmupFailed | EndReason::PoolClosed => {
                (Rest::Wanted, false, None, Ended::Closing(reason))
            }
        },
        other => return Step::Same(other),
    };
    let empty = SlotState::Empty {
        rest,
        respawn,
        restart_for,
    };
    Step::To(empty, ended)
}

/// Empty or LentGone: an eager startup starts the slot again when the
/// back-off ends.
pub(crate) fn back_off<W>(s: SlotState<W>, backoff: Timer) -> Step<W, ()> {
    match s {
        SlotState::Empty {
            respawn,
            restart_for,
            ..
        } => Step::To(
            SlotState::Empty {
                rest: Rest::BackOff(backoff),
                respawn,
                restart_for,
            },
            (),
        ),
        SlotState::LentGone { cell, .. } => Step::To(
            SlotState::LentGone {
                cell,
                backoff: Some(backoff),
            },
            (),
        ),
        other => Step::Same(other),
    }
}

/// Empty or LentGone: the back-off is over or called off (its timer is
/// dropped).
pub(crate) fn end_backoff<W>(s: SlotState<W>) -> Step<W, ()> {
    match s {
        SlotState::Empty {
            rest: Rest::BackOff(_),
            respawn,
            restart_for,
        } => Step::To(
            SlotState::Empty {
                rest: Rest::Wanted,
                respawn,
                restart_for,
            },
            (),
        ),
        SlotState::LentGone {
            cell,
            backoff: Some(_),
        } => Step::To(
            SlotState::LentGone {
                cell,
                backoff: None,
            },
            (),
        ),
        other => Step::Same(other),
    }
}

#[cfg(test)]
mod tests;
