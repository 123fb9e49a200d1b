//! Slots and their states: the one place where a slot changes state.
//!
//! A slot is a numbered place `0..capacity` that holds at most one worker.
//! Slots `0..size` are *running*; the others hold *kept* workers or nothing.
//!
//! # Invariants
//!
//! 1. A slot holds at most one worker, so the pool never runs more workers
//!    than its capacity: a new worker starts only in an `Empty` slot, and a
//!    slot becomes `Empty` only after its worker has ended (its exit was
//!    seen), or before a worker was made at all.
//! 2. A worker is in exactly one place: the slot (`Idle`), a lease (`Lent`),
//!    the warm-up task (`Starting`) or its close task (`Closing`).
//!    So no worker is lent twice.
//! 3. `Counts` always equals what a walk over the slots would count:
//!    every state change goes through [`Slots::set`] or [`Slots::update`],
//!    which move one unit from the old state's count to the new one's.
//! 4. A report from a task (warm-up done, exit seen, timer fired) names the
//!    slot and the worker's generation; a report whose generation is not the
//!    slot's current one is stale and changes nothing.
//! 5. Only running slots hold jobs' workers: idle workers in slots at or above
//!    `size` are *kept*, never lent and never evicted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::event::RetireReason;
use crate::worker::{Exit, Killer};

/// What the pool knows of one live worker, shared with its lease.
#[derive(Debug)]
pub(crate) struct WorkerCell {
    pub(crate) killer: Killer,
    pub(crate) started: Instant,
    /// When the worker has outlived its `max_lifetime` (with its jitter).
    pub(crate) deadline: Option<Instant>,
    /// The lifetime timer, aborted when the worker ends.
    pub(crate) timer: std::sync::Mutex<Option<AbortHandle>>,
    dead: AtomicBool,
    exit: std::sync::Mutex<Option<Exit>>,
    notify: Notify,
}

impl WorkerCell {
    pub(crate) fn new(killer: Killer, started: Instant, deadline: Option<Instant>) -> Self {
        Self {
            killer,
            started,
            deadline,
            timer: std::sync::Mutex::new(None),
            dead: AtomicBool::new(false),
            exit: std::sync::Mutex::new(None),
            notify: Notify::new(),
        }
    }

    /// Records that the worker ended and wakes a job that holds it.
    pub(crate) fn mark_dead(&self, exit: Option<Exit>) {
        if let Some(exit) = exit {
            *self.exit.lock().unwrap_or_else(|e| e.into_inner()) = Some(exit);
        }
        self.dead.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Whether the worker has outlived its lifetime now; reads the clock
    /// only for a worker that has a lifetime.
    pub(crate) fn expired_by(&self, now: &mut Now) -> bool {
        self.deadline.is_some_and(|d| now.get() >= d)
    }

    pub(crate) fn stop_timer(&self) {
        if let Some(t) = self.timer.lock().unwrap_or_else(|e| e.into_inner()).take() {
            t.abort();
        }
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    pub(crate) fn exit(&self) -> Option<Exit> {
        self.exit.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Resolves once the worker has ended.
    pub(crate) async fn died(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_dead() {
                return;
            }
            notified.await;
        }
    }
}

/// The time now, read from the pool's clock at most once and only if asked
/// for: a lend and return that needs no time reads no clock (ADR 0011).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Now(Option<Instant>);

impl Now {
    /// Not read yet.
    pub(crate) fn unread() -> Self {
        Self(None)
    }

    /// The time now, read on the first call.
    pub(crate) fn get(&mut self) -> Instant {
        *self.0.get_or_insert_with(Instant::now)
    }

    /// The time, if it was read.
    pub(crate) fn read(&self) -> Option<Instant> {
        self.0
    }
}

/// The state of one slot; each variant carries its data.
#[derive(Debug)]
pub(crate) enum SlotState<W> {
    /// No worker.
    Empty,
    /// A worker is being made or warms up, on a task of the pool.
    Starting {
        /// The waiter (by id) that this worker is meant for.
        awaited_by: Option<u64>,
        /// Set once the factory returned the worker.
        cell: Option<Arc<WorkerCell>>,
        task: AbortHandle,
    },
    /// A ready worker that no job holds.
    Idle {
        worker: W,
        /// When it turned idle; not read (`None`) when the pool's eviction
        /// never evicts.
        since: Option<Instant>,
        cell: Arc<WorkerCell>,
        /// The eviction timer, when one runs.
        timer: Option<AbortHandle>,
    },
    /// A job holds the worker through a lease.
    Lent { cell: Arc<WorkerCell> },
    /// The pool ends the worker (close or kill) and waits for its exit.
    Closing {
        cell: Arc<WorkerCell>,
        reason: EndReason,
    },
}

/// Why the pool ends a worker itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EndReason {
    /// An eviction let it go.
    Evicted,
    /// Retired: a job failed it, aborted, timed out, panicked; lifetime; reconfiguration.
    Retired(RetireReason),
    /// Its warm-up failed or timed out.
    WarmupFailed,
    /// The pool closes.
    PoolClosed,
    /// It ended on its own while lent; its exit is not seen yet.
    SelfExit,
    /// It ended while lent and its exit was seen; the slot waits for the
    /// lease to come back.
    Gone,
}

/// One slot.
#[derive(Debug)]
pub(crate) struct Slot<W> {
    pub(crate) state: SlotState<W>,
    /// Bumped for every new worker; reports with another number are stale.
    pub(crate) generation: u64,
    /// Early exits in a row (the back-off count).
    pub(crate) early_exits: u32,
    /// A back-off timer that will start this slot again (eager startups).
    pub(crate) backoff: Option<(Instant, AbortHandle)>,
    /// The slot's last worker was evicted: eager startups do not refill it.
    pub(crate) evicted: bool,
    /// The next worker here replaces one that crashed or was retired.
    pub(crate) replacing: bool,
}

impl<W> Slot<W> {
    fn new() -> Self {
        Self {
            state: SlotState::Empty,
            generation: 0,
            early_exits: 0,
            backoff: None,
            evicted: false,
            replacing: false,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        matches!(self.state, SlotState::Empty)
    }

    pub(crate) fn cell(&self) -> Option<&Arc<WorkerCell>> {
        match &self.state {
            SlotState::Empty => None,
            SlotState::Starting { cell, .. } => cell.as_ref(),
            SlotState::Idle { cell, .. }
            | SlotState::Lent { cell, .. }
            | SlotState::Closing { cell, .. } => Some(cell),
        }
    }

    pub(crate) fn cancel_backoff(&mut self) {
        if let Some((_, h)) = self.backoff.take() {
            h.abort();
        }
    }
}

/// The counts behind `stats()`, kept up to date by [`Slots::set`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) starting: usize,
    pub(crate) idle: usize,
    pub(crate) kept: usize,
    /// Lent workers in running slots.
    pub(crate) lent: usize,
    /// Lent workers in slots the sizing no longer runs (kept when returned).
    pub(crate) lent_above: usize,
    pub(crate) closing: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Empty,
    Starting,
    Idle,
    Kept,
    Lent,
    LentAbove,
    Closing,
}

/// Which numbers behind the pool's gauges changed: one bit per kind of
/// slot, one for the size and one for the capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Changes(u16);

impl Changes {
    const SIZE: u16 = 1 << 8;
    const CAPACITY: u16 = 1 << 9;
    const ALL: Self = Self(u16::MAX);
    const NONE: Self = Self(0);

    fn mark(&mut self, kind: Kind) {
        self.0 |= 1 << kind as u16;
    }

    fn has(self, kind: Kind) -> bool {
        self.0 & (1 << kind as u16) != 0
    }

    pub(crate) fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub(crate) fn starting(self) -> bool {
        self.has(Kind::Starting)
    }

    pub(crate) fn idle(self) -> bool {
        self.has(Kind::Idle)
    }

    pub(crate) fn kept(self) -> bool {
        self.has(Kind::Kept)
    }

    pub(crate) fn lent(self) -> bool {
        self.has(Kind::Lent) || self.has(Kind::LentAbove)
    }

    pub(crate) fn size(self) -> bool {
        self.0 & Self::SIZE != 0
    }

    pub(crate) fn capacity(self) -> bool {
        self.0 & Self::CAPACITY != 0
    }
}

/// A set of slot numbers as a bit set (the idle running slots).
#[derive(Debug, Default)]
pub(crate) struct SlotSet {
    words: Vec<u64>,
}

impl SlotSet {
    fn with_capacity(n: usize) -> Self {
        Self {
            words: vec![0; n.div_ceil(64)],
        }
    }
    fn insert(&mut self, i: usize) {
        self.words[i / 64] |= 1 << (i % 64);
    }
    fn remove(&mut self, i: usize) {
        self.words[i / 64] &= !(1 << (i % 64));
    }
    /// The lowest member in `from..to`.
    pub(crate) fn first_in(&self, from: usize, to: usize) -> Option<usize> {
        if from >= to {
            return None;
        }
        let mut w = from / 64;
        let mut bits = self.words.get(w)? & (!0u64 << (from % 64));
        loop {
            if bits != 0 {
                let i = w * 64 + bits.trailing_zeros() as usize;
                return (i < to).then_some(i);
            }
            w += 1;
            if w * 64 >= to {
                return None;
            }
            bits = *self.words.get(w)?;
        }
    }
}

/// All slots, their counts and the set of idle running slots.
#[derive(Debug)]
pub(crate) struct Slots<W> {
    /// Every slot ever made; those at or above `capacity` only drain (after a
    /// reconfiguration lowered the capacity).
    pub(crate) slots: Vec<Slot<W>>,
    capacity: usize,
    pub(crate) size: usize,
    pub(crate) counts: Counts,
    pub(crate) idle: SlotSet,
    /// What changed since [`take_changes`](Slots::take_changes); all at
    /// first, so that the first publish sets every gauge.
    changes: Changes,
}

impl<W> Slots<W> {
    pub(crate) fn new(capacity: usize, size: usize) -> Self {
        Self {
            slots: (0..capacity).map(|_| Slot::new()).collect(),
            capacity,
            size,
            counts: Counts::default(),
            idle: SlotSet::with_capacity(capacity),
            changes: Changes::ALL,
        }
    }

    /// What changed since the last call: the gauges to publish.
    pub(crate) fn take_changes(&mut self) -> Changes {
        std::mem::replace(&mut self.changes, Changes::NONE)
    }

    /// The most workers the pool may run now.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Changes the capacity (a reconfiguration). Slots above it drain: the
    /// pool ends their workers. The size is held within the new capacity.
    pub(crate) fn set_capacity(&mut self, capacity: usize) {
        let capacity = capacity.max(1);
        while self.slots.len() < capacity {
            self.slots.push(Slot::new());
        }
        if self.idle.words.len() * 64 < self.slots.len() {
            self.idle.words.resize(self.slots.len().div_ceil(64), 0);
        }
        let size = self.size.min(capacity);
        // Recount every slot whose kind may change with the new bounds.
        for i in 0..self.slots.len() {
            let k = self.kind(i, &self.slots[i].state);
            self.count(k, i, false);
        }
        self.capacity = capacity;
        self.size = size;
        self.changes.0 |= Changes::CAPACITY | Changes::SIZE;
        for i in 0..self.slots.len() {
            let k = self.kind(i, &self.slots[i].state);
            self.count(k, i, true);
        }
    }

    fn kind(&self, i: usize, state: &SlotState<W>) -> Kind {
        Self::kind_in(i, self.size, state)
    }

    #[inline]
    fn kind_in(i: usize, size: usize, state: &SlotState<W>) -> Kind {
        match state {
            SlotState::Empty => Kind::Empty,
            SlotState::Starting { .. } => Kind::Starting,
            SlotState::Idle { .. } if i < size => Kind::Idle,
            SlotState::Idle { .. } => Kind::Kept,
            SlotState::Lent { .. } if i < size => Kind::Lent,
            SlotState::Lent { .. } => Kind::LentAbove,
            SlotState::Closing { .. } => Kind::Closing,
        }
    }

    #[inline]
    fn count(&mut self, kind: Kind, i: usize, add: bool) {
        let c = &mut self.counts;
        let n = match kind {
            Kind::Empty => return,
            Kind::Starting => &mut c.starting,
            Kind::Idle => {
                if add {
                    self.idle.insert(i);
                } else {
                    self.idle.remove(i);
                }
                &mut c.idle
            }
            Kind::Kept => &mut c.kept,
            Kind::Lent => &mut c.lent,
            Kind::LentAbove => &mut c.lent_above,
            Kind::Closing => &mut c.closing,
        };
        if add {
            *n += 1;
        } else {
            *n -= 1;
        }
        self.changes.mark(kind);
    }

    /// Puts slot `i` into `new` and returns its old state. With
    /// [`update`](Slots::update), the only place a slot changes state
    /// (invariant 3).
    pub(crate) fn set(&mut self, i: usize, new: SlotState<W>) -> SlotState<W> {
        let old_kind = self.kind(i, &self.slots[i].state);
        let new_kind = self.kind(i, &new);
        self.count(old_kind, i, false);
        self.count(new_kind, i, true);
        std::mem::replace(&mut self.slots[i].state, new)
    }

    /// Puts slot `i` into the state `f` makes of its old one, and returns
    /// what else `f` gives back: a transition that moves data (the worker,
    /// its cell) from the old state into the new one. Counts follow as with
    /// [`set`](Slots::set).
    #[inline]
    pub(crate) fn update<R>(
        &mut self,
        i: usize,
        f: impl FnOnce(SlotState<W>) -> (SlotState<W>, R),
    ) -> R {
        let state = &mut self.slots[i].state;
        let old = std::mem::replace(state, SlotState::Empty);
        let old_kind = Self::kind_in(i, self.size, &old);
        let (new, r) = f(old);
        let new_kind = Self::kind_in(i, self.size, &new);
        let placeholder = std::mem::replace(state, new);
        // It is the `Empty` put there above, which holds nothing: forgetting
        // it spares an out-of-line call to its drop.
        debug_assert!(matches!(placeholder, SlotState::Empty));
        std::mem::forget(placeholder);
        self.count(old_kind, i, false);
        self.count(new_kind, i, true);
        r
    }

    /// Changes how many slots run, moving idle workers between idle and kept.
    pub(crate) fn resize(&mut self, size: usize) {
        let size = size.clamp(1, self.capacity);
        let (lo, hi) = (self.size.min(size), self.size.max(size));
        for i in lo..hi {
            let k = self.kind(i, &self.slots[i].state);
            self.count(k, i, false);
        }
        if size != self.size {
            self.changes.0 |= Changes::SIZE;
        }
        self.size = size;
        for i in lo..hi {
            let k = self.kind(i, &self.slots[i].state);
            self.count(k, i, true);
        }
    }

    /// Workers alive (made and not yet seen to end) or being made.
    pub(crate) fn alive(&self) -> usize {
        let c = &self.counts;
        c.starting + c.idle + c.kept + c.lent + c.lent_above + c.closing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_set_finds_the_lowest_member_in_a_range() {
        let mut s = SlotSet::with_capacity(200);
        for i in [3, 64, 130, 199] {
            s.insert(i);
        }
        assert_eq!(s.first_in(0, 200), Some(3));
        assert_eq!(s.first_in(4, 200), Some(64));
        assert_eq!(s.first_in(65, 200), Some(130));
        assert_eq!(s.first_in(65, 130), None);
        assert_eq!(s.first_in(131, 200), Some(199));
        s.remove(199);
        assert_eq!(s.first_in(131, 200), None);
        assert_eq!(s.first_in(0, 3), None);
    }
}
