//! The counts behind `stats()`, and the set of idle running slots.

use super::{Held, Rest, SlotState};

/// How many slots are in each kind of state; kept by [`Slots`](super::Slots).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) starting: usize,
    pub(crate) idle: usize,
    pub(crate) kept: usize,
    /// Lent workers in running slots.
    pub(crate) lent: usize,
    /// Lent workers in slots the sizing no longer runs (kept when returned).
    pub(crate) lent_above: usize,
    /// Workers the pool ends, and lent ones that have ended.
    pub(crate) closing: usize,
    /// Empty running slots that wait for their back-off to end.
    pub(crate) backing_off: usize,
}

/// Which count a slot's state adds to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Empty,
    BackingOff,
    Starting,
    Idle,
    Kept,
    Lent,
    LentAbove,
    Closing,
}

impl Kind {
    /// The kind of `state` in slot `i` of a pool that runs `size` slots.
    pub(crate) fn of<W>(i: usize, size: usize, state: &SlotState<W>) -> Self {
        match state {
            SlotState::Empty {
                rest: Rest::BackOff(_),
                ..
            } if i < size => Self::BackingOff,
            SlotState::Empty { .. } => Self::Empty,
            SlotState::Starting { .. } => Self::Starting,
            SlotState::Ready {
                held: Held::Idle { .. },
                ..
            } if i < size => Self::Idle,
            SlotState::Ready {
                held: Held::Idle { .. },
                ..
            } => Self::Kept,
            SlotState::Ready {
                held: Held::Lent, ..
            } if i < size => Self::Lent,
            SlotState::Ready {
                held: Held::Lent, ..
            } => Self::LentAbove,
            SlotState::LentGone { .. } | SlotState::Closing { .. } => Self::Closing,
        }
    }
}

impl Counts {
    /// The count of `kind`, or `None` for empty slots.
    pub(crate) fn of(&mut self, kind: Kind) -> Option<&mut usize> {
        Some(match kind {
            Kind::Empty => return None,
            Kind::BackingOff => &mut self.backing_off,
            Kind::Starting => &mut self.starting,
            Kind::Idle => &mut self.idle,
            Kind::Kept => &mut self.kept,
            Kind::Lent => &mut self.lent,
            Kind::LentAbove => &mut self.lent_above,
            Kind::Closing => &mut self.closing,
        })
    }
}

/// A set of slot numbers as a bit set (the idle running slots).
#[derive(Debug, Default)]
pub(crate) struct SlotSet {
    words: Vec<u64>,
}

impl SlotSet {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self {
            words: vec![0; n.div_ceil(64)],
        }
    }

    /// Makes room for slots `0..n`.
    pub(crate) fn grow(&mut self, n: usize) {
        if self.words.len() * 64 < n {
            self.words.resize(n.div_ceil(64), 0);
        }
    }

    pub(crate) fn insert(&mut self, i: usize) {
        self.words[i / 64] |= 1 << (i % 64);
    }

    pub(crate) fn remove(&mut self, i: usize) {
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
