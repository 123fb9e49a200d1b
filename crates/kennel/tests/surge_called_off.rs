//! A warm replacement called off (`max_surge`): by a lower `max_surge` on a
//! live pool, by the pool's close, by a size that no longer runs its slot,
//! or by its own failed warm-up, which leaves the old worker serving.
mod support;

use kennel::{Parallel, Pool, Reconfig, RetireReason};
use support::{Fake, Farm, advance, count, drain, fixed, ms, ready, retired, secs, settle};

#[tokio::test(start_paused = true)]
async fn max_surge_is_reconfigured_on_a_live_pool_and_a_lower_one_calls_surges_off() {
    let farm = Farm::with_warmup(secs(2));
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.max_lifetime = Some(secs(60)))
        .build()
        .unwrap();
    let mut events = pool.events();
    advance(secs(3)).await;
    let err = pool
        .reconfigure(Reconfig::new().with_options(move |o| o.max_surge = 65))
        .unwrap_err();
    assert!(err.to_string().contains("max_surge"), "{err}");
    assert!(err.to_string().contains("0 to 64"), "{err}");
    pool.reconfigure(Reconfig::new().with_options(move |o| o.max_surge = 1))
        .unwrap();
    assert_eq!(pool.options().max_surge, 1);
    advance(ms(54_600)).await;
    assert_eq!(count(&drain(&mut events), "worker:surging"), 1);
    assert_eq!(pool.stats().surging, 1);
    // Lowered to 0 while it warms: called off, its worker ends.
    pool.reconfigure(Reconfig::new().with_options(move |o| o.max_surge = 0))
        .unwrap();
    settle().await;
    assert_eq!(pool.stats().surging, 0);
    assert!(farm.has_exited(1), "the called-off replacement ended");
    // The old worker is retired at its lifetime, then replaced.
    advance(secs(3)).await;
    assert_eq!(retired(&drain(&mut events)), [(0, RetireReason::Lifetime)]);
    advance(secs(2)).await;
    assert_eq!(ready(&pool), 1);
}

#[tokio::test(start_paused = true)]
async fn closing_the_pool_ends_a_warming_replacement() {
    let farm = Farm::with_warmup(secs(2));
    let pool = fixed(&farm, Parallel, 2)
        .with_options(|o| {
            o.max_lifetime = Some(secs(60));
            o.max_surge = 1;
        })
        .build()
        .unwrap();
    advance(ms(58_000)).await;
    assert_eq!(pool.stats().surging, 1);
    assert_eq!(farm.made(), 3);
    pool.close().await;
    assert_eq!(farm.alive(), 0, "every worker ended, the surge's too");
}

#[tokio::test(start_paused = true)]
async fn a_smaller_size_calls_off_the_surge_of_a_slot_it_no_longer_runs() {
    let farm = Farm::with_warmup(secs(2));
    let steer = support::Steer::new(2, 2);
    let pool = Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(steer.clone())
        .with_options(|o| {
            o.max_lifetime = Some(secs(60));
            o.max_surge = 2;
        })
        .build()
        .unwrap();
    advance(ms(58_000)).await;
    assert_eq!(pool.stats().surging, 2);
    steer.set_size(1);
    advance(secs(1)).await;
    assert_eq!(pool.stats().surging, 1, "slot 1 is kept: no replacement");
}

#[tokio::test(start_paused = true)]
async fn a_replacement_that_fails_its_warm_up_leaves_the_old_worker_serving_until_its_deadline() {
    let farm = Farm::new();
    farm.plan([
        support::Warmup::Takes(secs(2)),
        support::Warmup::Fails(secs(1)),
    ]);
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| {
            o.max_lifetime = Some(secs(60));
            o.max_surge = 1;
        })
        .build()
        .unwrap();
    let mut events = pool.events();
    advance(secs(2)).await;
    advance(ms(55_500)).await;
    assert_eq!(pool.stats().surging, 1, "started 2.5 s ahead");
    advance(secs(1)).await;
    let all = drain(&mut events);
    assert_eq!(count(&all, "worker:warmup-failed"), 1, "{all:?}");
    assert_eq!(pool.stats().surging, 0);
    // The old worker still serves, and no second surge is tried for it.
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 0);
    advance(ms(1500)).await;
    let all = drain(&mut events);
    assert_eq!(retired(&all), [(0, RetireReason::Lifetime)]);
    assert_eq!(count(&all, "worker:surging"), 0);
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 2);
}
