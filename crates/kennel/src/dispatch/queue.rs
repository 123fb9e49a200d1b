//! The one FIFO of waiting jobs (ADR 0004).

use std::collections::VecDeque;
use std::task::{Context, Poll, Waker};

use super::{Grant, Mailbox};
use crate::error::Error;

/// A waiting job: what it waits for, and how to wake it.
#[derive(Debug)]
pub(crate) struct Waiter {
    /// The starting slot this job waits for (lending rules 2 and 3).
    pub(crate) bound: Option<usize>,
    /// Set when the job was polled and found nothing yet.
    waker: Option<Waker>,
}

/// Waiting jobs in arrival order; ids grow, so the first entry is the oldest.
///
/// A queue of entries sorted by id, found by binary search. A job that
/// leaves from the middle leaves a hole (its entry holds no waiter) instead
/// of shifting the ones behind it; holes at either end are dropped at once,
/// and the queue is compacted when holes outnumber the jobs.
///
/// A job that leaves the queue with a worker (or an error) finds it in the
/// pool's [`Mailbox`] when it is next polled: no channel per job. What is
/// granted in a lock session waits in `granted` and moves to the mailbox
/// before the lock is released. A job dropped before it took its grant hands
/// the worker back.
#[derive(Debug)]
pub(crate) struct Waiters<W> {
    queue: VecDeque<Entry>,
    /// What jobs that left the queue were handed in this lock session.
    granted: Vec<(u64, Grant<W>)>,
    /// Jobs waiting (entries that hold a waiter).
    len: usize,
    next_id: u64,
    unbound: usize,
    /// Jobs handed something under the lock, woken once it is released
    /// (`deliver`), so that a woken job never finds the lock still held.
    wake_one: Option<Waker>,
    wake_more: Vec<Waker>,
}

#[derive(Debug)]
struct Entry {
    id: u64,
    waiter: Option<Waiter>,
}

impl<W> Waiters<W> {
    pub(crate) fn new() -> Self {
        Self {
            queue: VecDeque::new(),
            granted: Vec::new(),
            len: 0,
            next_id: 0,
            unbound: 0,
            wake_one: None,
            wake_more: Vec::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Jobs queued by rule 4 (not bound to a starting worker).
    pub(crate) fn unbound(&self) -> usize {
        self.unbound
    }

    /// Sets the waker of job `id`, just pushed, so that it need not be
    /// polled again to be woken.
    pub(crate) fn set_waker(&mut self, id: u64, waker: &Waker) {
        let at = match self.queue.back() {
            Some(e) if e.id == id => Some(self.queue.len() - 1),
            _ => self.find(id),
        };
        if let Some(w) = at.and_then(|at| self.queue[at].waiter.as_mut()) {
            w.waker = Some(waker.clone());
        }
    }

    /// Adds a job at the back; returns its id.
    pub(crate) fn push(&mut self, bound: Option<usize>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        if bound.is_none() {
            self.unbound += 1;
        }
        self.queue.push_back(Entry {
            id,
            waiter: Some(Waiter { bound, waker: None }),
        });
        self.len += 1;
        id
    }

    fn find(&self, id: u64) -> Option<usize> {
        self.queue.binary_search_by_key(&id, |e| e.id).ok()
    }

    /// Removes a job that gives up waiting; returns it if it was there.
    ///
    /// Every other way out of the queue hands the job a grant (`grant`,
    /// `fail`, `close`): a waiting job that finds no grant in the mailbox is
    /// still in the queue with its waker, which lets it skip the pool's lock
    /// when polled for another reason.
    pub(crate) fn remove(&mut self, id: u64) -> Option<Waiter> {
        let at = self.find(id)?;
        let w = self.queue[at].waiter.take()?;
        self.len -= 1;
        if w.bound.is_none() {
            self.unbound -= 1;
        }
        self.tidy();
        Some(w)
    }

    /// Removes the oldest job and returns it with its id.
    pub(crate) fn take_oldest(&mut self) -> Option<(u64, Waiter)> {
        // The front entry holds a job whenever there is one (`tidy`).
        let entry = self.queue.pop_front()?;
        let w = entry.waiter?;
        self.len -= 1;
        if w.bound.is_none() {
            self.unbound -= 1;
        }
        self.tidy();
        Some((entry.id, w))
    }

    /// Hands job `id`, just removed from the queue as `waiter`, its worker
    /// or its error; it is woken when the lock is released.
    pub(crate) fn grant(&mut self, id: u64, waiter: Waiter, grant: Grant<W>) {
        self.granted.push((id, grant));
        if let Some(waker) = waiter.waker {
            if self.wake_one.is_none() {
                self.wake_one = Some(waker);
            } else {
                self.wake_more.push(waker);
            }
        }
    }

    /// Moves what was granted in this lock session to the mailbox and
    /// returns the jobs to wake once the lock is released (none in most lock
    /// sessions: no allocation then).
    pub(crate) fn deliver(&mut self, mailbox: &Mailbox<W>) -> Option<(Waker, Vec<Waker>)> {
        if !self.granted.is_empty() {
            mailbox.put(&mut self.granted);
        }
        let one = self.wake_one.take()?;
        Some((one, std::mem::take(&mut self.wake_more)))
    }

    /// Removes job `id` from the queue, if it waits there, and hands it an
    /// error.
    pub(crate) fn fail(&mut self, id: u64, err: Error) {
        if let Some(w) = self.remove(id) {
            self.grant(id, w, Err(err));
        }
    }

    /// `Pending` (its waker kept) while job `id` waits; a job that neither
    /// waits nor finds a grant in the mailbox was dropped from the pool's
    /// sight: it reads as closed.
    pub(crate) fn poll_waiting(&mut self, id: u64, cx: &mut Context<'_>) -> Poll<Grant<W>> {
        let waiter = self.find(id).and_then(|at| self.queue[at].waiter.as_mut());
        match waiter {
            Some(w) => {
                match &mut w.waker {
                    Some(waker) => waker.clone_from(cx.waker()),
                    None => w.waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            None => Poll::Ready(Err(Error::Closed)),
        }
    }

    /// Drops the holes at both ends, and all of them once they outnumber
    /// the jobs, so the queue stays within twice the jobs (plus a few).
    fn tidy(&mut self) {
        while self.queue.front().is_some_and(|e| e.waiter.is_none()) {
            self.queue.pop_front();
        }
        while self.queue.back().is_some_and(|e| e.waiter.is_none()) {
            self.queue.pop_back();
        }
        if self.queue.len() > 2 * self.len + 16 {
            self.queue.retain(|e| e.waiter.is_some());
        }
    }

    fn waiting(&self) -> impl Iterator<Item = (u64, &Waiter)> {
        self.queue
            .iter()
            .filter_map(|e| e.waiter.as_ref().map(|w| (e.id, w)))
    }

    /// The oldest job not bound to a starting worker.
    pub(crate) fn oldest_unbound(&self) -> Option<u64> {
        if self.unbound == 0 {
            return None;
        }
        self.waiting()
            .find(|(_, w)| w.bound.is_none())
            .map(|(id, _)| id)
    }

    /// The youngest job not bound to a starting worker.
    pub(crate) fn youngest_unbound(&self) -> Option<u64> {
        if self.unbound == 0 {
            return None;
        }
        self.queue
            .iter()
            .rev()
            .find(|e| e.waiter.as_ref().is_some_and(|w| w.bound.is_none()))
            .map(|e| e.id)
    }

    pub(crate) fn set_bound(&mut self, id: u64, bound: Option<usize>) {
        let Some(at) = self.find(id) else {
            return;
        };
        if let Some(w) = self.queue[at].waiter.as_mut() {
            match (w.bound.is_none(), bound.is_none()) {
                (true, false) => self.unbound -= 1,
                (false, true) => self.unbound += 1,
                _ => {}
            }
            w.bound = bound;
        }
    }

    /// Fails every waiting job with `Closed`, for closing.
    pub(crate) fn close(&mut self) {
        self.unbound = 0;
        self.len = 0;
        for e in std::mem::take(&mut self.queue) {
            if let Some(w) = e.waiter {
                self.grant(e.id, w, Err(Error::Closed));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiters_keep_arrival_order_through_holes() {
        let mut w = Waiters::<()>::new();
        let ids: Vec<u64> = (0..5).map(|_| w.push(None)).collect();
        assert!(w.remove(ids[2]).is_some());
        assert!(w.remove(ids[2]).is_none(), "removed once");
        assert_eq!(w.len(), 4);
        assert_eq!(
            w.take_oldest().map(|(id, o)| (id, o.bound)),
            Some((ids[0], None))
        );
        assert!(w.remove(ids[1]).is_some());
        // The hole left by ids[2] is dropped with the front.
        assert_eq!(w.queue.front().map(|e| e.id), Some(ids[3]));
        w.set_bound(ids[3], Some(7));
        assert_eq!(w.unbound(), 1);
        assert_eq!(w.oldest_unbound(), Some(ids[4]));
        w.close();
        assert!(w.is_empty());
        let mailbox = Mailbox::new();
        assert!(w.deliver(&mailbox).is_none(), "no waker was set");
        assert!(matches!(mailbox.take(ids[3]), Some(Err(Error::Closed))));
        assert!(matches!(mailbox.take(ids[4]), Some(Err(Error::Closed))));
        assert!(mailbox.take(ids[4]).is_none());
    }

    #[test]
    fn holes_behind_an_old_job_are_compacted() {
        let mut w = Waiters::<()>::new();
        let first = w.push(None);
        for _ in 0..10_000 {
            let id = w.push(None);
            w.push(None);
            assert!(w.remove(id).is_some());
        }
        assert_eq!(w.len(), 10_001);
        assert!(w.queue.len() <= 2 * w.len() + 16);
        assert_eq!(w.queue.front().map(|e| e.id), Some(first));
        // Far more holes than jobs: still within bounds.
        let ids: Vec<u64> = w.waiting().map(|(id, _)| id).skip(1).collect();
        for id in ids {
            assert!(w.remove(id).is_some());
        }
        assert_eq!(w.len(), 1);
        assert!(w.queue.len() <= 2 * w.len() + 16);
        assert_eq!(w.queue.front().map(|e| e.id), Some(first));
    }
}
