//! Whether a live worker is being replaced, and how: the mark its record
//! carries from the moment its replacement is planned until it leaves
//! (`max_surge`: see `engine/surge.rs` for the rules).

use crate::event::RetireReason;

/// The replacement mark of one live worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Replacement {
    /// None planned; the next one may warm first.
    #[default]
    None,
    /// Replaced warm first for this reason: its replacement warms, or
    /// waits for room to.
    WarmFirst(RetireReason),
    /// Its replacement could not warm beside it: a later one retires it
    /// first.
    SurgeGivenUp,
    /// Retired for this reason when its job returns, with no replacement
    /// warming first; never a known deadline (see
    /// [`give_up_surge`](Self::give_up_surge)).
    WhenFree(RetireReason),
}

/// Whether a worker retired for `reason` is renewed rather than dropped:
/// the retirements a warm replacement covers (its lifetime, its
/// `max_jobs`, its memory, a probe it survived, a resize). A worker started
/// for a key (`spawn`) and renewed is started again for it.
pub(crate) fn renews(reason: RetireReason) -> bool {
    matches!(
        reason,
        RetireReason::Lifetime
            | RetireReason::MaxJobs
            | RetireReason::MaxMemory
            | RetireReason::MaxGpuMemory
            | RetireReason::ProbeFailed
            | RetireReason::Resized
    )
}

impl Replacement {
    /// Why it is replaced, if it is.
    pub(crate) fn reason(self) -> Option<RetireReason> {
        match self {
            Self::WarmFirst(reason) | Self::WhenFree(reason) => Some(reason),
            Self::None | Self::SurgeGivenUp => None,
        }
    }

    /// Why it is retired when its job returns, if it is.
    pub(crate) fn when_free(self) -> Option<RetireReason> {
        match self {
            Self::WhenFree(reason) => Some(reason),
            _ => None,
        }
    }

    /// Why it is replaced warm first, if it is.
    pub(crate) fn warm_first(self) -> Option<RetireReason> {
        match self {
            Self::WarmFirst(reason) => Some(reason),
            _ => None,
        }
    }

    /// Whether no replacement may warm beside it any more.
    pub(crate) fn surge_refused(self) -> bool {
        matches!(self, Self::SurgeGivenUp | Self::WhenFree(_))
    }

    /// Marks it to be replaced warm first for `reason`, unless a surge was
    /// given up for it; whether it is marked.
    pub(crate) fn warm_first_for(&mut self, reason: RetireReason) -> bool {
        if self.surge_refused() {
            return false;
        }
        *self = Self::WarmFirst(reason);
        true
    }

    /// Its replacement cannot warm beside it. A replacement for a known
    /// deadline (its lifetime, its `max_jobs`) is dropped, since the worker
    /// retires at that deadline anyway; any other is kept, to retire it when
    /// free. Returns that reason.
    pub(crate) fn give_up_surge(&mut self) -> Option<RetireReason> {
        *self = match self.reason() {
            Some(reason) if !matches!(reason, RetireReason::Lifetime | RetireReason::MaxJobs) => {
                Self::WhenFree(reason)
            }
            _ => Self::SurgeGivenUp,
        };
        self.reason()
    }

    /// Its replacement is called off (a close, a smaller size, a lower
    /// `max_surge`): the worker stays, and keeps whether a surge was given
    /// up for it.
    pub(crate) fn call_off(&mut self) {
        *self = match *self {
            Self::WarmFirst(_) => Self::None,
            Self::WhenFree(_) => Self::SurgeGivenUp,
            other => other,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_whose_surge_was_given_up_is_not_marked_to_warm_first() {
        let mut r = Replacement::None;
        assert!(r.warm_first_for(RetireReason::Lifetime));
        assert_eq!(r.give_up_surge(), None, "a known deadline is dropped");
        assert_eq!(r, Replacement::SurgeGivenUp);
        assert!(!r.warm_first_for(RetireReason::Lifetime));
        assert_eq!(r, Replacement::SurgeGivenUp);
    }

    #[test]
    fn an_unknown_deadline_whose_surge_is_given_up_retires_when_free() {
        let mut r = Replacement::WarmFirst(RetireReason::Resized);
        assert_eq!(r.give_up_surge(), Some(RetireReason::Resized));
        assert_eq!(r, Replacement::WhenFree(RetireReason::Resized));
        assert!(r.surge_refused());
        r.call_off();
        assert_eq!(
            r,
            Replacement::SurgeGivenUp,
            "calling off keeps the refusal"
        );
    }

    #[test]
    fn a_replacement_called_off_whole_tries_a_surge_afresh() {
        let mut r = Replacement::SurgeGivenUp;
        assert!(r.surge_refused());
        r.call_off();
        assert!(r.surge_refused(), "calling off keeps the refusal");
        r = Replacement::None;
        assert_eq!(r, Replacement::None);
        assert!(r.warm_first_for(RetireReason::Resized));
        r = Replacement::WhenFree(RetireReason::Resized);
        assert_eq!(r.when_free(), Some(RetireReason::Resized));
        assert_eq!(r.warm_first(), None);
    }
}
