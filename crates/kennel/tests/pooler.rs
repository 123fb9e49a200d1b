//! pooler's own scenarios (its eunit suite), ported to kennel: take and
//! return, `fail`, crashed members and consumers, init and max counts,
//! culling, queueing, auto-grow, named pools and groups, reconfiguration,
//! lifetime and `call_free_members`.
mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kennel::{
    Action, Error, Event, Fixed, IdleTimeout, OnDemand, Parallel, Pool, Reconfig, Registry,
    RejectReason, RetireReason,
};
use support::{Fake, Farm, Steer, Warmup, advance, drain, ms, secs, settle};

/// A pool started all at once, as pooler starts `init_count` members.
fn eager(farm: &Farm, name: &str, n: usize) -> Pool<Fake> {
    Pool::builder(farm.factory())
        .name(name)
        .startup(Parallel)
        .sizing(Fixed(n))
        .build()
        .unwrap()
}

/// A pool that starts members only when a job needs one.
fn on_demand(farm: &Farm, name: &str, n: usize) -> Pool<Fake> {
    Pool::builder(farm.factory())
        .name(name)
        .startup(OnDemand)
        .sizing(Fixed(n))
        .build()
        .unwrap()
}

fn retired(events: &[Event]) -> Vec<(usize, RetireReason)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Retired { slot, reason } => Some((*slot, *reason)),
            _ => None,
        })
        .collect()
}

/// The answer of a call that must not wait (a refusal, never a queue).
async fn at_once<F: Future>(call: F) -> F::Output {
    tokio::time::timeout(secs(1), call)
        .await
        .expect("answered at once, not queued")
}

fn count(events: &[Event], name: &str) -> usize {
    events.iter().filter(|e| e.name() == name).count()
}

// ----- init and max counts -----

#[tokio::test(start_paused = true)]
async fn an_eager_pool_starts_its_init_members_when_built() {
    let farm = Farm::new();
    let pool = eager(&farm, "pg", 3);
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
    let pool = on_demand(&farm, "pg", 3);
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
    let pool = eager(&farm, "pg", 2);
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

// ----- named pools -----

#[tokio::test(start_paused = true)]
async fn an_unknown_pool_is_no_such_pool_naming_it() {
    let farm = Farm::new();
    let registry = Registry::new();
    registry.add(eager(&farm, "pg_db1", 1)).unwrap();
    assert!(registry.get("pg_db1").is_ok());
    let err = registry.get("rc8081").unwrap_err();
    assert!(
        matches!(&err, Error::NoSuchPool { name } if name == "rc8081"),
        "{err:?}"
    );
    assert!(err.to_string().contains("rc8081"), "{err}");
    let err = registry
        .reconfigure("rc8081", Reconfig::new().max_waiting(1))
        .unwrap_err();
    assert!(
        matches!(&err, Error::NoSuchPool { name } if name == "rc8081"),
        "{err:?}"
    );
    let err = registry.remove("rc8081").await.unwrap_err();
    assert!(
        matches!(&err, Error::NoSuchPool { name } if name == "rc8081"),
        "{err:?}"
    );
    registry.close_all().await;
}

#[tokio::test(start_paused = true)]
async fn a_second_pool_with_a_taken_name_is_refused_and_the_first_stays() {
    let first = Farm::new();
    let second = Farm::new();
    let registry = Registry::new();
    registry.add(eager(&first, "rc8081", 1)).unwrap();
    let err = registry
        .add_to_group(eager(&second, "rc8081", 1), "riak")
        .unwrap_err();
    assert!(
        matches!(&err, Error::DuplicatePool { name } if name == "rc8081"),
        "{err:?}"
    );
    assert!(err.to_string().contains("rc8081"), "{err}");
    settle().await;
    assert_eq!(registry.list().len(), 1);
    assert_eq!(
        registry.list()[0].group,
        None,
        "the first pool is untouched"
    );
    assert!(registry.groups().is_empty());
    let lease = registry.get("rc8081").unwrap().lend().await.unwrap();
    assert!(
        !first.has_exited(lease.id),
        "the lease comes from the first pool"
    );
    assert_eq!(second.alive(), 0, "the refused pool's workers ended");
}

// ----- crashes -----

#[tokio::test(start_paused = true)]
async fn a_member_that_crashes_in_use_fails_its_job_and_the_next_job_gets_a_new_one() {
    let farm = Farm::new();
    let pool = eager(&farm, "pg", 1);
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
    let pool = eager(&farm, "pg", 2);
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
    let pool = on_demand(&farm, "pg", 1);
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
    let pool = eager(&farm, "pg", 2);
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
    let pool = on_demand(&farm, "pg", 2);
    let lease = pool.lend().await.unwrap();
    assert_eq!(farm.made(), 1);
    lease.fail();
    settle().await;
    assert!(farm.has_exited(0));
    assert_eq!(
        farm.made(),
        2,
        "pooler starts a member to replace a failed one"
    );
    assert_eq!(farm.in_slot(0), Some(1));
    assert_eq!(pool.stats().idle, 1);
}

// ----- crashed consumer -----

#[tokio::test(start_paused = true)]
async fn a_consumer_that_crashes_holding_a_member_has_it_destroyed_and_replaced() {
    let farm = Farm::new();
    let pool = eager(&farm, "pg", 2);
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
    let pool = on_demand(&farm, "pg", 1);
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
/// be returned twice. What pooler guards against is a second return of a
/// member that is already gone; here that is a lease whose member ended on
/// its own, or a lease given back after the pool closed.
#[tokio::test(start_paused = true)]
async fn failing_a_lease_whose_member_already_crashed_replaces_it_once() {
    let farm = Farm::new();
    let pool = eager(&farm, "pg", 2);
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
    let pool = eager(&farm, "pg", 3);
    settle().await;
    let returned = pool.lend().await.unwrap();
    let failed = pool.lend().await.unwrap();
    let p = pool.clone();
    let closing = tokio::spawn(async move { p.close().await });
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

// ----- groups -----

fn lent_from(registry: &Registry<Fake>) -> Vec<String> {
    registry
        .list()
        .into_iter()
        .filter(|e| e.stats.lent > 0)
        .map(|e| e.name)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_group_lends_from_its_pools_and_uses_each_of_them() {
    let farm = Farm::new();
    let registry = Registry::new();
    registry
        .add_to_group(eager(&farm, "rc8081", 2), "riak")
        .unwrap();
    registry
        .add_to_group(eager(&farm, "rc8082", 2), "riak")
        .unwrap();
    registry.add(eager(&farm, "pg_db1", 2)).unwrap();
    settle().await;
    let group = registry.group("riak");
    assert_eq!(group.name(), "riak");
    assert_eq!(group.pools().len(), 2);
    let mut used = std::collections::BTreeMap::<String, usize>::new();
    for _ in 0..50 {
        let lease = group.lend().await.unwrap();
        let from = lent_from(&registry);
        assert_eq!(from.len(), 1, "one pool lent: {from:?}");
        *used.entry(from[0].clone()).or_default() += 1;
        drop(lease);
        assert!(lent_from(&registry).is_empty(), "returned to its pool");
    }
    assert_eq!(
        used.keys().collect::<Vec<_>>(),
        ["rc8081", "rc8082"],
        "both pools of the group were used, never the other: {used:?}"
    );
    registry.close_all().await;
}

#[tokio::test(start_paused = true)]
async fn a_group_whose_picked_pool_is_busy_lends_from_another() {
    let farm = Farm::new();
    let registry = Registry::new();
    registry
        .add_to_group(eager(&farm, "rc8081", 1), "riak")
        .unwrap();
    registry
        .add_to_group(eager(&farm, "rc8082", 1), "riak")
        .unwrap();
    settle().await;
    let held = registry.get("rc8081").unwrap().lend().await.unwrap();
    for _ in 0..20 {
        let lease = registry.group("riak").lend().await.unwrap();
        assert_ne!(lease.id, held.id);
        assert_eq!(registry.get("rc8082").unwrap().stats().lent, 1);
        assert_eq!(
            registry.get("rc8081").unwrap().stats().waiting,
            0,
            "never queued"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_group_skips_a_pool_whose_new_member_fails_its_warm_up() {
    let broken = Farm::new();
    broken.plan([Warmup::Fails(ms(10)); 40]);
    let fine = Farm::new();
    let registry = Registry::new();
    registry
        .add_to_group(on_demand(&broken, "rc8081", 1), "riak")
        .unwrap();
    registry
        .add_to_group(eager(&fine, "rc8082", 1), "riak")
        .unwrap();
    settle().await;
    for _ in 0..20 {
        let lease = registry.group("riak").lend().await.unwrap();
        assert_eq!(lease.id, 0, "lent from the pool that works");
    }
    assert!(broken.made() > 0, "the broken pool was tried");
    assert_eq!(broken.alive(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_group_with_every_pool_exhausted_has_no_members() {
    let farm = Farm::new();
    let registry = Registry::new();
    registry
        .add_to_group(eager(&farm, "rc8081", 1), "riak")
        .unwrap();
    registry
        .add_to_group(eager(&farm, "rc8082", 1), "riak")
        .unwrap();
    settle().await;
    let group = registry.group("riak");
    let a = group.lend().await.unwrap();
    let b = group.lend().await.unwrap();
    assert_ne!(a.id, b.id);
    let err = at_once(group.lend()).await.unwrap_err();
    assert!(
        matches!(&err, Error::NoMembers { group } if group == "riak"),
        "{err:?}"
    );
    assert!(err.to_string().contains("riak"), "{err}");
    for e in registry.list() {
        assert_eq!(e.stats.waiting, 0, "{} queued a group job", e.name);
    }
    drop(a);
    let c = group.lend().await.unwrap();
    assert_eq!(farm.made(), 2);
    drop((b, c));
}

#[tokio::test(start_paused = true)]
async fn a_group_with_no_pool_has_no_members() {
    let farm = Farm::new();
    let registry = Registry::new();
    registry
        .add_to_group(eager(&farm, "rc8081", 1), "riak")
        .unwrap();
    let err = at_once(registry.group("redis").lend()).await.unwrap_err();
    assert!(
        matches!(&err, Error::NoMembers { group } if group == "redis"),
        "{err:?}"
    );
    let err = registry
        .group("redis")
        .run(async |w: &mut Fake| w.id)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoMembers { .. }), "{err:?}");
}

#[tokio::test(start_paused = true)]
async fn a_group_run_uses_the_job_timeout_of_the_pool_it_picked() {
    let farm = Farm::new();
    let registry = Registry::new();
    for (name, limit) in [("fast", 2), ("slow", 4)] {
        let pool = Pool::builder(farm.factory())
            .name(name)
            .startup(Parallel)
            .sizing(Fixed(1))
            .job_timeout(secs(limit))
            .build()
            .unwrap();
        registry.add_to_group(pool, "riak").unwrap();
    }
    settle().await;
    let group = registry.group("riak");
    let answer = group.run(async |w: &mut Fake| w.work(secs(1)).await).await;
    assert!(answer.is_ok(), "{answer:?}");
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..40 {
        let picked = Arc::new(Mutex::new(Vec::new()));
        let (r, p) = (registry.clone(), picked.clone());
        let err = group
            .run(async move |w: &mut Fake| {
                *p.lock().unwrap() = lent_from(&r);
                w.work(secs(60)).await
            })
            .await
            .unwrap_err();
        let picked = picked.lock().unwrap().clone();
        let want = if picked == ["fast"] { secs(2) } else { secs(4) };
        assert_eq!(picked.len(), 1, "{picked:?}");
        assert!(
            matches!(err, Error::Timeout { after } if after == want),
            "{picked:?}: {err:?}"
        );
        seen.insert(picked[0].clone());
        settle().await;
    }
    assert_eq!(seen.len(), 2, "both pools were picked: {seen:?}");
}

// ----- culling -----

#[tokio::test(start_paused = true)]
async fn culling_lets_idle_members_go_down_to_the_floor_and_never_an_in_use_one() {
    let farm = Farm::new();
    let pool = Pool::builder(farm.factory())
        .startup(OnDemand)
        .sizing(Fixed(4))
        .eviction(IdleTimeout::new(secs(30)).unwrap().keep(2))
        .build()
        .unwrap();
    // A burst takes four members.
    let mut leases = Vec::new();
    for _ in 0..4 {
        leases.push(pool.lend().await.unwrap());
    }
    assert_eq!(farm.made(), 4);
    let busy = leases.pop().unwrap();
    drop(leases);
    advance(secs(29)).await;
    assert_eq!(pool.stats().idle, 3, "not before max_age");
    advance(secs(1)).await;
    let s = pool.stats();
    assert_eq!(
        (s.idle, s.lent),
        (1, 1),
        "culled down to init_count 2: {s:?}"
    );
    assert_eq!(farm.alive(), 2);
    // The member in use is never culled, however long it is held.
    advance(secs(600)).await;
    assert!(!farm.has_exited(busy.id));
    assert_eq!(pool.stats().lent, 1);
    drop(busy);
    advance(secs(600)).await;
    let s = pool.stats();
    assert_eq!((s.idle, s.lent), (2, 0), "the floor holds: {s:?}");
    assert_eq!(farm.made(), 4);
}

// ----- queueing -----

#[tokio::test(start_paused = true)]
async fn a_take_queues_up_to_max_waiting_and_gives_up_after_its_timeout() {
    let farm = Farm::new();
    let pool = Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(Fixed(1))
        .max_waiting(2)
        .build()
        .unwrap();
    let held = pool.lend().await.unwrap();
    let p = pool.clone();
    let patient = tokio::spawn(async move { p.lend().await.map(|l| l.id) });
    settle().await;
    let p = pool.clone();
    let hasty = tokio::spawn(async move { p.lend_timeout(secs(5)).await.map(|l| l.id) });
    settle().await;
    assert_eq!(pool.stats().waiting, 2);
    let err = at_once(pool.lend()).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Rejected {
                reason: RejectReason::QueueFull
            }
        ),
        "{err:?}"
    );
    advance(ms(4999)).await;
    assert!(!hasty.is_finished());
    advance(ms(1)).await;
    let err = hasty.await.unwrap().unwrap_err();
    assert!(
        matches!(err, Error::LendTimeout { after } if after == secs(5)),
        "{err:?}"
    );
    assert_eq!(pool.stats().waiting, 1, "the timed-out take left the queue");
    let id = held.id;
    drop(held);
    assert_eq!(patient.await.unwrap().unwrap(), id);
    // The same bound for `run`.
    let held = pool.lend().await.unwrap();
    let err = pool
        .run_timeout(ms(10), async |w: &mut Fake| w.id)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::LendTimeout { after } if after == ms(10)),
        "{err:?}"
    );
    drop(held);
    assert_eq!(
        pool.run_timeout(ms(10), async |w: &mut Fake| w.id)
            .await
            .unwrap(),
        id
    );
}

// ----- auto-grow -----

/// An on-demand pool with two idle members out of four.
async fn two_idle_of_four(farm: &Farm, threshold: Option<usize>) -> Pool<Fake> {
    let mut builder = Pool::builder(farm.factory())
        .startup(OnDemand)
        .sizing(Fixed(4));
    if let Some(n) = threshold {
        builder = builder.auto_grow_threshold(n);
    }
    let pool = builder.build().unwrap();
    let a = pool.lend().await.unwrap();
    let b = pool.lend().await.unwrap();
    drop((a, b));
    settle().await;
    assert_eq!(farm.made(), 2);
    assert_eq!(pool.stats().idle, 2);
    pool
}

#[tokio::test(start_paused = true)]
async fn auto_grow_starts_a_member_ahead_of_demand_when_idle_ones_drop_to_the_threshold() {
    let farm = Farm::with_warmup(secs(1));
    let pool = two_idle_of_four(&farm, Some(1)).await;
    let first = pool.lend().await.unwrap();
    settle().await;
    assert_eq!(
        farm.made(),
        3,
        "one idle left: a member starts ahead of demand"
    );
    assert_eq!(farm.started_slots(), [0, 1, 2]);
    let s = pool.stats();
    assert_eq!((s.idle, s.starting, s.lent), (1, 1, 1), "{s:?}");
    advance(secs(1)).await;
    assert_eq!(pool.stats().idle, 2);
    drop(first);
    assert_eq!(pool.stats().idle, 3);
}

#[tokio::test(start_paused = true)]
async fn without_auto_grow_taking_an_idle_member_starts_none() {
    let farm = Farm::with_warmup(secs(1));
    let pool = two_idle_of_four(&farm, None).await;
    let first = pool.lend().await.unwrap();
    let second = pool.lend().await.unwrap();
    advance(secs(5)).await;
    assert_eq!(farm.made(), 2);
    let s = pool.stats();
    assert_eq!((s.idle, s.starting, s.lent), (0, 0, 2), "{s:?}");
    drop((first, second));
}

// ----- reconfiguration -----

fn has(actions: &[Action], a: &Action) -> bool {
    actions.contains(a)
}

#[tokio::test(start_paused = true)]
async fn reconfiguring_a_higher_count_starts_new_members_under_an_eager_startup() {
    let farm = Farm::new();
    let registry = Registry::new();
    registry.add(eager(&farm, "pg", 2)).unwrap();
    settle().await;
    let actions = registry
        .reconfigure("pg", Reconfig::new().sizing(Fixed(4)))
        .unwrap();
    assert!(
        has(&actions, &Action::CapacityChanged { from: 2, to: 4 }),
        "{actions:?}"
    );
    assert!(
        has(&actions, &Action::Resized { from: 2, to: 4 }),
        "{actions:?}"
    );
    assert!(
        has(&actions, &Action::OptionChanged { option: "sizing" }),
        "{actions:?}"
    );
    let pool = registry.get("pg").unwrap();
    let s = pool.stats();
    assert_eq!((s.capacity, s.size), (4, 4), "{s:?}");
    settle().await;
    assert_eq!(farm.made(), 4);
    assert_eq!(farm.started_slots(), [0, 1, 2, 3]);
    assert_eq!(pool.stats().idle, 4);
    let mut leases = Vec::new();
    for _ in 0..4 {
        leases.push(pool.lend().await.unwrap());
    }
    assert_eq!(farm.made(), 4, "four members lent without a new start");
}

#[tokio::test(start_paused = true)]
async fn reconfiguring_a_higher_count_serves_a_queued_job_at_once() {
    let farm = Farm::new();
    let pool = on_demand(&farm, "pg", 1);
    let held = pool.lend().await.unwrap();
    let p = pool.clone();
    let queued = tokio::spawn(async move { p.lend().await.map(|l| l.slot()) });
    settle().await;
    assert_eq!(pool.stats().waiting, 1);
    let actions = pool.reconfigure(Reconfig::new().sizing(Fixed(3))).unwrap();
    assert!(
        has(&actions, &Action::CapacityChanged { from: 1, to: 3 }),
        "{actions:?}"
    );
    assert_eq!(
        queued.await.unwrap().unwrap(),
        1,
        "a new member for the queued job"
    );
    settle().await;
    assert_eq!(farm.made(), 2, "on demand: no member for a job not there");
    let s = pool.stats();
    assert_eq!((s.capacity, s.size, s.idle, s.lent), (3, 3, 1, 1), "{s:?}");
    drop(held);
}

#[tokio::test(start_paused = true)]
async fn reconfiguring_a_lower_count_closes_idle_members_now_and_lent_ones_when_returned() {
    let farm = Farm::new();
    let pool = eager(&farm, "pg", 3);
    let mut events = pool.events();
    settle().await;
    let a = pool.lend().await.unwrap();
    let mut b = pool.lend().await.unwrap();
    assert_eq!((a.slot(), b.slot()), (0, 1));
    drop(a);
    let actions = pool.reconfigure(Reconfig::new().sizing(Fixed(1))).unwrap();
    assert!(
        has(&actions, &Action::CapacityChanged { from: 3, to: 1 }),
        "{actions:?}"
    );
    assert!(
        has(&actions, &Action::Resized { from: 3, to: 1 }),
        "{actions:?}"
    );
    assert!(has(&actions, &Action::Retired { slot: 1 }), "{actions:?}");
    assert!(has(&actions, &Action::Retired { slot: 2 }), "{actions:?}");
    assert!(!has(&actions, &Action::Retired { slot: 0 }), "{actions:?}");
    settle().await;
    assert!(
        farm.has_exited(2),
        "the idle member above the new count is closed"
    );
    assert!(!farm.has_exited(1), "the lent one finishes its job");
    let s = pool.stats();
    assert_eq!((s.capacity, s.size, s.idle, s.lent), (1, 1, 1, 1), "{s:?}");
    assert_eq!(b.work(secs(1)).await, 1, "the lent member still works");
    drop(b);
    settle().await;
    assert!(farm.has_exited(1), "closed when returned");
    assert_eq!(farm.made(), 3, "and not replaced");
    let s = pool.stats();
    assert_eq!((s.capacity, s.size, s.idle, s.lent), (1, 1, 1, 0), "{s:?}");
    let got = retired(&drain(&mut events));
    assert_eq!(
        got,
        [
            (2, RetireReason::Reconfigured),
            (1, RetireReason::Reconfigured)
        ]
    );
    // One member now: a second job queues.
    let held = pool.lend().await.unwrap();
    let p = pool.clone();
    let next = tokio::spawn(async move { p.lend().await.map(|l| l.slot()) });
    settle().await;
    assert_eq!(pool.stats().waiting, 1);
    drop(held);
    assert_eq!(next.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn reconfiguring_timeouts_and_limits_says_so_and_applies_to_the_next_job() {
    let farm = Farm::new();
    let registry = Registry::new();
    registry.add(eager(&farm, "pg", 1)).unwrap();
    let pool = registry.get("pg").unwrap();
    assert!(
        pool.run(async |w: &mut Fake| w.work(secs(10)).await)
            .await
            .is_ok()
    );
    let actions = registry
        .reconfigure(
            "pg",
            Reconfig::new()
                .job_timeout(Some(secs(2)))
                .max_waiting(0)
                .warmup_timeout(Some(secs(30))),
        )
        .unwrap();
    for option in ["job_timeout", "max_waiting", "warmup_timeout"] {
        assert!(
            has(&actions, &Action::OptionChanged { option }),
            "{option}: {actions:?}"
        );
    }
    assert_eq!(actions.len(), 3, "{actions:?}");
    let err = pool
        .run(async |w: &mut Fake| w.work(secs(10)).await)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Timeout { after } if after == secs(2)),
        "{err:?}"
    );
    settle().await;
    let held = pool.lend().await.unwrap();
    let err = at_once(pool.lend()).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Rejected {
                reason: RejectReason::QueueFull
            }
        ),
        "max_waiting 0: {err:?}"
    );
    drop(held);
    let actions = pool.reconfigure(Reconfig::new().job_timeout(None)).unwrap();
    assert_eq!(
        actions,
        [Action::OptionChanged {
            option: "job_timeout"
        }]
    );
    assert!(
        pool.run(async |w: &mut Fake| w.work(secs(10)).await)
            .await
            .is_ok()
    );
}

#[tokio::test(start_paused = true)]
async fn reconfiguring_the_eviction_reschedules_timers_from_when_each_member_turned_idle() {
    let farm = Farm::new();
    // As pooler, which always culls: the pool starts with an eviction (a
    // long one) and is reconfigured to a shorter one.
    let pool = Pool::builder(farm.factory())
        .name("pg")
        .startup(Parallel)
        .sizing(Fixed(2))
        .eviction(IdleTimeout::new(secs(3600)).unwrap())
        .build()
        .unwrap();
    settle().await;
    let a = pool.lend().await.unwrap();
    let b = pool.lend().await.unwrap();
    assert_eq!((a.slot(), b.slot()), (0, 1));
    let (ida, idb) = (a.id, b.id);
    drop(b); // slot 1 idle since t = 0
    advance(secs(20)).await;
    drop(a); // slot 0 idle since t = 20
    advance(secs(10)).await; // t = 30
    let actions = pool
        .reconfigure(Reconfig::new().eviction(IdleTimeout::new(secs(40)).unwrap()))
        .unwrap();
    assert!(
        has(&actions, &Action::OptionChanged { option: "eviction" }),
        "{actions:?}"
    );
    assert!(
        has(&actions, &Action::TimersRescheduled { count: 2 }),
        "{actions:?}"
    );
    advance(ms(9_999)).await; // t = 39.999
    assert!(!farm.has_exited(idb));
    advance(ms(1)).await; // t = 40
    assert!(farm.has_exited(idb), "idle since 0, evicted at 0 + 40 s");
    assert!(!farm.has_exited(ida));
    advance(ms(19_999)).await; // t = 59.999
    assert!(!farm.has_exited(ida));
    advance(ms(1)).await; // t = 60
    assert!(farm.has_exited(ida), "idle since 20, evicted at 20 + 40 s");
    let s = pool.stats();
    assert_eq!(
        (s.idle, s.starting),
        (0, 0),
        "evicted members are not replaced"
    );
}

#[tokio::test(start_paused = true)]
async fn a_reconfiguration_with_a_bad_value_is_refused_naming_it_and_changes_nothing() {
    let farm = Farm::new();
    let registry = Registry::new();
    let pool = Pool::builder(farm.factory())
        .name("pg")
        .startup(Parallel)
        .sizing(Fixed(1))
        .job_timeout(secs(5))
        .max_waiting(1)
        .build()
        .unwrap();
    registry.add_to_group(pool, "sql").unwrap();
    settle().await;
    let err = registry
        .reconfigure(
            "pg",
            Reconfig::new()
                .sizing(Fixed(4))
                .max_waiting(10)
                .job_timeout(Some(Duration::ZERO))
                .group(Some("other".to_owned())),
        )
        .unwrap_err();
    let Error::Config(bad) = &err else {
        panic!("not a config error: {err:?}");
    };
    assert_eq!(bad.option, "job_timeout");
    assert!(err.to_string().contains("job_timeout"), "{err}");
    let err = registry
        .reconfigure(
            "pg",
            Reconfig::new()
                .sizing(Fixed(4))
                .max_lifetime_jitter(secs(1)),
        )
        .unwrap_err();
    assert!(
        matches!(&err, Error::Config(bad) if bad.option == "max_lifetime_jitter"),
        "{err:?}"
    );
    // Nothing changed: sizing, group, queue bound and job timeout.
    let pool = registry.get("pg").unwrap();
    settle().await;
    let s = pool.stats();
    assert_eq!((s.capacity, s.size), (1, 1), "{s:?}");
    assert_eq!(farm.made(), 1);
    assert_eq!(registry.groups(), ["sql"]);
    let held = pool.lend().await.unwrap();
    let p = pool.clone();
    let queued = tokio::spawn(async move { p.lend().await.map(|l| l.id) });
    settle().await;
    let err = at_once(pool.lend()).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Rejected {
                reason: RejectReason::QueueFull
            }
        ),
        "max_waiting is still 1: {err:?}"
    );
    drop(held);
    queued.await.unwrap().unwrap();
    let err = pool
        .run(async |w: &mut Fake| w.work(secs(60)).await)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Timeout { after } if after == secs(5)),
        "{err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_pool_alone_refuses_a_group_and_the_registry_moves_the_pool() {
    let farm = Farm::new();
    let registry = Registry::new();
    registry
        .add_to_group(eager(&farm, "rc8081", 1), "riak")
        .unwrap();
    registry.add(eager(&farm, "pg_db1", 1)).unwrap();
    settle().await;
    let pool = registry.get("rc8081").unwrap();
    let err = pool
        .reconfigure(Reconfig::new().group(Some("cache".to_owned())))
        .unwrap_err();
    assert!(
        matches!(&err, Error::Config(bad) if bad.option == "group"),
        "{err:?}"
    );
    assert_eq!(
        registry.groups(),
        ["riak"],
        "the refused change moved nothing"
    );

    let actions = registry
        .reconfigure("rc8081", Reconfig::new().group(Some("cache".to_owned())))
        .unwrap();
    assert_eq!(
        actions,
        [Action::GroupChanged {
            from: Some("riak".to_owned()),
            to: Some("cache".to_owned()),
        }]
    );
    assert_eq!(registry.groups(), ["cache"]);
    assert!(matches!(
        at_once(registry.group("riak").lend()).await,
        Err(Error::NoMembers { .. })
    ));
    let lease = registry.group("cache").lend().await.unwrap();
    assert_eq!(
        pool.stats().lent,
        1,
        "the moved pool lends to its new group"
    );
    drop(lease);

    let actions = registry
        .reconfigure("pg_db1", Reconfig::new().group(Some("cache".to_owned())))
        .unwrap();
    assert_eq!(
        actions,
        [Action::GroupChanged {
            from: None,
            to: Some("cache".to_owned()),
        }]
    );
    assert_eq!(registry.group("cache").pools().len(), 2);
    let actions = registry
        .reconfigure("rc8081", Reconfig::new().group(None))
        .unwrap();
    assert_eq!(
        actions,
        [Action::GroupChanged {
            from: Some("cache".to_owned()),
            to: None,
        }]
    );
    let listed: Vec<_> = registry
        .list()
        .into_iter()
        .map(|e| (e.name, e.group))
        .collect();
    assert_eq!(
        listed,
        [
            ("pg_db1".to_owned(), Some("cache".to_owned())),
            ("rc8081".to_owned(), None),
        ]
    );
}

// ----- removing and closing -----

#[tokio::test(start_paused = true)]
async fn removing_a_pool_closes_it_and_its_name_is_gone() {
    let kept = Farm::new();
    let removed = Farm::new();
    let registry = Registry::new();
    registry.add(eager(&kept, "pg_db1", 2)).unwrap();
    registry
        .add_to_group(eager(&removed, "rc8081", 2), "riak")
        .unwrap();
    settle().await;
    let pool = registry.get("rc8081").unwrap();
    assert_eq!(removed.alive(), 2);
    registry.remove("rc8081").await.unwrap();
    assert_eq!(removed.alive(), 0, "its members ended");
    assert!(pool.is_closed());
    assert!(matches!(pool.lend().await, Err(Error::Closed)));
    assert!(matches!(
        pool.reconfigure(Reconfig::new().max_waiting(1)),
        Err(Error::Closed)
    ));
    let err = registry.get("rc8081").unwrap_err();
    assert!(
        matches!(&err, Error::NoSuchPool { name } if name == "rc8081"),
        "{err:?}"
    );
    assert!(registry.groups().is_empty());
    assert_eq!(kept.alive(), 2, "the other pool is untouched");
    assert!(registry.get("pg_db1").unwrap().lend().await.is_ok());
    // The name can be used again.
    registry.add(eager(&removed, "rc8081", 1)).unwrap();
    assert!(registry.get("rc8081").unwrap().lend().await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn closing_the_registry_ends_every_member_of_every_pool() {
    let farm = Farm::new();
    let registry = Registry::new();
    for (name, group) in [
        ("rc8081", Some("riak")),
        ("rc8082", Some("riak")),
        ("pg", None),
    ] {
        let pool = Pool::builder(farm.factory())
            .name(name)
            .startup(Parallel)
            .sizing(Fixed(2))
            .close_grace(secs(1))
            .build()
            .unwrap();
        match group {
            Some(g) => registry.add_to_group(pool, g).unwrap(),
            None => registry.add(pool).unwrap(),
        }
    }
    settle().await;
    let pg = registry.get("pg").unwrap();
    let lease = pg.lend().await.unwrap();
    assert_eq!(farm.alive(), 6);
    let r = registry.clone();
    let closing = tokio::spawn(async move { r.close_all().await });
    settle().await;
    assert_eq!(
        farm.alive(),
        1,
        "idle members close at once; the lent one has its grace"
    );
    assert!(registry.list().is_empty());
    assert!(registry.groups().is_empty());
    advance(secs(1)).await;
    closing.await.unwrap();
    assert_eq!(farm.alive(), 0);
    assert!(lease.has_exited(), "killed after the grace");
    drop(lease);
    assert!(matches!(pg.lend().await, Err(Error::Closed)));
}

// ----- max_lifetime -----

#[tokio::test(start_paused = true)]
async fn members_past_their_jittered_lifetime_are_replaced_at_spread_instants() {
    let farm = Farm::new();
    let pool = Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(Fixed(8))
        .max_lifetime(secs(60))
        .max_lifetime_jitter(secs(10))
        .seed(7)
        .build()
        .unwrap();
    let mut events = pool.events();
    settle().await;
    assert_eq!(farm.made(), 8);
    let step = ms(100);
    let mut ended_at: Vec<Option<Duration>> = vec![None; 8];
    let mut now = Duration::ZERO;
    while now < secs(75) {
        advance(step).await;
        now += step;
        for (id, at) in ended_at.iter_mut().enumerate() {
            if at.is_none() && farm.has_exited(id) {
                *at = Some(now);
            }
        }
    }
    let ended: Vec<Duration> = ended_at
        .iter()
        .map(|at| at.expect("every first member was replaced"))
        .collect();
    for at in &ended {
        assert!(*at >= secs(50) && *at <= secs(70), "{ended:?}");
    }
    let mut distinct = ended.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(distinct.len() > 1, "not all at once: {ended:?}");
    assert_eq!(farm.made(), 16, "each replaced once");
    assert_eq!(pool.stats().idle, 8);
    let got = retired(&drain(&mut events));
    assert_eq!(got.len(), 8, "{got:?}");
    assert!(
        got.iter().all(|(_, r)| *r == RetireReason::Lifetime),
        "{got:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lent_member_past_its_lifetime_finishes_its_job_and_is_replaced_when_returned() {
    let farm = Farm::new();
    let pool = Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(Fixed(1))
        .max_lifetime(secs(60))
        .build()
        .unwrap();
    let mut events = pool.events();
    let mut lease = pool.lend().await.unwrap();
    advance(secs(90)).await;
    assert!(!farm.has_exited(0), "never cut short");
    assert_eq!(lease.work(secs(1)).await, 0);
    assert_eq!(farm.made(), 1);
    drop(lease);
    settle().await;
    assert!(farm.has_exited(0), "closed when returned");
    assert_eq!(farm.made(), 2, "and replaced");
    assert_eq!(retired(&drain(&mut events)), [(0, RetireReason::Lifetime)]);
    // The same through `run`: a job longer than the lifetime runs to its end.
    let long = pool.run(async |w: &mut Fake| w.work(secs(120)).await).await;
    assert_eq!(long.unwrap(), 1);
    settle().await;
    assert_eq!(farm.made(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_lifetime_jitter_not_below_the_lifetime_or_without_one_is_refused() {
    let farm = Farm::new();
    for (life, jitter) in [
        (Some(secs(60)), secs(60)),
        (Some(secs(60)), secs(90)),
        (None, secs(10)),
    ] {
        let mut b = Pool::builder(farm.factory()).max_lifetime_jitter(jitter);
        if let Some(life) = life {
            b = b.max_lifetime(life);
        }
        let err = b.build().unwrap_err();
        assert_eq!(
            err.option, "max_lifetime_jitter",
            "{life:?} {jitter:?}: {err}"
        );
        assert!(err.to_string().contains("max_lifetime_jitter"), "{err}");
    }
    let ok = Pool::builder(farm.factory())
        .max_lifetime(secs(60))
        .max_lifetime_jitter(ms(59_999))
        .build();
    assert!(ok.is_ok());
    assert_eq!(farm.made(), 0);
}

// ----- call_free_members -----

#[tokio::test(start_paused = true)]
async fn for_each_idle_runs_on_every_idle_member_in_turn_and_skips_lent_ones() {
    let farm = Farm::new();
    let steer = Steer::new(4, 4);
    let pool = Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(steer.clone())
        .build()
        .unwrap();
    settle().await;
    steer.set_size(2);
    advance(Steer::TICK).await;
    let s = pool.stats();
    assert_eq!((s.size, s.idle, s.kept), (2, 2, 2), "{s:?}");
    let held = pool.lend().await.unwrap();
    assert_eq!(held.slot(), 0);
    let p = pool.clone();
    let results = pool
        .for_each_idle(async |w: &mut Fake| {
            // Exclusive: only this member and the held one are out.
            let s = p.stats();
            let before = w.jobs;
            w.work(ms(10)).await;
            (w.id, before, s.lent)
        })
        .await;
    let slots: Vec<usize> = results.iter().map(|(slot, _)| *slot).collect();
    assert_eq!(slots, [1, 2, 3], "the lent slot 0 is skipped");
    for (slot, (id, before, out)) in &results {
        assert_eq!(*id, farm.in_slot(*slot).unwrap());
        assert_eq!(*before, 0);
        assert_eq!(*out, 2, "slot {slot}: one at a time");
    }
    let s = pool.stats();
    assert_eq!(
        (s.idle, s.kept, s.lent),
        (1, 2, 1),
        "all back where they were: {s:?}"
    );
    drop(held);
    let ran: Vec<u64> = {
        let mut v = Vec::new();
        for _ in 0..2 {
            v.push(pool.lend().await.unwrap());
        }
        v.iter().map(|l| l.jobs).collect()
    };
    assert_eq!(ran, [0, 1], "slot 0 ran nothing, slot 1 ran f once");
    assert_eq!(farm.made(), 4);
}
