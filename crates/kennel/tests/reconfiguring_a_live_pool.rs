//! Reconfiguring a live pool: its count, timeouts, limits and eviction
//! changed, with the actions each change took, and a bad value refused with
//! nothing changed.
mod support;

use std::time::Duration;

use kennel::{
    Action, Error, Fixed, IdleTimeout, Parallel, Pool, Reconfig, Registry, RejectReason,
    RetireReason,
};
use support::{
    Fake, Farm, advance, at_once, drain, hold, ms, named_on_demand, named_parallel, retired, secs,
    settle, spawn_lend_id, spawn_lend_slot,
};

// ----- reconfiguration -----

fn has(actions: &[Action], a: &Action) -> bool {
    actions.contains(a)
}

#[tokio::test(start_paused = true)]
async fn reconfiguring_a_higher_count_starts_new_members_under_an_eager_startup() {
    let farm = Farm::new();
    let registry = Registry::new();
    registry.add(named_parallel(&farm, "pg", 2)).unwrap();
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
    let _leases = hold(&pool, 4).await;
    assert_eq!(farm.made(), 4, "four members lent without a new start");
}

#[tokio::test(start_paused = true)]
async fn reconfiguring_a_higher_count_serves_a_queued_job_at_once() {
    let farm = Farm::new();
    let pool = named_on_demand(&farm, "pg", 1);
    let held = pool.lend().await.unwrap();
    let queued = spawn_lend_slot(&pool);
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
    let pool = named_parallel(&farm, "pg", 3);
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
    let next = spawn_lend_slot(&pool);
    settle().await;
    assert_eq!(pool.stats().waiting, 1);
    drop(held);
    assert_eq!(next.await.unwrap().unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn reconfiguring_timeouts_and_limits_says_so_and_applies_to_the_next_job() {
    let farm = Farm::new();
    let registry = Registry::new();
    registry.add(named_parallel(&farm, "pg", 1)).unwrap();
    let pool = registry.get("pg").unwrap();
    assert!(
        pool.run(async |w: &mut Fake| w.work(secs(10)).await)
            .await
            .is_ok()
    );
    let actions = registry
        .reconfigure(
            "pg",
            Reconfig::new().with_options(move |o| {
                o.job_timeout = Some(secs(2));
                o.max_waiting = Some(0);
                o.warmup_timeout = Some(secs(30));
            }),
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
    let actions = pool
        .reconfigure(Reconfig::new().with_options(move |o| o.job_timeout = None))
        .unwrap();
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
    // The pool starts with an eviction (a
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
        .with_options(|o| {
            o.job_timeout = Some(secs(5));
            o.max_waiting = Some(1);
        })
        .build()
        .unwrap();
    registry.add_to_group(pool, "sql").unwrap();
    settle().await;
    let err = registry
        .reconfigure(
            "pg",
            Reconfig::new()
                .sizing(Fixed(4))
                .with_options(move |o| {
                    o.max_waiting = Some(10);
                    o.job_timeout = Some(Duration::ZERO);
                })
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
                .with_options(move |o| o.max_lifetime_jitter = secs(1)),
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
    let queued = spawn_lend_id(&pool);
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
        .add_to_group(named_parallel(&farm, "rc8081", 1), "riak")
        .unwrap();
    registry.add(named_parallel(&farm, "pg_db1", 1)).unwrap();
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
