//! When workers start.
mod support;

use kennel::{LeaderFirst, OnDemand, OrderedReady, Parallel, Pool};
use support::{Fake, Farm, advance, pool_of, secs, settle, spawn_run_slot};

#[tokio::test(start_paused = true)]
async fn on_demand_starts_a_worker_only_when_a_job_needs_one() {
    let farm = Farm::with_warmup(secs(2));
    let pool = pool_of(&farm, OnDemand, 3);
    advance(secs(60)).await;
    assert_eq!(farm.made(), 0);
    assert_eq!(pool.stats().starting, 0);
    pool.run(async |_w: &mut Fake| ()).await.unwrap();
    assert_eq!(farm.started_slots(), [0]);
}

#[tokio::test(start_paused = true)]
async fn parallel_starts_every_running_slot_together_when_built() {
    let farm = Farm::with_warmup(secs(2));
    let pool = pool_of(&farm, Parallel, 3);
    settle().await;
    assert_eq!(farm.started_slots(), [0, 1, 2]);
    assert_eq!(pool.stats().starting, 3);
    advance(secs(2)).await;
    assert_eq!(pool.stats().idle, 3);
}

#[tokio::test(start_paused = true)]
async fn ordered_ready_starts_each_slot_after_the_previous_one_is_ready() {
    let farm = Farm::with_warmup(secs(2));
    let pool = pool_of(&farm, OrderedReady, 3);
    settle().await;
    assert_eq!(farm.started_slots(), [0]);
    advance(secs(1)).await;
    assert_eq!(
        farm.started_slots(),
        [0],
        "slot 1 waits for slot 0 to be ready"
    );
    advance(secs(1)).await;
    assert_eq!(farm.started_slots(), [0, 1]);
    assert_eq!((pool.stats().idle, pool.stats().starting), (1, 1));
    advance(secs(2)).await;
    assert_eq!(farm.started_slots(), [0, 1, 2]);
    advance(secs(2)).await;
    assert_eq!(pool.stats().idle, 3);
}

#[tokio::test(start_paused = true)]
async fn leader_first_starts_slot_0_alone_then_the_others_together() {
    let farm = Farm::with_warmup(secs(2));
    let pool = pool_of(&farm, LeaderFirst, 4);
    settle().await;
    assert_eq!(farm.started_slots(), [0]);
    advance(secs(1)).await;
    assert_eq!(farm.started_slots(), [0]);
    advance(secs(1)).await;
    assert_eq!(farm.started_slots(), [0, 1, 2, 3]);
    assert_eq!(pool.stats().starting, 3);
}

#[tokio::test(start_paused = true)]
async fn eager_startups_replace_an_idle_worker_that_exits() {
    for startup in [&Parallel as &dyn StartupName, &OrderedReady, &LeaderFirst] {
        let farm = Farm::new();
        let pool = startup.build(&farm, 2);
        settle().await;
        assert_eq!(pool.stats().idle, 2, "{}", startup.name());
        farm.exit(farm.in_slot(1).unwrap());
        settle().await;
        assert_eq!(pool.stats().idle, 1);
        // An early exit: the slot is started again after a 1 s back-off.
        advance(secs(1)).await;
        assert_eq!(farm.made(), 3, "{}", startup.name());
        assert_eq!(pool.stats().idle, 2, "{}", startup.name());
    }
}

#[tokio::test(start_paused = true)]
async fn on_demand_does_not_replace_an_idle_worker_that_exits() {
    let farm = Farm::new();
    let pool = pool_of(&farm, OnDemand, 2);
    pool.run(async |_w: &mut Fake| ()).await.unwrap();
    farm.exit(0);
    advance(secs(120)).await;
    assert_eq!(farm.made(), 1);
    assert_eq!(pool.stats().idle, 0);
    // The next job starts a new worker.
    pool.run(async |_w: &mut Fake| ()).await.unwrap();
    assert_eq!(farm.made(), 2);
}

#[tokio::test(start_paused = true)]
async fn jobs_start_workers_themselves_whatever_the_startup() {
    // OrderedReady waits for slot 0, but a second job does not wait for it.
    let farm = Farm::with_warmup(secs(5));
    let pool = pool_of(&farm, OrderedReady, 2);
    let a = spawn_run_slot(&pool);
    let b = spawn_run_slot(&pool);
    settle().await;
    assert_eq!(farm.started_slots(), [0, 1]);
    advance(secs(5)).await;
    let mut got = [a.await.unwrap().unwrap(), b.await.unwrap().unwrap()];
    got.sort_unstable();
    assert_eq!(got, [0, 1]);
}

trait StartupName {
    fn name(&self) -> &'static str;
    fn build(&self, farm: &Farm, n: usize) -> Pool<Fake>;
}

macro_rules! named {
    ($($t:ident),*) => {$(
        impl StartupName for $t {
            fn name(&self) -> &'static str { stringify!($t) }
            fn build(&self, farm: &Farm, n: usize) -> Pool<Fake> { pool_of(farm, $t, n) }
        }
    )*};
}
named!(Parallel, OrderedReady, LeaderFirst);

#[tokio::test(start_paused = true)]
async fn a_pool_that_starts_workers_itself_warms_until_its_first_is_ready() {
    let farm = Farm::with_warmup(secs(2));
    let eager = pool_of(&farm, Parallel, 2);
    let lazy = pool_of(&Farm::with_warmup(secs(2)), OnDemand, 2);
    let spares = support::fixed(&Farm::with_warmup(secs(2)), OnDemand, 2)
        .with_options(|o| o.min_idle = Some(1))
        .build()
        .unwrap();
    settle().await;
    assert!(eager.is_warming());
    assert!(spares.is_warming(), "min_idle starts a worker at once");
    assert!(!lazy.is_warming(), "it starts workers only for jobs");
    advance(secs(2)).await;
    assert!(!eager.is_warming());
    assert!(!spares.is_warming());
    // For good: a worker that ends and starts again does not warm the pool.
    farm.exit(0);
    settle().await;
    assert!(eager.stats().idle < 2);
    assert!(!eager.is_warming());
}
