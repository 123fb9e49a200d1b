//! All slots and their counts.

use super::counts::{Counts, Kind};
use super::transitions::Step;
use super::{Side, Slot, SlotState};

/// The slots of a pool. Every change of a slot's state goes through
/// [`apply`](Slots::apply), which keeps the counts (invariant 3).
#[derive(Debug)]
pub(crate) struct Slots<W> {
    /// Every slot ever made; those at or above `capacity` only drain (after a
    /// reconfiguration lowered the capacity).
    slots: Vec<Slot<W>>,
    capacity: usize,
    size: usize,
    counts: Counts,
    /// Sides that hold a replacement (warming or warm).
    surging: usize,
    /// Sides that hold a worker on its way out.
    leaving: usize,
}

impl<W> Slots<W> {
    pub(crate) fn new(capacity: usize, size: usize) -> Self {
        Self {
            slots: (0..capacity).map(|_| Slot::new()).collect(),
            capacity,
            size,
            counts: Counts::default(),
            surging: 0,
            leaving: 0,
        }
    }

    /// The most workers the pool may run now.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many slots run now.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    pub(crate) fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Every slot ever made (running, kept, draining).
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn state(&self, i: usize) -> &SlotState<W> {
        &self.slots[i].state
    }

    /// The slot's number and back-off count, which no transition moves.
    pub(crate) fn slot_mut(&mut self, i: usize) -> (&mut u64, &mut u32) {
        let s = &mut self.slots[i];
        (&mut s.generation, &mut s.early_exits)
    }

    pub(crate) fn generation(&self, i: usize) -> u64 {
        self.slots[i].generation
    }

    pub(crate) fn early_exits(&self, i: usize) -> u32 {
        self.slots[i].early_exits
    }

    /// The slots `0..n` with their states.
    pub(crate) fn states(&self, n: usize) -> impl Iterator<Item = &SlotState<W>> {
        self.slots[..n.min(self.slots.len())]
            .iter()
            .map(|s| &s.state)
    }

    /// The lowest idle running slot in `from..to`.
    pub(crate) fn first_idle_in(&self, from: usize, to: usize) -> Option<usize> {
        (from..to.min(self.size)).find(|&i| self.slots[i].state.is_idle())
    }

    /// Changes slot `i` by the transition `f`, which takes the state by value
    /// and gives back the next one and what it moved out, or the same state
    /// when it does not apply (`None` then). The only way a state changes.
    pub(crate) fn apply<R>(
        &mut self,
        i: usize,
        f: impl FnOnce(SlotState<W>) -> Step<W, R>,
    ) -> Option<R> {
        let state = &mut self.slots[i].state;
        let old = std::mem::replace(state, SlotState::new());
        let old_kind = Kind::of(i, self.size, &old);
        match f(old) {
            Step::To(new, r) => {
                let new_kind = Kind::of(i, self.size, &new);
                *state = new;
                if old_kind != new_kind {
                    self.count(old_kind, false);
                    self.count(new_kind, true);
                }
                Some(r)
            }
            Step::Same(old) => {
                *state = old;
                None
            }
        }
    }

    /// Changes the data of slot `i`'s state in place where the kind stays
    /// (an idle worker's eviction timer, a live worker's lifetime).
    pub(crate) fn edit<R>(&mut self, i: usize, f: impl FnOnce(&mut SlotState<W>) -> R) -> R {
        let before = Kind::of(i, self.size, &self.slots[i].state);
        let r = f(&mut self.slots[i].state);
        debug_assert_eq!(before, Kind::of(i, self.size, &self.slots[i].state));
        r
    }

    fn count(&mut self, kind: Kind, add: bool) {
        if let Some(n) = self.counts.of(kind) {
            if add {
                *n += 1;
            } else {
                *n -= 1;
            }
        }
    }

    /// Recounts every slot around a change of the bounds `f` makes.
    fn rebound(&mut self, range: std::ops::Range<usize>, f: impl FnOnce(&mut Self)) {
        for i in range.clone() {
            let k = Kind::of(i, self.size, &self.slots[i].state);
            self.count(k, false);
        }
        f(self);
        for i in range {
            let k = Kind::of(i, self.size, &self.slots[i].state);
            self.count(k, true);
        }
    }

    /// Changes the capacity (a reconfiguration). Slots above it drain: the
    /// pool ends their workers. The size is held within the new capacity.
    pub(crate) fn set_capacity(&mut self, capacity: usize) {
        let capacity = capacity.max(1);
        while self.slots.len() < capacity {
            self.slots.push(Slot::new());
        }
        self.rebound(0..self.slots.len(), |s| {
            s.capacity = capacity;
            s.size = s.size.min(capacity);
        });
    }

    /// Changes how many slots run, moving idle workers between idle and kept.
    pub(crate) fn resize(&mut self, size: usize) {
        let size = size.clamp(1, self.capacity);
        let (lo, hi) = (self.size.min(size), self.size.max(size));
        self.rebound(lo..hi, |s| s.size = size);
    }

    /// Workers alive (made and not yet seen to end) or being made, the
    /// sides' too.
    pub(crate) fn alive(&self) -> usize {
        let c = &self.counts;
        c.starting
            + c.idle
            + c.kept
            + c.lent
            + c.lent_above
            + c.closing
            + self.surging
            + self.leaving
    }

    /// A new generation for a worker of slot `i` (its own or its side's).
    pub(crate) fn issue(&mut self, i: usize) -> u64 {
        let s = &mut self.slots[i];
        s.issued = s.issued.max(s.generation) + 1;
        s.issued
    }

    /// Makes `generation` the slot's own: its side's worker took it.
    pub(crate) fn adopt(&mut self, i: usize, generation: u64) {
        self.slots[i].generation = generation;
    }

    /// What slot `i` holds beside its worker.
    pub(crate) fn side(&self, i: usize) -> Option<&Side<W>> {
        self.slots[i].side.as_deref()
    }

    /// The generation of slot `i`'s side, if it has one.
    pub(crate) fn side_generation(&self, i: usize) -> Option<u64> {
        self.side(i).map(Side::generation)
    }

    /// Replacements warming or warm now.
    pub(crate) fn surging(&self) -> usize {
        self.surging
    }

    /// Workers a replacement took the slot of, not yet seen to end.
    pub(crate) fn leaving(&self) -> usize {
        self.leaving
    }

    /// Changes slot `i`'s side by `f`, keeping the side counts.
    pub(crate) fn set_side<R>(
        &mut self,
        i: usize,
        f: impl FnOnce(Option<Box<Side<W>>>) -> (Option<Box<Side<W>>>, R),
    ) -> R {
        let old = self.slots[i].side.take();
        self.count_side(old.as_deref(), false);
        let (new, r) = f(old);
        self.count_side(new.as_deref(), true);
        self.slots[i].side = new;
        r
    }

    fn count_side(&mut self, side: Option<&Side<W>>, add: bool) {
        let n = match side {
            None => return,
            Some(s) if s.is_surge() => &mut self.surging,
            Some(_) => &mut self.leaving,
        };
        if add {
            *n += 1;
        } else {
            *n -= 1;
        }
    }
}
