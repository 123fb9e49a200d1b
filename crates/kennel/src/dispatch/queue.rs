//! The one queue of waiting jobs (ADR 0004; fair between tenants, ADR
//! 0065), and how a job that leaves it is handed its worker.

use std::collections::VecDeque;

use tokio::sync::oneshot;

use tokio::time::Instant;

use super::Grant;
use super::share::{Class, Shares};
use crate::error::Error;
use crate::key::Key;
use crate::timer::Timer;

/// A waiting job: what it waits for, and where its worker (or error) goes.
#[derive(Debug)]
pub(crate) struct Waiter<W> {
    /// The starting slot this job waits for (lending rules 2 and 3).
    pub(crate) bound: Option<usize>,
    /// A keyed job's key, when it came, and the timers of its
    /// `max_key_wait` and twice that (held, and cancelled by their drop).
    keyed: Option<(Key, Instant, [Timer; 2])>,
    /// The running slot an overdue keyed job claimed, and the timer of its
    /// next look at it (held, and cancelled by its drop).
    claim: Option<(usize, Option<Timer>)>,
    /// Its tenant and priority.
    pub(crate) class: Class,
    /// The job's end of the hand-over: sending wakes it.
    to: oneshot::Sender<Grant<W>>,
}

/// What the keyed lending order reads of a waiting job.
#[derive(Debug, Clone)]
pub(crate) struct Queued {
    pub(crate) id: u64,
    pub(crate) bound: Option<usize>,
    /// Its key, and when it came.
    pub(crate) key: Option<(Key, Instant)>,
}

/// A job that must wait: its place in the queue, and where its worker
/// comes (tokio's `oneshot`, which keeps the job's waker itself).
#[derive(Debug)]
pub(crate) struct Waiting<W> {
    pub(crate) id: u64,
    pub(crate) handed: oneshot::Receiver<Grant<W>>,
}

/// One job's grant, on its way.
pub(crate) type Handing<W> = (oneshot::Sender<Grant<W>>, Grant<W>);

/// Waiting jobs in arrival order; ids grow, so the first entry is the
/// oldest. The next to get a worker is the one the fair shares put first
/// ([`Shares`]): the oldest of its tenant's level, with one tenant and
/// level the oldest of all.
///
/// A job that leaves the queue with a worker (or an error) is handed it
/// through its own `oneshot`: the grants of a lock session are kept in
/// `granted` and sent once the lock is released ([`take_granted`]), and the
/// send wakes the job, which then takes its worker without any lock. A job
/// that gave up meanwhile refuses the send, and the worker goes back to the
/// pool.
///
/// [`take_granted`]: Waiters::take_granted
#[derive(Debug)]
pub(crate) struct Waiters<W> {
    queue: VecDeque<(u64, Waiter<W>)>,
    /// What the jobs that left the queue in this lock session were handed.
    granted: Vec<Handing<W>>,
    next_id: u64,
    /// The tenants' shares of the workers.
    pub(crate) shares: Shares,
}

impl<W> Waiters<W> {
    pub(crate) fn new() -> Self {
        Self {
            queue: VecDeque::new(),
            granted: Vec::new(),
            next_id: 0,
            shares: Shares::default(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    /// Jobs queued by rule 4 (not bound to a starting worker).
    pub(crate) fn unbound(&self) -> usize {
        self.queue.iter().filter(|(_, w)| w.bound.is_none()).count()
    }

    /// Adds a job of `class` at the back; gives its id and the end it is
    /// handed its worker through.
    pub(crate) fn push(&mut self, bound: Option<usize>, class: &Class) -> Waiting<W> {
        self.push_keyed(bound, None, class)
    }

    /// Adds a job at the back, with its key, when it came and the timer of
    /// its key's wait.
    pub(crate) fn push_keyed(
        &mut self,
        bound: Option<usize>,
        keyed: Option<(Key, Instant, [Timer; 2])>,
        class: &Class,
    ) -> Waiting<W> {
        let id = self.next_id;
        self.next_id += 1;
        let (to, handed) = oneshot::channel();
        self.shares.arrive(class);
        let class = class.clone();
        let waiter = Waiter {
            bound,
            keyed,
            claim: None,
            class,
            to,
        };
        self.queue.push_back((id, waiter));
        Waiting { id, handed }
    }

    /// Whether a waiting job has a key: the keyed lending order applies.
    pub(crate) fn any_keyed(&self) -> bool {
        self.queue.iter().any(|(_, w)| w.keyed.is_some())
    }

    /// The waiting jobs that may get a worker now (their tenants are under
    /// `max_running`), in the order the fair shares give them, as the keyed
    /// lending order reads them.
    pub(crate) fn snapshot(&self) -> Vec<Queued> {
        let may = |(_, w): &&(u64, Waiter<W>)| self.shares.may_run(w.class.tenant.as_ref());
        let jobs = self.queue.iter().filter(may).map(|(id, w)| (*id, &w.class));
        let order = self.shares.order(jobs);
        let queued = |id: u64| {
            let w = self.find(id)?;
            Some(Queued {
                id,
                bound: w.bound,
                key: w.keyed.as_ref().map(|(k, since, _)| (k.clone(), *since)),
            })
        };
        order.into_iter().filter_map(queued).collect()
    }

    /// How many jobs of `key` wait.
    pub(crate) fn queued(&self, key: &Key) -> usize {
        let of_key = |(_, w): &&(u64, Waiter<W>)| w.keyed.as_ref().is_some_and(|k| &k.0 == key);
        self.queue.iter().filter(of_key).count()
    }

    /// The key of job `id`, if it waits and has one.
    pub(crate) fn key_of(&self, id: u64) -> Option<&Key> {
        self.find(id)?.keyed.as_ref().map(|k| &k.0)
    }

    /// Removes a job (it gives up waiting, or gets its worker); returns it
    /// if it was there.
    pub(crate) fn remove(&mut self, id: u64) -> Option<Waiter<W>> {
        let at = self.at(id)?;
        let (_, w) = self.queue.remove(at)?;
        self.shares.leave(&w.class);
        Some(w)
    }

    /// The job that gets the next free worker: of the jobs whose tenants
    /// are under `max_running` (only those not bound to a starting worker,
    /// with `unbound_only`), the first by the fair shares.
    pub(crate) fn next(&self, unbound_only: bool) -> Option<u64> {
        let shares = &self.shares;
        let eligible = |(_, w): &&(u64, Waiter<W>)| {
            !(unbound_only && w.bound.is_some()) && shares.may_run(w.class.tenant.as_ref())
        };
        let ranked = |(id, w): &(u64, Waiter<W>)| (shares.rank(&w.class), *id);
        self.queue
            .iter()
            .filter(eligible)
            .map(ranked)
            .min_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal))
            .map(|(_, id)| id)
    }

    /// Hands a job just removed from the queue its worker or its error; it
    /// is sent (and the job woken) once the lock is released.
    pub(crate) fn grant(&mut self, waiter: Waiter<W>, grant: Grant<W>) {
        self.granted.push((waiter.to, grant));
    }

    /// What was granted in this lock session, to send once the lock is
    /// released.
    pub(crate) fn take_granted(&mut self) -> Vec<Handing<W>> {
        std::mem::take(&mut self.granted)
    }

    /// Removes job `id` from the queue, if it waits there, and hands it an
    /// error.
    pub(crate) fn fail(&mut self, id: u64, err: Error) {
        if let Some(w) = self.remove(id) {
            self.grant(w, Err(err));
        }
    }

    /// The oldest job not bound to a starting worker.
    pub(crate) fn oldest_unbound(&self) -> Option<u64> {
        let mut unbound = self.queue.iter().filter(|(_, w)| w.bound.is_none());
        unbound.next().map(|(id, _)| *id)
    }

    /// The tenants of the waiting jobs (`None`: jobs without one), each
    /// once.
    pub(crate) fn tenants(&self) -> Vec<Option<&crate::Tenant>> {
        let mut tenants: Vec<Option<&crate::Tenant>> = self
            .queue
            .iter()
            .map(|(_, w)| w.class.tenant.as_ref())
            .collect();
        tenants.sort();
        tenants.dedup();
        tenants
    }

    /// The class of waiting job `id`.
    pub(crate) fn class_of(&self, id: u64) -> Option<&Class> {
        self.find(id).map(|w| &w.class)
    }

    /// Where job `id` waits: the queue is in the order of the ids.
    fn at(&self, id: u64) -> Option<usize> {
        self.queue.binary_search_by_key(&id, |(i, _)| *i).ok()
    }

    /// Waiting job `id`.
    fn find(&self, id: u64) -> Option<&Waiter<W>> {
        self.queue.get(self.at(id)?).map(|(_, w)| w)
    }

    /// The youngest job not bound to a starting worker.
    pub(crate) fn youngest_unbound(&self) -> Option<u64> {
        let mut unbound = self.queue.iter().filter(|(_, w)| w.bound.is_none());
        unbound.next_back().map(|(id, _)| *id)
    }

    pub(crate) fn set_bound(&mut self, id: u64, bound: Option<usize>) {
        if let Some((_, w)) = self.at(id).and_then(|at| self.queue.get_mut(at)) {
            w.bound = bound;
        }
    }

    /// The running slot waiting job `id` claimed.
    pub(crate) fn claim_of(&self, id: u64) -> Option<usize> {
        self.find(id)?.claim.as_ref().map(|c| c.0)
    }

    /// The running slots claimed by other waiting jobs than `id`.
    pub(crate) fn claimed_but(&self, id: u64) -> Vec<usize> {
        self.queue
            .iter()
            .filter(|(other, _)| *other != id)
            .filter_map(|(_, w)| w.claim.as_ref().map(|c| c.0))
            .collect()
    }

    /// Sets (or, `None`, drops) waiting job `id`'s claim.
    pub(crate) fn set_claim(&mut self, id: u64, claim: Option<(usize, Option<Timer>)>) {
        if let Some((_, w)) = self.at(id).and_then(|at| self.queue.get_mut(at)) {
            w.claim = claim;
        }
    }

    /// Gives each waiting keyed job the timers `timers` makes from when it
    /// came (a new `max_key_wait`); the old ones are cancelled by their drop.
    pub(crate) fn rearm_keyed(&mut self, mut timers: impl FnMut(Instant) -> [Timer; 2]) {
        for (_, w) in &mut self.queue {
            if let Some((_, since, t)) = &mut w.keyed {
                *t = timers(*since);
            }
        }
    }

    /// Fails every waiting job with `Closed`, for closing.
    pub(crate) fn close(&mut self) {
        for (_, w) in std::mem::take(&mut self.queue) {
            self.shares.leave(&w.class);
            self.grant(w, Err(Error::Closed));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends what was granted, as the engine does after the lock.
    fn send<W>(w: &mut Waiters<W>) {
        for (to, grant) in w.take_granted() {
            let _ = to.send(grant);
        }
    }

    #[test]
    fn waiters_keep_arrival_order() {
        let mut w = Waiters::<()>::new();
        let mut jobs: Vec<Waiting<()>> = (0..5).map(|_| w.push(None, &Class::default())).collect();
        let ids: Vec<u64> = jobs.iter().map(|j| j.id).collect();
        assert!(w.remove(ids[2]).is_some());
        assert!(w.remove(ids[2]).is_none(), "removed once");
        assert_eq!(w.len(), 4);
        assert_eq!(w.next(false), Some(ids[0]), "one tenant: the oldest");
        assert_eq!(w.remove(ids[0]).map(|o| o.bound), Some(None));
        assert!(w.remove(ids[1]).is_some());
        assert_eq!(w.queue.front().map(|e| e.0), Some(ids[3]));
        w.set_bound(ids[3], Some(7));
        assert_eq!(w.unbound(), 1);
        assert_eq!(w.oldest_unbound(), Some(ids[4]));
        assert!(w.granted.is_empty());
        w.close();
        assert_eq!(w.len(), 0);
        assert_eq!(w.granted.len(), 2, "both are handed their error");
        assert!(
            jobs[3].handed.try_recv().is_err(),
            "not before the lock is released"
        );
        send(&mut w);
        assert!(matches!(jobs[3].handed.try_recv(), Ok(Err(Error::Closed))));
        assert!(matches!(jobs[4].handed.try_recv(), Ok(Err(Error::Closed))));
        assert!(w.take_granted().is_empty(), "sent once");
    }

    #[test]
    fn a_job_that_gave_up_refuses_what_it_is_handed() {
        let mut w = Waiters::<u32>::new();
        let mut gone = w.push(None, &Class::default());
        let kept = w.push(None, &Class::default());
        gone.handed.close();
        let first = w.next(false).and_then(|id| w.remove(id)).expect("waits");
        w.grant(first, Err(Error::Closed));
        let mut handed = w.take_granted();
        assert_eq!(handed.len(), 1);
        let (to, grant) = handed.pop().expect("granted");
        assert!(to.send(grant).is_err(), "the receiver closed");
        assert_eq!(w.len(), 1);
        drop(kept);
    }
}
