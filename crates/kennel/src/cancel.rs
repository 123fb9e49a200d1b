//! Cancel before kill: a job that is aborted or runs past its
//! `job_timeout` asks its worker to stop (when the worker can be asked)
//! instead of killing it, and the worker stays in the pool if it answers
//! within `cancel_grace` (ADR 0035).

use std::fmt;

use tokio::time::Instant;

use crate::event::{Event, RetireReason};
use crate::lease::Lease;
use crate::worker::Worker;

/// What came of asking a worker to stop the job in hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CancelOutcome {
    /// The worker stopped the job (or had just finished it) and answered in
    /// time: it stays in the pool and is lent again.
    Kept,
    /// It did not answer in time, could not be asked, or its answer broke
    /// the protocol: the pool kills it and starts another.
    Killed,
}

impl CancelOutcome {
    /// The serialised name: `kept` or `killed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Kept => "kept",
            Self::Killed => "killed",
        }
    }
}

impl fmt::Display for CancelOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Settles a lease whose job was dropped (`reason` aborted or timeout) on a
/// task of its own: when the worker can cancel, it is asked to, within
/// `cancel_grace` (and before `hard`, the job's `job_kill_after`
/// deadline, if any); the worker is given back if it answered and retired
/// with `reason` otherwise. A worker that cannot cancel, or a drop outside a
/// runtime, retires at once as before.
pub(crate) fn settle<W: Worker>(lease: Lease<W>, reason: RetireReason, hard: Option<Instant>) {
    match tokio::runtime::Handle::try_current() {
        Ok(rt) if lease.can_cancel() => drop(rt.spawn(cancel_then_settle(lease, reason, hard))),
        _ => lease.retire(reason),
    }
}

async fn cancel_then_settle<W: Worker>(
    mut lease: Lease<W>,
    reason: RetireReason,
    hard: Option<Instant>,
) {
    let started = Instant::now();
    let mut grace = lease.engine.lock().opts.cancel_grace;
    if let Some(hard) = hard {
        grace = grace.min(hard.saturating_duration_since(started));
    }
    let outcome = if grace.is_zero() {
        CancelOutcome::Killed
    } else {
        let cell = lease.cell.clone();
        tokio::select! {
            biased;
            () = cell.died() => CancelOutcome::Killed,
            outcome = tokio::time::timeout(grace, lease.cancel(grace)) => {
                outcome.unwrap_or(CancelOutcome::Killed)
            }
        }
    };
    let outcome = match outcome {
        CancelOutcome::Kept if lease.has_exited() || !lease.is_alive() => CancelOutcome::Killed,
        other => other,
    };
    lease.engine.emit(Event::Cancelled {
        slot: lease.slot,
        reason,
        outcome,
        took: started.elapsed(),
    });
    match outcome {
        CancelOutcome::Kept => drop(lease),
        CancelOutcome::Killed => lease.retire(reason),
    }
}
