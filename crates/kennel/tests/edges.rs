//! Rules at the edges of a worker's life: ending while lent, closing while
//! a job waits, lifetimes that end during a warm-up, slots removed by a
//! reconfiguration.
mod support;

use kennel::{
    Action, Event, Fixed, IdleTimeout, OnDemand, Parallel, Pool, Reconfig, Registry, RetireReason,
};
use support::{
    Ending, Endings, Farm, Watched, advance, drain, fixed, ms, on_demand, secs, settle,
    spawn_run_id,
};

/// An exited worker is in no count of `stats()`, also one that exits while a
/// `lend()` lease still holds it.
#[tokio::test(start_paused = true)]
async fn a_worker_that_exits_while_lent_leaves_the_lent_count() {
    let farm = Farm::new();
    let pool = on_demand(&farm, 1);
    let lease = pool.lend().await.unwrap();
    farm.exit(lease.id);
    settle().await;
    assert!(lease.has_exited());
    assert_eq!(pool.stats().lent, 0, "{:?}", pool.stats());
}

/// The next job that needs an evicted slot starts a new worker: a job never
/// waits for an evicted worker's graceful close (a Coprocess closes with a
/// grace); the pool kills it so the slot frees at once, and the pool stays
/// healthy.
#[tokio::test(start_paused = true)]
async fn a_job_does_not_wait_for_an_evicted_worker_to_finish_closing() {
    let farm = Farm::new();
    let endings = Endings::default();
    let pool = Pool::builder(farm.watched_factory(&endings, secs(10)))
        .startup(OnDemand)
        .sizing(Fixed(1))
        .eviction(IdleTimeout::new(secs(1)).unwrap())
        .build()
        .unwrap();
    drop(pool.lend().await.unwrap());
    advance(secs(1)).await; // evicted; its close takes 10 s
    let p = pool.clone();
    let job = tokio::spawn(async move { p.run(async |w: &mut Watched| w.id).await });
    advance(ms(1)).await;
    let s = pool.stats();
    assert!(s.is_healthy(), "{s:?}");
    advance(secs(1)).await;
    assert!(
        job.is_finished(),
        "the job still waits for the evicted worker's close"
    );
}

/// `worker:crashed` is a worker that ended on its own while a job held it;
/// close's own kill after the grace is not one.
#[tokio::test(start_paused = true)]
async fn the_kill_at_the_end_of_the_job_grace_is_not_a_crash() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.job_grace = secs(1))
        .build()
        .unwrap();
    let mut events = pool.events();
    let lease = pool.lend().await.unwrap();
    pool.close().await;
    drop(lease);
    let names: Vec<&str> = drain(&mut events).iter().map(Event::name).collect();
    assert!(!names.contains(&"worker:crashed"), "{names:?}");
}

/// A reconfiguration returns the list of actions it took: raising Fixed(2) to
/// Fixed(4) under Parallel starts slots 2 and 3, and the list says so.
#[tokio::test(start_paused = true)]
async fn raising_the_count_lists_the_members_it_started() {
    let farm = Farm::new();
    let registry = Registry::new();
    registry
        .add(
            Pool::builder(farm.factory())
                .name("pg")
                .startup(Parallel)
                .sizing(Fixed(2))
                .build()
                .unwrap(),
        )
        .unwrap();
    settle().await;
    let actions = registry
        .reconfigure("pg", Reconfig::new().sizing(Fixed(4)))
        .unwrap();
    settle().await;
    assert_eq!(
        farm.started_slots(),
        [0, 1, 2, 3],
        "slots 2 and 3 did start"
    );
    assert!(
        actions.contains(&Action::Started { slot: 2 }),
        "{actions:?}"
    );
    assert!(
        actions.contains(&Action::Started { slot: 3 }),
        "{actions:?}"
    );
}

/// A worker older than its lifetime is closed while idle and replaced: one
/// whose lifetime ends during its warm-up, with no job waiting, is closed as
/// soon as it is ready.
#[tokio::test(start_paused = true)]
async fn a_member_whose_lifetime_ends_during_its_warm_up_is_replaced_once_idle() {
    let farm = Farm::with_warmup(secs(70));
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.max_lifetime = Some(secs(60)))
        .build()
        .unwrap();
    advance(secs(70)).await;
    assert!(
        farm.has_exited(0),
        "ready 10 s past its lifetime with no job waiting: closed at once"
    );
    assert_eq!(farm.made(), 2, "and replaced");
    assert_eq!(pool.stats().starting, 1);
}

/// A job waiting for a worker whose lifetime ended during its warm-up still
/// gets it (a lent worker is never cut short); it is replaced on return.
#[tokio::test(start_paused = true)]
async fn a_job_waiting_for_an_expired_warm_worker_still_gets_it() {
    let farm = Farm::with_warmup(secs(70));
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.max_lifetime = Some(secs(60)))
        .build()
        .unwrap();
    let job = spawn_run_id(&pool);
    advance(secs(70)).await;
    assert_eq!(job.await.unwrap().unwrap(), 0);
    settle().await;
    assert!(farm.has_exited(0), "replaced when it came back");
    assert_eq!(farm.made(), 2);
}

/// `Lease::fail` kills the worker and says `failed`, also when a
/// reconfiguration removed its slot meanwhile.
#[tokio::test(start_paused = true)]
async fn failing_a_lease_above_a_lowered_count_kills_its_member() {
    let farm = Farm::new();
    let endings = Endings::default();
    let pool = Pool::builder(farm.watched_factory(&endings, secs(5)))
        .startup(Parallel)
        .sizing(Fixed(2))
        .build()
        .unwrap();
    let mut events = pool.events();
    settle().await;
    let _a = pool.lend().await.unwrap();
    let b = pool.lend().await.unwrap();
    assert_eq!(b.slot(), 1);
    let id = b.id;
    pool.reconfigure(Reconfig::new().sizing(Fixed(1))).unwrap();
    drain(&mut events);
    b.fail();
    settle().await;
    let retired: Vec<RetireReason> = drain(&mut events)
        .into_iter()
        .filter_map(|e| match e {
            Event::Retired { reason, .. } => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(
        endings.of(id),
        Some(Ending::Killed),
        "a failed member is killed"
    );
    assert_eq!(retired, [RetireReason::Failed]);
}
