//! A job asking for a worker, and the guard that takes it out of the queue
//! when it stops waiting.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{Ask, Grant, Waiting};
use crate::engine::{Acquired, Engine};
use crate::error::Error;
use crate::lease::Lease;
use crate::threads::ThreadWatch;
use crate::worker::Worker;

/// A job asks for a worker: it asks under the lock and, when it has to
/// wait, is handed its worker through its own `oneshot`, read without any
/// lock. `Ok(None)` when it may not queue (`queue` false) and would have had
/// to: nothing was turned away, so no event. Dropping the future while it
/// waits leaves the queue (cancel safety).
pub(crate) async fn lend<W: Worker>(
    engine: &Arc<Engine<W>>,
    queue: bool,
    ask: Ask,
) -> Result<Option<Lease<W>>, Error> {
    let mut timing = false;
    let acquired = engine.act(|st, fx| {
        let acquired = st.acquire(fx, queue, ask);
        timing = st.timing;
        acquired
    })?;
    let (mut granted, asked) = match acquired {
        Acquired::Now(granted) => (granted, None),
        Acquired::WouldQueue => return Ok(None),
        Acquired::Wait(waiting) => {
            let asked = timing.then(Instant::now);
            let mut guard = InQueue {
                engine,
                waiting,
                armed: true,
            };
            let handed = (&mut guard.waiting.handed).await;
            guard.disarm();
            // A job leaves the queue only with a grant; a hand-over dropped
            // unsent means the pool is gone: it reads as closed.
            (handed.map_err(|_| Error::Closed)??, asked)
        }
    };
    let load = granted.load.take();
    let keyed = granted.key.is_some();
    let since = timing.then(|| granted.at.unwrap_or_else(Instant::now));
    let waited =
        since.map(|since| asked.map_or(Duration::ZERO, |a| since.saturating_duration_since(a)));
    engine.metrics.lent(waited);
    let mut lease = Lease::new(engine.clone(), granted, since);
    match load {
        Some(load) => {
            lease = super::loading::load(lease, load).await?;
            // The job's time starts once its key is loaded.
            lease.since = timing.then(Instant::now);
        }
        None if keyed => engine.metrics.key_hit(),
        None => {}
    }
    // Off the lock, once its key is loaded: a reading of the threads reads
    // /proc.
    lease.threads = lease.cell.threads.as_ref().and_then(ThreadWatch::at_lend);
    Ok(Some(lease))
}

/// A job waiting in the queue. Dropped armed (the job gave up), it leaves
/// the queue; a worker handed to it meanwhile goes back to the pool.
struct InQueue<'a, W: Worker> {
    engine: &'a Arc<Engine<W>>,
    waiting: Waiting<W>,
    armed: bool,
}

impl<W: Worker> InQueue<'_, W> {
    /// The job got what it was handed: nothing to undo.
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl<W: Worker> Drop for InQueue<'_, W> {
    fn drop(&mut self) {
        if self.armed {
            // No send succeeds after this: a worker handed from now on is
            // refused, and goes back to the pool from the sender's side.
            self.waiting.handed.close();
            let handed: Option<Grant<W>> = self.waiting.handed.try_recv().ok();
            let id = self.waiting.id;
            self.engine.act(|st, fx| st.cancel_wait(fx, id, handed));
        }
    }
}
