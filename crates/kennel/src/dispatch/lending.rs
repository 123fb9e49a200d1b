//! The future a job waits in for its worker.

use std::task::{Context, Poll, Waker};

use tokio::time::Instant;

use super::Granted;
use crate::engine::{Acquired, Engine};
use crate::error::Error;
use crate::worker::Worker;

/// A job asking for a worker: it asks on its first poll and, when it has to
/// wait, leaves its waker in the queue under the same lock. Dropping it
/// while it waits leaves the queue (cancel safety).
#[derive(Debug)]
pub(crate) struct Lending<'a, W: Worker> {
    engine: &'a Engine<W>,
    queue: bool,
    /// Its place in the queue while it waits.
    id: Option<u64>,
    /// Whether the pool times jobs (read under the lock at the first poll).
    pub(crate) timing: bool,
    /// When it began to wait, if the pool times jobs.
    pub(crate) asked: Option<Instant>,
    /// The waker it left in the queue.
    waker: Option<Waker>,
}

impl<'a, W: Worker> Lending<'a, W> {
    /// A job that may queue (`queue`) or not.
    pub(crate) fn new(engine: &'a Engine<W>, queue: bool) -> Self {
        Self {
            engine,
            queue,
            id: None,
            timing: false,
            asked: None,
            waker: None,
        }
    }

    /// `Ready(Ok(None))`: it would have to queue and may not.
    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Granted<W>>, Error>> {
        if let Some(id) = self.id {
            return self.poll_waiting(id, cx);
        }
        let acquired = self.engine.act_in_runtime(|st, fx| {
            self.timing = st.timing;
            let acquired = st.acquire(fx, self.queue);
            if let Ok(Acquired::Wait(id)) = acquired {
                st.waiters.set_waker(id, cx.waker());
            }
            acquired
        })?;
        match acquired {
            Acquired::Now(granted) => Poll::Ready(Ok(Some(granted))),
            Acquired::WouldQueue => Poll::Ready(Ok(None)),
            Acquired::Wait(id) => {
                self.waker = Some(cx.waker().clone());
                self.id = Some(id);
                if self.timing {
                    self.asked = Some(Instant::now());
                }
                Poll::Pending
            }
        }
    }

    fn poll_waiting(
        &mut self,
        id: u64,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Granted<W>>, Error>> {
        // Woken: the grant is in the mailbox, no need for the pool's lock.
        let grant = match self.engine.mailbox.take(id) {
            Some(grant) => grant,
            // Polled for another reason, by the same task: a job leaves
            // the queue only with a grant, which reaches the mailbox and
            // then wakes the waker it left. Nothing to do.
            None if self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) => {
                return Poll::Pending;
            }
            None => {
                // A new waker: leave it in the queue, under the pool's
                // lock, unless the grant came meanwhile.
                let mut st = self.engine.lock();
                match self.engine.mailbox.take(id) {
                    Some(grant) => grant,
                    None => {
                        let polled = st.waiters.poll_waiting(id, cx);
                        if polled.is_pending() {
                            self.waker = Some(cx.waker().clone());
                        }
                        std::task::ready!(polled)
                    }
                }
            }
        };
        self.id = None;
        Poll::Ready(grant.map(Some))
    }
}

impl<W: Worker> Drop for Lending<'_, W> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.engine.cancel_wait(id);
        }
    }
}
