//! The slot state machine's transitions, tested on the slots alone.

use super::*;
use crate::slot::{Kind, Record, Slots};
use crate::worker::Killer;

fn live() -> Live {
    live_for(None)
}

/// A live worker started for `key` (`spawn`), or for none.
fn live_for(key: Option<crate::Key>) -> Live {
    Live {
        cell: Arc::new(WorkerCell::new(
            Killer::new(|| {}),
            Instant::now(),
            None,
            None,
            None,
        )),
        life: None,
        record: Record::default(),
        spawned_for: key,
    }
}

fn slots() -> Slots<&'static str> {
    Slots::new(2, 2)
}

/// Slots whose slot 0 holds a ready worker lent to a job.
fn lent() -> Slots<&'static str> {
    lent_for(None)
}

/// [`lent`], the worker started for `key`.
fn lent_for(key: Option<crate::Key>) -> Slots<&'static str> {
    let mut s = slots();
    let (warmup, _) = Timer::new();
    s.apply(0, |x| start(x, None, key.clone(), warmup));
    s.apply(0, |x| register(x, live_for(key)));
    s.apply(0, warm);
    s
}

#[test]
fn a_worker_goes_from_empty_to_idle_and_back_with_the_counts() {
    let mut s = slots();
    let (warmup, token) = Timer::new();
    assert_eq!(s.apply(0, |x| start(x, Some(7), None, warmup)), Some(false));
    assert_eq!(s.counts().starting, 1);
    assert!(s.apply(0, |x| register(x, live())).is_some());
    assert!(s.apply(0, |x| register(x, live())).is_none(), "once");
    assert_eq!(s.apply(0, warm), Some(Some(7)));
    assert!(token.is_cancelled(), "the warm-up's task is done with");
    assert_eq!((s.counts().starting, s.counts().lent), (0, 1));
    assert_eq!(s.apply(0, |x| to_idle(x, "w", None, None)), Some(Ok(())));
    assert_eq!((s.counts().lent, s.counts().idle), (0, 1));
    assert_eq!(
        s.apply(0, |x| to_idle(x, "v", None, None)),
        Some(Err("v")),
        "not lent: the worker comes back"
    );
    assert_eq!(s.first_idle_in(0, 2), Some(0));
    let (worker, _) = s.apply(0, lend_idle).expect("idle");
    assert_eq!(worker, "w");
    assert_eq!(s.first_idle_in(0, 2), None);
    assert!(s.apply(0, lend_idle).is_none(), "not idle: unchanged");
    assert_eq!(s.counts().lent, 1);
}

#[test]
fn an_idle_worker_that_exits_leaves_an_empty_slot() {
    let mut s = slots();
    let (warmup, _) = Timer::new();
    s.apply(1, |x| start(x, None, None, warmup));
    s.apply(1, |x| register(x, live()));
    s.apply(1, warm);
    let (evict, token) = Timer::new();
    assert!(s.apply(1, |x| to_idle(x, "w", Some(Instant::now()), Some(evict))) == Some(Ok(())));
    let ended = s.apply(1, exit_seen).expect("idle");
    assert!(matches!(ended, Ended::Idle("w")));
    assert!(token.is_cancelled(), "its eviction timer went with it");
    assert_eq!(s.alive(), 0);
    assert!(s.state(1).is_empty());
}

#[test]
fn a_retired_worker_is_replaced_and_an_evicted_one_rests() {
    for (reason, respawn, rests) in [
        (EndReason::Retired(crate::RetireReason::Failed), true, false),
        (EndReason::Evicted, false, true),
    ] {
        let mut s = lent();
        s.apply(0, |x| end_lent(x, reason));
        assert_eq!(s.counts().closing, 1);
        s.apply(0, exit_seen);
        match s.state(0) {
            SlotState::Empty {
                rest, respawn: r, ..
            } => {
                assert_eq!(*r, respawn);
                assert_eq!(matches!(rest, Rest::Evicted), rests);
            }
            other => panic!("not empty: {other:?}"),
        }
    }
}

#[test]
fn the_key_a_renewed_worker_was_started_for_reaches_the_empty_slot_a_crashed_ones_does_not() {
    let key = crate::Key::new("A").unwrap();
    for (reason, kept) in [
        (EndReason::Retired(crate::RetireReason::Lifetime), true),
        (EndReason::Retired(crate::RetireReason::KeyMoved), false),
        (EndReason::Crashed, false),
    ] {
        let mut s = lent_for(Some(key.clone()));
        s.apply(0, |x| end_lent(x, reason));
        s.apply(0, exit_seen);
        let (timer, _) = Timer::new();
        s.apply(0, |x| back_off(x, timer));
        s.apply(0, end_backoff);
        match s.state(0) {
            SlotState::Empty { restart_for, .. } => {
                assert_eq!(restart_for.is_some(), kept, "{reason:?}");
            }
            other => panic!("not empty: {other:?}"),
        }
    }
}

#[test]
fn a_back_off_carried_by_an_ended_lent_worker_reaches_the_empty_slot() {
    let mut s = lent();
    s.apply(0, lent_gone);
    assert_eq!(Kind::of(0, 2, s.state(0)), Kind::Closing);
    let (timer, token) = Timer::new();
    s.apply(0, |x| back_off(x, timer));
    s.apply(0, return_gone);
    assert!(matches!(
        s.state(0),
        SlotState::Empty {
            rest: Rest::BackOff(_),
            respawn: true,
            restart_for: None,
        }
    ));
    let (warmup, _) = Timer::new();
    assert_eq!(s.apply(0, |x| start(x, None, None, warmup)), Some(true));
    assert!(token.is_cancelled(), "a job's start ends the back-off");
}

#[test]
fn an_aborted_start_closes_a_made_worker_and_empties_an_unmade_one() {
    let mut s = slots();
    let (warmup, token) = Timer::new();
    s.apply(0, |x| start(x, Some(1), None, warmup));
    let a = s
        .apply(0, |x| abort_start(x, EndReason::PoolClosed))
        .expect("starting");
    assert!(a.killer.is_none() && a.awaited_by == Some(1));
    assert!(token.is_cancelled());
    assert!(s.state(0).is_empty());
    let (warmup, _) = Timer::new();
    s.apply(0, |x| start(x, None, None, warmup));
    s.apply(0, |x| register(x, live()));
    let a = s
        .apply(0, |x| abort_start(x, EndReason::PoolClosed))
        .expect("starting");
    assert!(a.killer.is_some());
    assert_eq!(s.counts().closing, 1);
}

#[test]
fn a_worker_moved_to_a_key_holds_the_slot_for_it_until_its_exit_is_seen() {
    let (a, b) = (crate::Key::new("A").unwrap(), crate::Key::new("B").unwrap());
    let mut s = lent_for(Some(a));
    assert_eq!(s.apply(0, |x| to_idle(x, "w", None, None)), Some(Ok(())));
    assert!(s.apply(0, |x| move_idle(x, b.clone())).is_some());
    match s.state(0) {
        SlotState::Closing { restart_for, .. } => assert_eq!(restart_for.as_ref(), Some(&b)),
        other => panic!("not closing: {other:?}"),
    }
    s.apply(0, exit_seen);
    // The job of B takes a place as any job does.
    assert!(matches!(
        s.state(0),
        SlotState::Empty {
            restart_for: None,
            ..
        }
    ));
}
