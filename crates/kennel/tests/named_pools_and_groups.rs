//! Named pools and groups: names that are unknown or taken, a lend across the
//! pools of a group, and removing and closing pools of a registry.
mod support;

use std::sync::{Arc, Mutex};

use kennel::{Error, Fixed, Parallel, Pool, Reconfig, Registry};
use support::{
    Fake, Farm, Warmup, advance, at_once, ms, named_on_demand, named_parallel, secs, settle,
};

// ----- named pools -----

#[tokio::test(start_paused = true)]
async fn an_unknown_pool_is_no_such_pool_naming_it() {
    let farm = Farm::new();
    let registry = Registry::new();
    registry.add(named_parallel(&farm, "pg_db1", 1)).unwrap();
    assert!(registry.get("pg_db1").is_ok());
    let err = registry.get("rc8081").unwrap_err();
    assert!(
        matches!(&err, Error::NoSuchPool { name } if name == "rc8081"),
        "{err:?}"
    );
    assert!(err.to_string().contains("rc8081"), "{err}");
    let err = registry
        .reconfigure(
            "rc8081",
            Reconfig::new().with_options(move |o| o.max_waiting = Some(1)),
        )
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
    registry.add(named_parallel(&first, "rc8081", 1)).unwrap();
    let err = registry
        .add_to_group(named_parallel(&second, "rc8081", 1), "riak")
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
        .add_to_group(named_parallel(&farm, "rc8081", 2), "riak")
        .unwrap();
    registry
        .add_to_group(named_parallel(&farm, "rc8082", 2), "riak")
        .unwrap();
    registry.add(named_parallel(&farm, "pg_db1", 2)).unwrap();
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
        .add_to_group(named_parallel(&farm, "rc8081", 1), "riak")
        .unwrap();
    registry
        .add_to_group(named_parallel(&farm, "rc8082", 1), "riak")
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
        .add_to_group(named_on_demand(&broken, "rc8081", 1), "riak")
        .unwrap();
    registry
        .add_to_group(named_parallel(&fine, "rc8082", 1), "riak")
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
        .add_to_group(named_parallel(&farm, "rc8081", 1), "riak")
        .unwrap();
    registry
        .add_to_group(named_parallel(&farm, "rc8082", 1), "riak")
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
        .add_to_group(named_parallel(&farm, "rc8081", 1), "riak")
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
            .with_options(|o| o.job_timeout = Some(secs(limit)))
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

// ----- removing and closing -----

#[tokio::test(start_paused = true)]
async fn removing_a_pool_closes_it_and_its_name_is_gone() {
    let kept = Farm::new();
    let removed = Farm::new();
    let registry = Registry::new();
    registry.add(named_parallel(&kept, "pg_db1", 2)).unwrap();
    registry
        .add_to_group(named_parallel(&removed, "rc8081", 2), "riak")
        .unwrap();
    settle().await;
    let pool = registry.get("rc8081").unwrap();
    assert_eq!(removed.alive(), 2);
    registry.remove("rc8081").await.unwrap();
    assert_eq!(removed.alive(), 0, "its members ended");
    assert!(pool.is_closed());
    assert!(matches!(pool.lend().await, Err(Error::Closed)));
    assert!(matches!(
        pool.reconfigure(Reconfig::new().with_options(move |o| o.max_waiting = Some(1))),
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
    registry.add(named_parallel(&removed, "rc8081", 1)).unwrap();
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
            .with_options(|o| o.job_grace = secs(1))
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
