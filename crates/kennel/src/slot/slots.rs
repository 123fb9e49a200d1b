//! All slots and their counts.

use super::counts::{Counts, Kind};
use super::transitions::Step;
use super::{Side, Slot, SlotState};

/// The slots of a pool. Every change of a slot's state goes through
/// [`apply`](Slots::apply).
#[derive(Debug)]
pub(crate) struct Slots<W> {
    /// Every slot ever made; those at or above `capacity` only drain (after a
    /// reconfiguration lowered the capacity).
    slots: Vec<Slot<W>>,
    capacity: usize,
    size: usize,
}

impl<W> Slots<W> {
    pub(crate) fn new(capacity: usize, size: usize) -> Self {
        Self {
            slots: (0..capacity).map(|_| Slot::new()).collect(),
            capacity,
            size,
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

    /// How many slots are in each kind of state, counted now.
    pub(crate) fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for (i, s) in self.slots.iter().enumerate() {
            if let Some(n) = c.of(Kind::of(i, self.size, &s.state)) {
                *n += 1;
            }
        }
        c
    }

    /// Every slot ever made (running, kept, draining).
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn state(&self, i: usize) -> &SlotState<W> {
        &self.slots[i].state
    }

    /// The slot's back-off count, which no transition moves.
    pub(crate) fn early_exits_mut(&mut self, i: usize) -> &mut u32 {
        &mut self.slots[i].early_exits
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
        match f(std::mem::replace(state, SlotState::new())) {
            Step::To(new, r) => {
                *state = new;
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

    /// Changes the capacity (a reconfiguration). Slots above it drain: the
    /// pool ends their workers. The size is held within the new capacity.
    pub(crate) fn set_capacity(&mut self, capacity: usize) {
        let capacity = capacity.max(1);
        while self.slots.len() < capacity {
            self.slots.push(Slot::new());
        }
        self.capacity = capacity;
        self.size = self.size.min(capacity);
    }

    /// Changes how many slots run, moving idle workers between idle and kept.
    pub(crate) fn resize(&mut self, size: usize) {
        self.size = size.clamp(1, self.capacity);
    }

    /// Workers alive (made and not yet seen to end) or being made, the
    /// sides' too.
    pub(crate) fn alive(&self) -> usize {
        let held = self.slots.iter().filter(|s| !s.state.is_empty()).count();
        held + self.sides().count()
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
        self.slots[i].side.as_ref()
    }

    /// The generation of slot `i`'s side, if it has one.
    pub(crate) fn side_generation(&self, i: usize) -> Option<u64> {
        self.side(i).map(Side::generation)
    }

    /// Replacements warming or warm now.
    pub(crate) fn surging(&self) -> usize {
        self.sides().filter(|s| s.is_surge()).count()
    }

    /// Workers a replacement took the slot of, not yet seen to end.
    pub(crate) fn leaving(&self) -> usize {
        self.sides().filter(|s| !s.is_surge()).count()
    }

    fn sides(&self) -> impl Iterator<Item = &Side<W>> {
        self.slots.iter().filter_map(|s| s.side.as_ref())
    }

    /// Changes slot `i`'s side by `f`.
    pub(crate) fn set_side<R>(
        &mut self,
        i: usize,
        f: impl FnOnce(Option<Side<W>>) -> (Option<Side<W>>, R),
    ) -> R {
        let (new, r) = f(self.slots[i].side.take());
        self.slots[i].side = new;
        r
    }
}
