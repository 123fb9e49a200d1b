//! The `Lease` guard: exclusive use of one worker (SPEC S2, P's take/return).

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use tokio::time::Instant;

use crate::dispatch::Granted;
use crate::event::RetireReason;
use crate::shared::{Outcome, Shared};
use crate::slot::WorkerCell;
use crate::worker::Worker;

/// A worker lent to one job. Deref to use it; drop it to give it back.
///
/// - Dropping the lease returns the worker to the pool.
/// - [`fail`](Lease::fail) retires the worker (it is killed and replaced),
///   as pooler's `return_member(.., fail)`.
/// - A lease dropped while its thread panics retires the worker, as pooler
///   does for a crashed consumer: its state is unknown.
#[must_use = "dropping a lease returns its worker at once"]
pub struct Lease<W: Worker> {
    pub(crate) shared: Arc<Shared<W>>,
    pub(crate) slot: usize,
    pub(crate) worker: Option<W>,
    pub(crate) cell: Arc<WorkerCell>,
    /// When the job got the worker, if the pool times jobs (ADR 0011).
    pub(crate) since: Option<Instant>,
    /// Set by `run` while the job runs: a drop now is an abort.
    pub(crate) in_flight: bool,
}

impl<W: Worker> Lease<W> {
    pub(crate) fn new(shared: Arc<Shared<W>>, granted: Granted<W>, since: Option<Instant>) -> Self {
        Self {
            shared,
            slot: granted.slot,
            worker: Some(granted.worker),
            cell: granted.cell,
            since,
            in_flight: false,
        }
    }

    /// The slot of the worker.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Whether the worker has ended while lent (it crashed).
    pub fn has_exited(&self) -> bool {
        self.cell.is_dead()
    }

    /// Retires the worker: the pool kills it and starts a replacement, with
    /// no back-off.
    pub fn fail(mut self) {
        self.give_back(Outcome::Retire(RetireReason::Failed));
    }

    pub(crate) fn retire(mut self, reason: RetireReason) {
        self.give_back(Outcome::Retire(reason));
    }

    fn give_back(&mut self, outcome: Outcome) {
        if let Some(worker) = self.worker.take() {
            self.shared
                .release(self.slot, worker, &self.cell, outcome, self.since);
        }
    }
}

impl<W: Worker> Deref for Lease<W> {
    type Target = W;

    fn deref(&self) -> &W {
        self.worker
            .as_ref()
            .expect("a lease holds its worker until dropped")
    }
}

impl<W: Worker> DerefMut for Lease<W> {
    fn deref_mut(&mut self) -> &mut W {
        self.worker
            .as_mut()
            .expect("a lease holds its worker until dropped")
    }
}

impl<W: Worker> Drop for Lease<W> {
    fn drop(&mut self) {
        let outcome = if std::thread::panicking() {
            Outcome::Retire(RetireReason::Panicked)
        } else if self.in_flight {
            Outcome::Retire(RetireReason::Aborted)
        } else {
            Outcome::Returned
        };
        self.give_back(outcome);
    }
}

impl<W: Worker> fmt::Debug for Lease<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("pool", &self.shared.name)
            .field("slot", &self.slot)
            .finish_non_exhaustive()
    }
}
