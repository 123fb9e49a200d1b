//! The counts behind `stats()`.

use super::{Held, Rest, SlotState};

/// How many slots are in each kind of state ([`Slots::counts`](super::Slots::counts)).
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
