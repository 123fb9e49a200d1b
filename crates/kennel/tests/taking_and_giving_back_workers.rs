//! Taking and giving back workers: the starting and the most workers, a lend
//! and its return, workers that crash, a lease given back failed, jobs that
//! panic holding a worker, and a worker given back after it is gone.
mod support;

use kennel::{Error, RetireReason};
use support::{
    Fake, Farm, advance, count, drain, ms, named_on_demand, named_parallel, retired, secs, settle,
    spawn_close,
};

// ----- init and max counts -----

#[tokio::test(start_paused = true)]
async fn an_eager_pool_starts_its_init_members_when_built() {
    let farm = Farm::new();
    let pool = named_parallel(&farm, "pg", 3);
    let mut events = pool.events();
    settle().await;
    assert_eq!(farm.made(), 3);
    let s = pool.stats();
    assert_eq!((s.idle, s.lent, s.starting), (3, 0, 0), "{s:?}");
    assert_eq!(count(&drain(&mut events), "worker:ready"), 3);
    pool.close().await;
}

#[tokio::test(start_paused = true)]
async fn an_on_demand_pool_grows_one_member_per_concurrent_job_up_to_its_max_then_queues() {
    let farm = Farm::with_warmup(secs(1));
    let pool = named_on_demand(&farm, "pg", 3);
    settle().await;
    assert_eq!(farm.made(), 0, "no member before the first take");
    let mut jobs = Vec::new();
    for n in 1..=4 {
        let p = pool.clone();
        jobs.push(tokio::spawn(async move {
            let lease = p.lend().await.unwrap();
            let slot = lease.slot();
            tokio::time::sleep(secs(10)).await;
            drop(lease);
            slot
        }));
        settle().await;
        assert_eq!(farm.made(), n.min(3), "after {n} concurrent jobs");
    }
    assert_eq!(
        pool.stats().waiting,
        4,
        "three wait for warm-ups, one queues"
    );
    advance(secs(1)).await;
    let s = pool.stats();
    assert_eq!((s.lent, s.waiting), (3, 1), "{s:?}");
    advance(secs(10)).await;
    let mut slots = Vec::new();
    for j in jobs {
        slots.push(j.await.unwrap());
    }
    assert_eq!(farm.made(), 3, "never more than max_count");
    slots.sort_unstable();
    assert_eq!(slots, [0, 0, 1, 2], "the queued job got a returned member");
}

// ----- take and return -----

#[tokio::test(start_paused = true)]
async fn a_taken_member_is_exclusive_until_it_is_returned() {
    let farm = Farm::new();
    let pool = named_parallel(&farm, "pg", 2);
    settle().await;
    let a = pool.lend().await.unwrap();
    let b = pool.lend().await.unwrap();
    assert_ne!(a.id, b.id, "two takers never share a member");
    let s = pool.stats();
    assert_eq!((s.idle, s.lent), (0, 2), "{s:?}");
    let id = a.id;
    drop(a);
    let s = pool.stats();
    assert_eq!((s.idle, s.lent), (1, 1), "{s:?}");
    assert!(!farm.has_exited(id), "a returned member stays alive");
    let again = pool.lend().await.unwrap();
    assert_eq!(again.id, id, "the returned member is taken again");
    assert_eq!(farm.made(), 2);
}

// ----- crashes -----

#[tokio::test(start_paused = true)]
async fn a_member_that_crashes_in_use_fails_its_job_and_the_next_job_gets_a_new_one() {
    let farm = Farm::new();
    let pool = named_parallel(&farm, "pg", 1);
    let mut events = pool.events();
    let f = farm.clone();
    let err = pool
        .run(async |w: &mut Fake| {
            f.exit(w.id);
            w.work(secs(3600)).await
        })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Crashed { .. }), "{err:?}");
    assert!(farm.has_exited(0));
    // The next job does not wait for the back-off.
    let id = pool.run(async |w: &mut Fake| w.id).await.unwrap();
    assert_eq!(id, 1, "a new member");
    let events = drain(&mut events);
    assert_eq!(count(&events, "worker:crashed"), 1, "{events:?}");
    // A lease whose member crashes sees it and gives it back.
    let lease = pool.lend().await.unwrap();
    lease.crash();
    settle().await;
    assert!(lease.has_exited());
    drop(lease);
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 2);
    assert_eq!(farm.alive(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_idle_member_that_crashes_is_replaced_after_the_back_off_under_an_eager_startup() {
    let farm = Farm::new();
    let pool = named_parallel(&farm, "pg", 2);
    settle().await;
    farm.exit(1);
    settle().await;
    let s = pool.stats();
    assert_eq!(
        (s.idle, s.starting),
        (1, 0),
        "the crashed member is in no count"
    );
    advance(ms(999)).await;
    assert_eq!(farm.made(), 2, "not before the 1 s back-off");
    advance(ms(1)).await;
    assert_eq!(farm.made(), 3);
    assert_eq!(farm.in_slot(1), Some(2), "slot 1 holds the replacement");
    assert_eq!(pool.stats().idle, 2);
}

#[tokio::test(start_paused = true)]
async fn an_idle_member_that_crashes_under_on_demand_is_replaced_by_the_next_job() {
    let farm = Farm::new();
    let pool = named_on_demand(&farm, "pg", 1);
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 0);
    farm.exit(0);
    advance(secs(120)).await;
    assert_eq!(farm.made(), 1, "on demand starts no member by itself");
    assert_eq!(pool.stats().idle, 0);
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 1);
}

// ----- return_member(.., fail) -----

#[tokio::test(start_paused = true)]
async fn a_member_returned_with_fail_is_killed_and_replaced_under_an_eager_startup() {
    let farm = Farm::new();
    let pool = named_parallel(&farm, "pg", 2);
    let mut events = pool.events();
    settle().await;
    let lease = pool.lend().await.unwrap();
    let (id, slot) = (lease.id, lease.slot());
    lease.fail();
    settle().await;
    assert!(farm.has_exited(id));
    assert_eq!(farm.made(), 3, "replaced at once, no back-off");
    assert_eq!(farm.in_slot(slot), Some(2));
    let events = drain(&mut events);
    assert_eq!(retired(&events), [(slot, RetireReason::Failed)]);
    assert_eq!(count(&events, "worker:backoff"), 0, "{events:?}");
    assert_eq!(pool.stats().idle, 2);
}

#[tokio::test(start_paused = true)]
async fn a_member_returned_with_fail_is_replaced_under_on_demand_too() {
    let farm = Farm::new();
    let pool = named_on_demand(&farm, "pg", 2);
    let lease = pool.lend().await.unwrap();
    assert_eq!(farm.made(), 1);
    lease.fail();
    settle().await;
    assert!(farm.has_exited(0));
    assert_eq!(farm.made(), 2, "a failed worker is replaced");
    assert_eq!(farm.in_slot(0), Some(1));
    assert_eq!(pool.stats().idle, 1);
}

// ----- crashed consumer -----

#[tokio::test(start_paused = true)]
async fn a_consumer_that_crashes_holding_a_member_has_it_destroyed_and_replaced() {
    let farm = Farm::new();
    let pool = named_parallel(&farm, "pg", 2);
    let mut events = pool.events();
    settle().await;
    let p = pool.clone();
    let consumer = tokio::spawn(async move {
        let lease = p.lend().await.unwrap();
        assert_eq!(lease.slot(), 0);
        tokio::time::sleep(secs(1)).await;
        panic!("the consumer crashed");
    });
    settle().await;
    assert_eq!(pool.stats().lent, 1);
    advance(secs(1)).await;
    assert!(consumer.await.unwrap_err().is_panic());
    settle().await;
    assert!(farm.has_exited(0), "its member is destroyed, not reused");
    assert!(!farm.has_exited(1));
    assert_eq!(farm.made(), 3, "and replaced");
    assert_eq!(farm.in_slot(0), Some(2));
    let s = pool.stats();
    assert_eq!((s.idle, s.lent), (2, 0), "{s:?}");
    assert_eq!(retired(&drain(&mut events)), [(0, RetireReason::Panicked)]);
}

#[tokio::test(start_paused = true)]
async fn a_consumer_that_crashes_under_on_demand_leaves_the_next_job_a_new_member() {
    let farm = Farm::new();
    let pool = named_on_demand(&farm, "pg", 1);
    let p = pool.clone();
    let consumer = tokio::spawn(async move {
        let _lease = p.lend().await.unwrap();
        panic!("the consumer crashed");
    });
    assert!(consumer.await.unwrap_err().is_panic());
    settle().await;
    assert!(farm.has_exited(0));
    let s = pool.stats();
    assert_eq!((s.idle, s.lent, s.starting), (0, 0, 0), "{s:?}");
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 1);
}

// ----- returning twice -----

/// In Rust a lease is returned by moving it (`drop`, `fail`), so it cannot
/// be returned twice. What is guarded against is a second return of a
/// member that is already gone; here that is a lease whose member ended on
/// its own, or a lease given back after the pool closed.
#[tokio::test(start_paused = true)]
async fn failing_a_lease_whose_member_already_crashed_replaces_it_once() {
    let farm = Farm::new();
    let pool = named_parallel(&farm, "pg", 2);
    let mut events = pool.events();
    settle().await;
    let lease = pool.lend().await.unwrap();
    farm.exit(lease.id);
    settle().await;
    // The crash is one return; `fail` now is a second one.
    lease.fail();
    settle().await;
    let s = pool.stats();
    assert_eq!((s.idle, s.lent), (1, 0), "{s:?}");
    advance(secs(1)).await;
    advance(secs(60)).await;
    assert_eq!(farm.made(), 3, "one replacement, not two");
    assert_eq!(farm.alive(), 2);
    let s = pool.stats();
    assert_eq!((s.idle, s.lent, s.starting), (2, 0, 0), "{s:?}");
    let events = drain(&mut events);
    assert_eq!(count(&events, "worker:crashed"), 1, "{events:?}");
    assert_eq!(count(&events, "worker:respawned"), 1, "{events:?}");
    assert!(retired(&events).is_empty(), "a dead member is not retired");
    // Both members still lend, one at a time each.
    let a = pool.lend().await.unwrap();
    let b = pool.lend().await.unwrap();
    assert_ne!(a.id, b.id);
    assert_eq!(pool.stats().lent, 2);
}

#[tokio::test(start_paused = true)]
async fn a_lease_given_back_after_the_pool_closed_ends_its_member_and_starts_none() {
    let farm = Farm::new();
    let pool = named_parallel(&farm, "pg", 3);
    settle().await;
    let returned = pool.lend().await.unwrap();
    let failed = pool.lend().await.unwrap();
    let closing = spawn_close(&pool);
    settle().await;
    assert!(farm.has_exited(2), "the idle member is closed at once");
    assert!(!farm.has_exited(0), "the lent ones finish their jobs");
    assert!(!farm.has_exited(1));
    assert!(!closing.is_finished());
    drop(returned);
    settle().await;
    assert!(farm.has_exited(0));
    assert_eq!(pool.stats().lent, 1);
    failed.fail();
    settle().await;
    assert!(closing.is_finished());
    closing.await.unwrap();
    assert_eq!(farm.alive(), 0);
    assert_eq!(
        farm.made(),
        3,
        "nothing replaces them, not even a failed one"
    );
    let s = pool.stats();
    assert_eq!((s.idle, s.lent, s.starting, s.kept), (0, 0, 0, 0), "{s:?}");
    assert!(matches!(pool.lend().await, Err(Error::Closed)));
}
