//! `replace_on_resize`: a worker whose start depends on the running size (a
//! thread budget of `cores / size`) is replaced once the size changes, so
//! that each size runs with what it gives its workers, and a learning sizing
//! counts a size only once its workers started at it.
mod support;

use kennel::{Event, Parallel, Pool, Reconfig, RetireReason};
use support::{Fake, Farm, Steer, Warmup, advance, drain, ms, retired, secs};
use tokio::sync::broadcast;

/// A pool of `capacity` slots from `farm` that runs the sizes `steer` is
/// set to, each worker warming up in `farm`'s time.
fn steered(farm: &Farm, steer: &Steer) -> kennel::PoolBuilder<Fake> {
    Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(steer.clone())
}

/// A pool of two slots steered by a [`Steer`], each worker warming up in
/// 1 s, with both ready: the farm, the sizing, the pool and its events.
async fn two_ready(
    replace_on_resize: bool,
    max_surge: usize,
) -> (Farm, Steer, Pool<Fake>, broadcast::Receiver<Event>) {
    let farm = Farm::with_warmup(secs(1));
    let steer = Steer::new(2, 2);
    let pool = steered(&farm, &steer)
        .with_options(|o| {
            o.replace_on_resize = replace_on_resize;
            o.max_surge = max_surge;
        })
        .build()
        .unwrap();
    let events = pool.events();
    advance(secs(2)).await;
    (farm, steer, pool, events)
}

/// Moves the pool to `size` at the sizing's next wake-up.
async fn resize_to(steer: &Steer, size: usize) {
    steer.set_size(size);
    advance(Steer::TICK).await;
    advance(Steer::TICK).await;
}

/// The replacements that began to warm first: (slot, reason).
fn surging(events: &[Event]) -> Vec<(usize, RetireReason)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Surging { slot, reason } => Some((*slot, *reason)),
            _ => None,
        })
        .collect()
}

fn resized(events: &[Event]) -> Vec<usize> {
    retired(events)
        .into_iter()
        .filter(|&(_, r)| r == RetireReason::Resized)
        .map(|(slot, _)| slot)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_step_down_replaces_the_idle_worker_started_for_the_larger_size_and_keeps_the_other() {
    let (farm, steer, pool, mut events) = two_ready(true, 0).await;
    assert_eq!(farm.started_sizes(), [2, 2]);

    resize_to(&steer, 1).await;
    assert_eq!(resized(&drain(&mut events)), [0]);
    advance(secs(2)).await;
    // Slot 0 runs a worker started for one slot; slot 1's is kept as it was.
    assert_eq!(farm.started_sizes(), [2, 2, 1]);
    assert_eq!(farm.in_slot(0), Some(2));
    assert_eq!(farm.in_slot(1), Some(1));
    assert_eq!(pool.stats().kept, 1);
    let served = pool.run(async |w: &mut Fake| w.id).await.unwrap();
    assert_eq!(served, 2);
}

#[tokio::test(start_paused = true)]
async fn without_replace_on_resize_running_workers_keep_the_size_they_started_at() {
    let (farm, steer, _pool, mut events) = two_ready(false, 0).await;
    resize_to(&steer, 1).await;
    advance(secs(2)).await;
    assert!(resized(&drain(&mut events)).is_empty());
    assert_eq!(farm.started_sizes(), [2, 2]);
    assert_eq!(farm.in_slot(0), Some(0));
}

#[tokio::test(start_paused = true)]
async fn a_lent_worker_started_at_another_size_is_replaced_when_its_job_returns() {
    let (farm, steer, pool, mut events) = two_ready(true, 0).await;
    let lease = pool.lend().await.unwrap();
    assert_eq!(lease.slot(), 0);

    resize_to(&steer, 1).await;
    // Never cut short: the job keeps its worker.
    assert!(resized(&drain(&mut events)).is_empty());
    assert_eq!(farm.made(), 2);
    drop(lease);
    advance(ms(10)).await;
    assert_eq!(resized(&drain(&mut events)), [0]);
    advance(secs(2)).await;
    assert_eq!(farm.started_sizes(), [2, 2, 1]);
    assert_eq!(farm.in_slot(0), Some(2));
}

#[tokio::test(start_paused = true)]
async fn with_max_surge_the_worker_serves_until_its_replacement_for_the_new_size_is_warm() {
    let (farm, steer, pool, mut events) = two_ready(true, 1).await;
    farm.plan([Warmup::Takes(secs(5))]);

    resize_to(&steer, 1).await;
    let seen = drain(&mut events);
    assert!(surging(&seen).contains(&(0, RetireReason::Resized)));
    // While its replacement warms, the old worker still serves every job.
    for _ in 0..40 {
        let served = pool.run(async |w: &mut Fake| w.id).await.unwrap();
        assert_eq!(served, 0);
        advance(ms(100)).await;
    }
    advance(secs(2)).await;
    assert_eq!(resized(&drain(&mut events)), [0]);
    assert_eq!(farm.started_sizes(), [2, 2, 1]);
    let served = pool.run(async |w: &mut Fake| w.id).await.unwrap();
    assert_eq!(served, 2);
    assert_eq!(pool.stats().surging, 0);
}

#[tokio::test(start_paused = true)]
async fn a_replacement_for_a_size_the_pool_went_back_from_is_called_off() {
    let (farm, steer, pool, mut events) = two_ready(true, 1).await;
    farm.plan([Warmup::Takes(secs(10))]);
    resize_to(&steer, 1).await;
    assert_eq!(pool.stats().surging, 1);

    // Back at two slots before the replacement is warm: both workers
    // started at this size, so the replacement is not needed.
    resize_to(&steer, 2).await;
    advance(secs(1)).await;
    assert_eq!(pool.stats().surging, 0);
    assert!(farm.has_exited(2));
    advance(secs(15)).await;
    assert!(resized(&drain(&mut events)).is_empty());
    assert_eq!(farm.in_slot(0), Some(0));
    assert_eq!(farm.in_slot(1), Some(1));
}

#[tokio::test(start_paused = true)]
async fn a_sizing_sees_the_pool_not_all_ready_until_its_workers_started_at_the_new_size() {
    let (farm, steer, pool, _events) = two_ready(true, 1).await;
    farm.plan([Warmup::Takes(secs(3))]);
    resize_to(&steer, 1).await;
    // Jobs while the replacement warms, then after it took the slot.
    for _ in 0..60 {
        pool.run(async |w: &mut Fake| w.work(ms(50)).await)
            .await
            .unwrap();
        advance(ms(50)).await;
    }
    let seen: Vec<(usize, bool)> = steer
        .jobs_seen()
        .into_iter()
        .filter(|&(size, _)| size == 1)
        .collect();
    let first_ready = seen.iter().position(|&(_, ready)| ready).unwrap();
    assert!(first_ready > 10, "counted too soon: {seen:?}");
    assert!(
        seen[first_ready..].iter().all(|&(_, ready)| ready),
        "{seen:?}"
    );
    assert_eq!(farm.in_slot(0), Some(2));
}

#[tokio::test(start_paused = true)]
async fn turning_replace_on_resize_on_replaces_the_workers_started_at_another_size() {
    let (farm, steer, pool, mut events) = two_ready(false, 0).await;
    resize_to(&steer, 1).await;
    assert!(resized(&drain(&mut events)).is_empty());

    let actions = pool
        .reconfigure(Reconfig::new().with_options(move |o| o.replace_on_resize = true))
        .unwrap();
    assert!(
        actions.contains(&kennel::Action::Replaced { slot: 0 }),
        "{actions:?}"
    );
    advance(ms(10)).await;
    assert_eq!(resized(&drain(&mut events)), [0]);
    advance(secs(2)).await;
    assert_eq!(farm.started_sizes(), [2, 2, 1]);
}

#[tokio::test(start_paused = true)]
async fn turning_it_off_leaves_a_lent_worker_that_waited_for_its_return() {
    let (farm, steer, pool, mut events) = two_ready(true, 0).await;
    let lease = pool.lend().await.unwrap();
    resize_to(&steer, 1).await;
    pool.reconfigure(Reconfig::new().with_options(move |o| o.replace_on_resize = false))
        .unwrap();
    drop(lease);
    advance(secs(2)).await;
    assert!(resized(&drain(&mut events)).is_empty());
    assert_eq!(farm.made(), 2);
    assert_eq!(farm.in_slot(0), Some(0));
}

#[tokio::test(start_paused = true)]
async fn a_new_sizing_with_a_lower_capacity_replaces_the_worker_started_for_the_old_size() {
    let farm = Farm::with_warmup(secs(1));
    let pool = support::fixed(&farm, Parallel, 2)
        .with_options(|o| o.replace_on_resize = true)
        .build()
        .unwrap();
    let mut events = pool.events();
    advance(secs(2)).await;
    // The capacity falls to 1 with the size: no resize step between them.
    let actions = pool
        .reconfigure(Reconfig::new().sizing(kennel::Fixed(1)))
        .unwrap();
    let said: Vec<String> = actions.iter().map(ToString::to_string).collect();
    assert!(
        said.contains(&"replacing the worker in slot 0 (started at another size)".to_owned()),
        "{said:?}"
    );
    advance(ms(10)).await;
    let seen = retired(&drain(&mut events));
    assert!(seen.contains(&(0, RetireReason::Resized)), "{seen:?}");
    advance(secs(2)).await;
    assert_eq!(farm.started_sizes(), [2, 2, 1]);
    let served = pool.run(async |w: &mut Fake| w.id).await.unwrap();
    assert_eq!(served, 2);
}

#[tokio::test(start_paused = true)]
async fn a_replacement_for_the_new_size_that_may_not_start_leaves_the_worker_retired_first() {
    let (farm, steer, pool, mut events) = two_ready(true, 1).await;
    // No memory for one more worker: no surge, so it is retired first.
    steer.refuse_starts(true);
    resize_to(&steer, 1).await;
    let seen = drain(&mut events);
    assert!(seen.iter().any(|e| matches!(
        e,
        Event::SurgeSkipped {
            slot: 0,
            reason: RetireReason::Resized
        }
    )));
    assert_eq!(resized(&seen), [0]);
    assert_eq!(farm.made(), 2);
    // Its replacement starts once the memory allows, at the new size.
    steer.refuse_starts(false);
    let served = pool.run(async |w: &mut Fake| w.id).await.unwrap();
    assert_eq!(served, 2);
    assert_eq!(farm.started_sizes(), [2, 2, 1]);
}

#[tokio::test(start_paused = true)]
async fn a_replacement_called_off_leaves_no_mark_so_the_next_one_warms_first() {
    // No surge: the lent worker is marked to be retired when its job
    // returns, then the size comes back before it does.
    let (farm, steer, pool, mut events) = two_ready(true, 0).await;
    let lease = pool.lend().await.unwrap();
    assert_eq!(lease.slot(), 0);
    resize_to(&steer, 1).await;
    resize_to(&steer, 2).await;
    drop(lease);
    advance(ms(10)).await;
    assert!(resized(&drain(&mut events)).is_empty());
    assert_eq!(farm.made(), 2);

    // With room for a surge now, its next replacement warms beside it
    // instead of retiring it first.
    pool.reconfigure(Reconfig::new().with_options(move |o| o.max_surge = 1))
        .unwrap();
    farm.plan([Warmup::Takes(secs(5))]);
    resize_to(&steer, 1).await;
    let seen = drain(&mut events);
    assert!(
        surging(&seen).contains(&(0, RetireReason::Resized)),
        "{seen:?}"
    );
    assert!(resized(&seen).is_empty(), "{seen:?}");
    let served = pool.run(async |w: &mut Fake| w.id).await.unwrap();
    assert_eq!(served, 0);
}

#[tokio::test(start_paused = true)]
async fn a_worker_replaced_for_its_lifetime_while_the_size_changes_ends_at_the_new_size() {
    let farm = Farm::with_warmup(secs(1));
    let steer = Steer::new(2, 2);
    let pool = steered(&farm, &steer)
        .with_options(|o| {
            o.replace_on_resize = true;
            o.max_surge = 1;
            o.max_lifetime = Some(secs(60));
        })
        .build()
        .unwrap();
    let mut events = pool.events();
    advance(secs(2)).await;
    // Slot 0's lifetime replacement starts 1.25 s ahead of its lifetime
    // (the warm-up seen and a quarter more), at the size of two.
    advance(secs(57)).await;
    let seen = drain(&mut events);
    assert!(
        surging(&seen).contains(&(0, RetireReason::Lifetime)),
        "{seen:?}"
    );
    assert_eq!(pool.stats().surging, 1, "still warming");
    // The size goes down while it warms: the replacement started at the
    // old size takes the slot, then is itself replaced, warm first, by one
    // started at the new size. Two warm-ups, the pool ends at its own
    // budget, and a worker is ready throughout.
    resize_to(&steer, 1).await;
    for _ in 0..200 {
        advance(ms(100)).await;
        let s = pool.stats();
        assert!(s.idle + s.lent >= 1, "no worker ready: {s:?}");
    }
    let seen = retired(&drain(&mut events));
    assert!(seen.contains(&(0, RetireReason::Lifetime)), "{seen:?}");
    assert!(seen.contains(&(0, RetireReason::Resized)), "{seen:?}");
    assert_eq!(farm.started_sizes(), [2, 2, 2, 1]);
    let id = farm.in_slot(0).expect("slot 0 runs a worker");
    assert_eq!(id, 3);
    let served = pool.run(async |w: &mut Fake| w.id).await.unwrap();
    assert_eq!(served, id);
}
