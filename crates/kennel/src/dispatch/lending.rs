//! The future a job waits in for its worker.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use super::{Grant, Granted, Waiting};
use crate::engine::{Acquired, Engine};
use crate::error::{Error, RejectReason};
use crate::lease::Lease;
use crate::worker::Worker;

/// A job asking for a worker: it asks on its first poll and, when it has to
/// wait, is handed its worker through its own `oneshot`, which
/// keeps its waker: polled again, it looks there without any lock. Dropping
/// it while it waits leaves the queue (cancel safety). What it is granted
/// it makes into the job's [`Lease`] itself, so that the lease is built
/// once, where it is returned, and not moved through the layers above.
#[derive(Debug)]
pub(crate) struct Lending<'a, W: Worker> {
    engine: &'a Arc<Engine<W>>,
    queue: bool,
    /// Its place in the queue and its end of the hand-over, while it waits.
    waiting: Option<Waiting<W>>,
    /// Whether the pool times jobs (read under the lock at the first poll).
    timing: bool,
    /// When it began to wait, if the pool times jobs.
    asked: Option<Instant>,
    /// It may not queue, and would have had to.
    would_queue: bool,
}

impl<'a, W: Worker> Lending<'a, W> {
    /// A job that may queue (`queue`) or not.
    pub(crate) fn new(engine: &'a Arc<Engine<W>>, queue: bool) -> Self {
        Self {
            engine,
            queue,
            waiting: None,
            timing: false,
            asked: None,
            would_queue: false,
        }
    }

    /// Whether its `Rejected { QueueFull }` means that it may not queue
    /// and would have had to (rather than a queued job turned away).
    pub(crate) fn would_queue(&self) -> bool {
        self.would_queue
    }

    /// A job that may not queue and would have to gets
    /// `Rejected { QueueFull }` with [`would_queue`](Self::would_queue) set,
    /// and no event (nothing was turned away): `try_lend` reads that as no
    /// worker. One result type for both, so that the lease is returned as
    /// built.
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<Lease<W>, Error>> {
        if self.waiting.is_none() {
            let acquired = self.engine.act(|st, fx| {
                self.timing = st.timing;
                st.acquire(fx, self.queue)
            })?;
            match acquired {
                Acquired::Now(granted) => return Poll::Ready(Ok(self.lease(granted))),
                Acquired::WouldQueue => {
                    self.would_queue = true;
                    return Poll::Ready(Err(Error::Rejected {
                        reason: RejectReason::QueueFull,
                    }));
                }
                Acquired::Wait(waiting) => {
                    if self.timing {
                        self.asked = Some(Instant::now());
                    }
                    self.waiting = Some(waiting);
                }
            }
        }
        self.poll_waiting(cx)
    }

    /// Looks at what the job was handed; leaves its waker there if nothing
    /// yet.
    fn poll_waiting(&mut self, cx: &mut Context<'_>) -> Poll<Result<Lease<W>, Error>> {
        let Some(waiting) = self.waiting.as_mut() else {
            return Poll::Ready(Err(Error::Closed));
        };
        let handed = std::task::ready!(Pin::new(&mut waiting.handed).poll(cx));
        self.waiting = None;
        // A job leaves the queue only with a grant; a hand-over dropped
        // unsent means the pool is gone: it reads as closed.
        Poll::Ready(match handed {
            Ok(Ok(granted)) => Ok(self.lease(granted)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::Closed),
        })
    }

    /// The lease of the worker it was granted; counts the lend.
    fn lease(&self, granted: Granted<W>) -> Lease<W> {
        let since = self.timing.then(|| granted.at.unwrap_or_else(Instant::now));
        let waited = match (since, self.asked) {
            (Some(since), Some(asked)) => Some(since.saturating_duration_since(asked)),
            (Some(_), None) => Some(Duration::ZERO),
            _ => None,
        };
        self.engine.metrics.lent(waited);
        Lease::new(self.engine.clone(), granted, since)
    }
}

impl<W: Worker> Drop for Lending<'_, W> {
    fn drop(&mut self) {
        if let Some(mut waiting) = self.waiting.take() {
            // No send succeeds after this: a worker handed from now on is
            // refused, and goes back to the pool from the sender's side.
            waiting.handed.close();
            let handed: Option<Grant<W>> = waiting.handed.try_recv().ok();
            self.engine.cancel_wait(waiting.id, handed);
        }
    }
}
