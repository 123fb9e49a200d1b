//! Which worker a job gets, and the one FIFO of waiting jobs (SPEC S2, ADR 0004).

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::oneshot;

use crate::error::Error;
use crate::slot::WorkerCell;

/// Which idle worker a job takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Dispatch {
    /// The idle worker in the lowest running slot, so that jobs run one at a
    /// time use one worker and the others can be evicted (the default).
    #[default]
    LowestSlot,
    /// The next idle slot after the last one lent, to spread wear.
    RoundRobin,
}

/// A worker handed to a waiting job.
#[derive(Debug)]
pub(crate) struct Granted<W> {
    pub(crate) slot: usize,
    pub(crate) worker: W,
    pub(crate) cell: Arc<WorkerCell>,
}

pub(crate) type Grant<W> = Result<Granted<W>, Error>;

#[derive(Debug)]
pub(crate) struct Waiter<W> {
    tx: oneshot::Sender<Grant<W>>,
    /// The starting slot this job waits for (SPEC S2 rules 2 and 3).
    pub(crate) bound: Option<usize>,
}

/// Waiting jobs in arrival order; ids grow, so the first entry is the oldest.
#[derive(Debug)]
pub(crate) struct Waiters<W> {
    map: BTreeMap<u64, Waiter<W>>,
    next_id: u64,
    unbound: usize,
}

impl<W> Waiters<W> {
    pub(crate) fn new() -> Self {
        Self {
            map: BTreeMap::new(),
            next_id: 0,
            unbound: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Jobs queued by rule 4 (not bound to a starting worker).
    pub(crate) fn unbound(&self) -> usize {
        self.unbound
    }

    /// Adds a job at the back; returns its id and the receiver of its grant.
    pub(crate) fn push(&mut self, bound: Option<usize>) -> (u64, oneshot::Receiver<Grant<W>>) {
        let (tx, rx) = oneshot::channel();
        let id = self.next_id;
        self.next_id += 1;
        if bound.is_none() {
            self.unbound += 1;
        }
        self.map.insert(id, Waiter { tx, bound });
        (id, rx)
    }

    /// Removes a job (granted, failed or gone); returns it if it was there.
    pub(crate) fn remove(&mut self, id: u64) -> Option<Waiter<W>> {
        let w = self.map.remove(&id)?;
        if w.bound.is_none() {
            self.unbound -= 1;
        }
        Some(w)
    }

    /// The oldest job.
    pub(crate) fn oldest(&self) -> Option<(u64, Option<usize>)> {
        self.map.iter().next().map(|(id, w)| (*id, w.bound))
    }

    /// The oldest job not bound to a starting worker.
    pub(crate) fn oldest_unbound(&self) -> Option<u64> {
        if self.unbound == 0 {
            return None;
        }
        self.map
            .iter()
            .find(|(_, w)| w.bound.is_none())
            .map(|(id, _)| *id)
    }

    pub(crate) fn set_bound(&mut self, id: u64, bound: Option<usize>) {
        if let Some(w) = self.map.get_mut(&id) {
            match (w.bound.is_none(), bound.is_none()) {
                (true, false) => self.unbound -= 1,
                (false, true) => self.unbound += 1,
                _ => {}
            }
            w.bound = bound;
        }
    }

    /// Removes every job, for closing.
    pub(crate) fn drain(&mut self) -> Vec<Waiter<W>> {
        self.unbound = 0;
        std::mem::take(&mut self.map).into_values().collect()
    }
}

impl<W> Waiter<W> {
    /// Hands the job its worker or its error. The receiver is only dropped
    /// under the pool's lock after its waiter was removed, so a send to a
    /// waiter still listed always arrives.
    pub(crate) fn send(self, grant: Grant<W>) -> Result<(), Grant<W>> {
        self.tx.send(grant)
    }
}
