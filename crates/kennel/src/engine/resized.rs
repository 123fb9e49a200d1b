//! `replace_on_resize`: workers whose start depends on the running size (a
//! thread budget of `cores / size`) are replaced when the size changes, so
//! that the pool runs each size with what that size gives its workers.

use super::effects::Effects;
use super::state::State;
use crate::event::RetireReason;
use crate::slot::{Held, Replacement, SlotState};
use crate::worker::Worker;

/// What a running slot's ready worker needs, by the size it started at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fit {
    /// Nothing to do: it started at the running size, is kept, or is being
    /// replaced for another reason.
    Fits,
    /// It started at another size, and nothing replaces it yet.
    Stale { idle: bool },
    /// It is being replaced for its size, and no longer needs to be: the
    /// size came back, the slot is kept, or the option was turned off.
    NotWanted,
}

impl<W: Worker> State<W> {
    /// The size changed, or `replace_on_resize` was turned on or off:
    /// replaces each running worker that started at another size, and calls
    /// off the replacements no longer wanted (the option is off, the size
    /// came back, the slot is kept).
    /// Returns the slots whose worker it began to replace.
    pub(crate) fn replace_resized(&mut self, fx: &mut Effects<W>) -> Vec<usize> {
        (0..self.slots.len())
            .filter(|&i| self.replace_if_resized(fx, i))
            .collect()
    }

    /// Replaces the worker of slot `i` if it runs and started at another
    /// size: warm first within `max_surge`; else an idle one now and a lent
    /// one when its job returns. Whether it began to replace it.
    pub(crate) fn replace_if_resized(&mut self, fx: &mut Effects<W>, i: usize) -> bool {
        if self.closed {
            return false;
        }
        let reason = RetireReason::Resized;
        match self.fit(i) {
            Fit::Fits => false,
            Fit::NotWanted => {
                self.cancel_surge(fx, i);
                // Called off whole: the next replacement tries a surge afresh.
                self.with_record(i, |r| r.replacement = Replacement::None);
                false
            }
            Fit::Stale { idle } => {
                if self.replace_later(fx, i, reason) {
                    return true;
                }
                if idle {
                    self.retire_idle(fx, i, reason);
                } else {
                    // No surge: retired when its job returns.
                    self.with_record(i, |r| r.replacement = Replacement::WhenFree(reason));
                }
                true
            }
        }
    }

    fn fit(&self, i: usize) -> Fit {
        let SlotState::Ready { live, held } = self.slots.state(i) else {
            return Fit::Fits;
        };
        let size = self.slots.size();
        let wanted = self.opts.replace_on_resize && i < size;
        let r = &live.record;
        match r.replacement.reason() {
            Some(RetireReason::Resized) if !wanted || r.size == size => Fit::NotWanted,
            None if wanted && r.size != size => Fit::Stale {
                idle: matches!(held, Held::Idle { .. }),
            },
            _ => Fit::Fits,
        }
    }
}

/// Whether every running ready worker of `slots` started at the running
/// size: a learning sizing counts its windows only then.
pub(crate) fn all_at_size<W>(slots: &crate::slot::Slots<W>) -> bool {
    let size = slots.size();
    slots.states(size).all(|s| match s {
        SlotState::Ready { live, .. } => live.record.size == size,
        _ => true,
    })
}
