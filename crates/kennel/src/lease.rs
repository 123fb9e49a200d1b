//! The `Lease` guard: exclusive use of one worker until it is returned,
//! and the in-flight guard that makes a dropped job an abort.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use tokio::time::Instant;

use crate::dispatch::{Granted, JobLimits};
use crate::engine::{Engine, Outcome};
use crate::event::RetireReason;
use crate::slot::WorkerCell;
use crate::worker::Worker;

/// A worker lent to one job. Deref to use it; drop it to give it back.
///
/// - Dropping the lease returns the worker to the pool.
/// - [`fail`](Lease::fail) retires the worker (it is killed and replaced).
/// - A lease dropped while its thread panics retires the worker: its state is
///   unknown.
#[must_use = "dropping a lease returns its worker at once"]
pub struct Lease<W: Worker> {
    pub(crate) engine: Arc<Engine<W>>,
    pub(crate) slot: usize,
    worker: Option<W>,
    pub(crate) cell: Arc<WorkerCell>,
    /// When the job got the worker, if the pool times jobs.
    pub(crate) since: Option<Instant>,
    /// The pool's limits on the job, read when it got the worker.
    pub(crate) limits: JobLimits,
    /// Whether a job holds it (it counts toward `max_jobs`), not the pool's
    /// own `for_each_idle`.
    pub(crate) job: bool,
    /// The key of its job, if it has one.
    pub(crate) key: Option<crate::Key>,
    /// The tenant of its job, if it has one.
    pub(crate) tenant: Option<crate::Tenant>,
    /// Its worker's threads read at the lend, while they are measured.
    pub(crate) threads: Option<(std::time::Instant, crate::ThreadSample)>,
}

impl<W: Worker> Lease<W> {
    pub(crate) fn new(engine: Arc<Engine<W>>, granted: Granted<W>, since: Option<Instant>) -> Self {
        Self {
            engine,
            slot: granted.slot,
            worker: Some(granted.worker),
            cell: granted.cell,
            since,
            limits: granted.limits,
            job: true,
            key: granted.key,
            tenant: granted.tenant,
            threads: None,
        }
    }

    /// The same lease, for the pool's own use of the worker: no job.
    pub(crate) fn not_a_job(mut self) -> Self {
        self.job = false;
        self
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
    pub fn fail(self) {
        self.retire(RetireReason::Failed);
    }

    /// Retires the worker although it did nothing wrong: what the job left
    /// in it (a client's session, its files) must not reach the next job.
    /// The pool closes it and starts a replacement (warm first, as for
    /// any retirement), with no back-off and no mark against the pool's
    /// health.
    pub fn discard(self) {
        self.retire(RetireReason::Discarded);
    }

    pub(crate) fn retire(mut self, reason: RetireReason) {
        self.give_back(Outcome::Retire(reason));
    }

    fn give_back(&mut self, outcome: Outcome) {
        if let Some(worker) = self.worker.take() {
            self.engine.release(self, worker, outcome);
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
        } else {
            Outcome::Returned
        };
        self.give_back(outcome);
    }
}

impl<W: Worker> fmt::Debug for Lease<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("pool", &self.engine.name)
            .field("slot", &self.slot)
            .finish_non_exhaustive()
    }
}

/// A lease whose job is running: dropped before [`disarm`](Self::disarm)
/// (the job's future was dropped mid-job), it retires the worker as
/// aborted, since its state is unknown, unless the worker can cancel the
/// job in hand (then it is asked to, and stays if it answers in time).
#[must_use = "dropping the guard aborts the job"]
pub(crate) struct InFlight<W: Worker>(Option<Lease<W>>);

impl<W: Worker> InFlight<W> {
    pub(crate) fn new(lease: Lease<W>) -> Self {
        Self(Some(lease))
    }

    /// The job ended: the lease again, whose drop returns the worker.
    pub(crate) fn disarm(mut self) -> Lease<W> {
        self.0.take().expect("armed until disarmed")
    }
}

impl<W: Worker> Deref for InFlight<W> {
    type Target = W;

    fn deref(&self) -> &W {
        self.0.as_ref().expect("armed until disarmed")
    }
}

impl<W: Worker> DerefMut for InFlight<W> {
    fn deref_mut(&mut self) -> &mut W {
        self.0.as_mut().expect("armed until disarmed")
    }
}

impl<W: Worker> Drop for InFlight<W> {
    fn drop(&mut self) {
        if let Some(lease) = self.0.take() {
            if std::thread::panicking() {
                lease.retire(RetireReason::Panicked);
            } else {
                // A worker that can cancel is asked to, and may stay.
                crate::cancel::settle(lease, RetireReason::Aborted, None);
            }
        }
    }
}

impl<W: Worker> fmt::Debug for InFlight<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("InFlight").field(&self.0).finish()
    }
}
