//! How far ahead of its last job a worker's replacement starts
//! (`max_jobs` with `max_surge`, ADR 0040).
//!
//! One replacement needs about one warm-up of surge room. When the last
//! jobs of several workers fall due close together, `max_surge` rooms
//! cannot warm them all in the last warm-up before each: the second would
//! wait for room and its worker would be retired before its replacement is
//! ready. So the pool plans backwards, as a scheduler of jobs with
//! deadlines on `max_surge` machines does: the worker due first starts
//! early enough that every worker due after it, in turn, still finds room
//! one warm-up before its own due time.

use tokio::time::Instant;

use super::state::State;
use crate::slot::{Replacement, SlotState};
use crate::worker::Worker;

/// The latest time from now, in seconds, at which the replacement of a
/// worker due in `own` seconds may start, when `later` (the workers due
/// at or after it, in any order) follow it, each replacement holding one of
/// `rooms` for `hold` seconds.
///
/// The worker due `j`-th from it (itself the 0th) needs `⌊j / rooms⌋ + 1`
/// holds of room before its due time, all of them after this one starts.
pub(crate) fn latest_start(own: f64, later: &mut [f64], hold: f64, rooms: usize) -> f64 {
    let rooms = rooms.max(1);
    later.sort_unstable_by(f64::total_cmp);
    let mut start = own - hold;
    for (k, due) in later.iter().enumerate() {
        let j = k + 1;
        start = start.min(due - ((j / rooms) + 1) as f64 * hold);
    }
    start
}

impl<W: Worker> State<W> {
    /// In how many seconds slot `j`'s ready worker serves its last job, at
    /// the pace it has served them, if it has a `max_jobs`, has served one
    /// and no replacement is on its way for it.
    pub(super) fn jobs_due_in(&self, j: usize, now: Instant) -> Option<f64> {
        if self.slots.side(j).is_some() {
            return None;
        }
        let SlotState::Ready { live, .. } = self.slots.state(j) else {
            return None;
        };
        let r = &live.record;
        match (r.max_jobs, r.ready_after, r.replacement) {
            (Some(max), Some(ready_after), Replacement::None) if r.jobs > 0 => {
                let ready_at = live.cell.started + ready_after;
                let served = now.saturating_duration_since(ready_at).as_secs_f64();
                Some(served / r.jobs as f64 * max.saturating_sub(r.jobs) as f64)
            }
            _ => None,
        }
    }

    /// Whether the replacement of slot `i`'s worker should start now: its
    /// last job is due within one warm-up, or the workers due after it need
    /// it to go first to find room in time.
    pub(super) fn jobs_lead_reached(&self, i: usize) -> bool {
        let now = self.now;
        let Some(own) = self.jobs_due_in(i, now) else {
            return false;
        };
        let hold = self.warmups.ahead().as_secs_f64();
        let rooms = self.opts.max_surge;
        // Only those due before `rooms` more holds could move it earlier.
        let horizon = own + hold * (self.slots.size() / rooms.max(1) + 1) as f64;
        let mut later: Vec<f64> = (0..self.slots.size())
            .filter(|&j| j != i)
            .filter_map(|j| self.jobs_due_in(j, now))
            .filter(|&due| due >= own && due < horizon)
            .collect();
        latest_start(own, &mut later, hold, rooms) <= 0.0
    }
}

#[cfg(test)]
mod tests {
    use super::latest_start;

    #[test]
    fn a_worker_alone_starts_its_replacement_one_hold_before_it_is_due() {
        assert_eq!(latest_start(10.0, &mut [], 3.0, 1), 7.0);
    }

    #[test]
    fn a_worker_followed_closely_by_another_starts_early_enough_for_both() {
        // The other is due 1 s after it: its replacement must start at 8,
        // so this one must be done holding the room by then.
        assert_eq!(latest_start(10.0, &mut [11.0], 3.0, 1), 5.0);
    }

    #[test]
    fn workers_due_far_apart_do_not_move_each_other() {
        assert_eq!(latest_start(10.0, &mut [30.0, 20.0], 3.0, 1), 7.0);
    }

    #[test]
    fn two_rooms_warm_two_replacements_at_once() {
        // With 2 rooms the next one shares the first hold; the one after
        // needs a second.
        assert_eq!(latest_start(10.0, &mut [10.0], 3.0, 2), 7.0);
        assert_eq!(latest_start(10.0, &mut [10.0, 10.0], 3.0, 2), 4.0);
    }

    #[test]
    fn workers_due_at_once_chain_back_one_hold_each() {
        assert_eq!(latest_start(9.0, &mut [9.0, 9.0, 9.0], 2.0, 1), 1.0);
    }
}
