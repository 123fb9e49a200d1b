//! How many messages an instance may ask for: as many as its pool has
//! workers that can take a job now, less the messages it holds already.

use kennel::Stats;

/// The workers of a pool that can take a job now: idle ones, starting ones
/// no job awaits, and empty running slots where a job would start one
/// (not those backing off after an early exit), less the jobs that already
/// wait for one of them. None while the pool is broken: its jobs would fail
/// at once.
///
/// `waiting` counts both the jobs bound to a starting worker and the
/// queued ones; a job queues only when nothing else can take it, so the
/// subtraction is exact whichever kind waits.
pub(crate) fn takers(stats: &Stats) -> usize {
    if stats.broken {
        return 0;
    }
    let occupied = stats.starting + stats.idle + stats.lent;
    let empty = stats
        .size
        .saturating_sub(occupied)
        .saturating_sub(stats.backing_off);
    (stats.idle + stats.starting + empty).saturating_sub(stats.waiting)
}

/// The messages to ask for now: [`takers`], less the messages this
/// instance holds that have no worker yet (`unplaced`) and the messages
/// asked for and not yet delivered (`asked`).
///
/// A held message whose job waits for a worker is counted twice, once in
/// `stats.waiting` and once in `unplaced`: the instance then asks for less
/// than it could, never for more.
pub(crate) fn credits(stats: &Stats, unplaced: usize, asked: usize) -> usize {
    takers(stats).saturating_sub(unplaced + asked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(starting: usize, idle: usize, lent: usize, waiting: usize, size: usize) -> Stats {
        let mut s = Stats::default();
        s.starting = starting;
        s.idle = idle;
        s.lent = lent;
        s.waiting = waiting;
        s.size = size;
        s.capacity = size;
        s
    }

    #[test]
    fn idle_workers_and_empty_running_slots_take_jobs() {
        assert_eq!(takers(&stats(0, 2, 0, 0, 2)), 2);
        // On demand, nothing started yet: each empty slot would start one.
        assert_eq!(takers(&stats(0, 0, 0, 0, 3)), 3);
        assert_eq!(takers(&stats(0, 1, 1, 0, 3)), 2);
    }

    #[test]
    fn a_starting_worker_counts_only_when_no_job_awaits_it() {
        assert_eq!(takers(&stats(2, 0, 0, 0, 2)), 2);
        assert_eq!(takers(&stats(2, 0, 0, 1, 2)), 1);
        assert_eq!(takers(&stats(2, 0, 0, 2, 2)), 0);
    }

    #[test]
    fn a_busy_pool_with_a_queue_takes_nothing() {
        assert_eq!(takers(&stats(0, 0, 2, 0, 2)), 0);
        assert_eq!(takers(&stats(0, 0, 2, 5, 2)), 0);
    }

    #[test]
    fn a_broken_pool_and_slots_backing_off_take_nothing() {
        let mut s = stats(0, 0, 0, 0, 2);
        s.broken = true;
        assert_eq!(takers(&s), 0);
        let mut s = stats(0, 0, 1, 0, 2);
        s.backing_off = 1;
        assert_eq!(takers(&s), 0);
    }

    #[test]
    fn held_and_asked_messages_are_taken_off_the_credits() {
        let s = stats(0, 4, 0, 0, 4);
        assert_eq!(credits(&s, 1, 2), 1);
        assert_eq!(credits(&s, 3, 3), 0);
    }
}
