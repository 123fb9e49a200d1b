//! The future a job waits in for its worker.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::time::Instant;

use super::{Grant, Granted, Waiting};
use crate::engine::{Acquired, Engine};
use crate::error::Error;
use crate::worker::Worker;

/// A job asking for a worker: it asks on its first poll and, when it has to
/// wait, is handed its worker through its own `oneshot` (ADR 0041), which
/// keeps its waker: polled again, it looks there without any lock. Dropping
/// it while it waits leaves the queue (cancel safety).
#[derive(Debug)]
pub(crate) struct Lending<'a, W: Worker> {
    engine: &'a Engine<W>,
    queue: bool,
    /// Its place in the queue and its end of the hand-over, while it waits.
    waiting: Option<Waiting<W>>,
    /// Whether the pool times jobs (read under the lock at the first poll).
    pub(crate) timing: bool,
    /// When it began to wait, if the pool times jobs.
    pub(crate) asked: Option<Instant>,
}

impl<'a, W: Worker> Lending<'a, W> {
    /// A job that may queue (`queue`) or not.
    pub(crate) fn new(engine: &'a Engine<W>, queue: bool) -> Self {
        Self {
            engine,
            queue,
            waiting: None,
            timing: false,
            asked: None,
        }
    }

    /// `Ready(Ok(None))`: it would have to queue and may not.
    #[inline]
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Granted<W>>, Error>> {
        if self.waiting.is_none() {
            let acquired = self.engine.act_in_runtime(|st, fx| {
                self.timing = st.timing;
                st.acquire(fx, self.queue)
            })?;
            match acquired {
                Acquired::Now(granted) => return Poll::Ready(Ok(Some(granted))),
                Acquired::WouldQueue => return Poll::Ready(Ok(None)),
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
    fn poll_waiting(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Granted<W>>, Error>> {
        let Some(waiting) = self.waiting.as_mut() else {
            return Poll::Ready(Err(Error::Closed));
        };
        let handed = std::task::ready!(Pin::new(&mut waiting.handed).poll(cx));
        self.waiting = None;
        // A job leaves the queue only with a grant; a hand-over dropped
        // unsent means the pool is gone: it reads as closed.
        Poll::Ready(handed.unwrap_or(Err(Error::Closed)).map(Some))
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
