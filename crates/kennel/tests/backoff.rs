//! Replacing a worker that exits, with a back-off.
mod support;

use std::time::Duration;

use kennel::{Error, Event, Fixed, IdleTimeout, Parallel, Pool, Reconfig};
use support::{
    Fake, Farm, Warmup, advance, drain, fixed, ms, on_demand, parallel, secs, settle, spawn_run_id,
    until_made,
};

#[tokio::test(start_paused = true)]
async fn back_off_delays_are_1_2_4_seconds_and_so_on_up_to_60() {
    let farm = Farm::new();
    let _pool = parallel(&farm, 1);
    let mut gaps = Vec::new();
    until_made(&farm, 0).await;
    for id in 0..9 {
        settle().await;
        farm.exit(id);
        until_made(&farm, id + 1).await;
        gaps.push((farm.started_at(id + 1) - farm.started_at(id)).as_secs());
    }
    assert_eq!(gaps, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
}

#[tokio::test(start_paused = true)]
async fn each_back_off_is_an_event_with_its_delay() {
    let farm = Farm::new();
    let pool = parallel(&farm, 1);
    let mut events = pool.events();
    for id in 0..3 {
        until_made(&farm, id).await;
        settle().await;
        farm.exit(id);
    }
    settle().await;
    let delays: Vec<Duration> = drain(&mut events)
        .into_iter()
        .filter_map(|e| match e {
            Event::Backoff { delay, .. } => Some(delay),
            _ => None,
        })
        .collect();
    assert_eq!(delays, [secs(1), secs(2), secs(4)]);
}

#[tokio::test(start_paused = true)]
async fn a_worker_that_ran_ten_minutes_ends_the_back_off() {
    let farm = Farm::new();
    let _pool = parallel(&farm, 1);
    for id in 0..3 {
        until_made(&farm, id).await;
        settle().await;
        farm.exit(id);
    }
    until_made(&farm, 3).await;
    // Worker 3 runs ten minutes, then exits: no wait before the next.
    advance(secs(600)).await;
    farm.exit(3);
    settle().await;
    assert_eq!(farm.made(), 5, "replaced at once");
    assert_eq!(farm.started_at(4), farm.started_at(3) + secs(600));
    // The count starts again: the next early exit waits 1 s.
    farm.exit(4);
    until_made(&farm, 5).await;
    assert_eq!(farm.started_at(5) - farm.started_at(4), secs(1));
}

#[tokio::test(start_paused = true)]
async fn a_job_never_waits_for_a_back_off() {
    let farm = Farm::new();
    let pool = parallel(&farm, 1);
    for id in 0..8 {
        until_made(&farm, id).await;
        settle().await;
        farm.exit(id);
    }
    settle().await;
    // The slot now backs off 60 s; a job starts a worker at once.
    let before = tokio::time::Instant::now();
    let id = pool.run(async |w: &mut Fake| w.id).await.unwrap();
    assert_eq!(id, 8);
    assert_eq!(tokio::time::Instant::now(), before);
}

#[tokio::test(start_paused = true)]
async fn a_warm_up_failure_fails_only_the_job_waiting_for_it() {
    let farm = Farm::new();
    farm.plan([Warmup::Fails(secs(1))]);
    let pool = on_demand(&farm, 1);
    let first = spawn_run_id(&pool);
    settle().await;
    let second = spawn_run_id(&pool);
    settle().await;
    assert_eq!(pool.stats().waiting, 2);
    advance(secs(1)).await;
    let err = first.await.unwrap().unwrap_err();
    assert!(matches!(err, Error::WarmupFailed { slot: 0, .. }), "{err}");
    assert!(err.to_string().contains("model file is corrupt"), "{err}");
    // The other job keeps waiting, and gets the next worker at once.
    assert_eq!(second.await.unwrap().unwrap(), 1);
    assert!(farm.has_exited(0), "the failed worker was killed");
}

#[tokio::test(start_paused = true)]
async fn an_eager_slot_restarts_after_the_back_off_when_a_warm_up_fails() {
    let farm = Farm::new();
    farm.plan([Warmup::Fails(secs(1))]);
    let pool = parallel(&farm, 1);
    let job = spawn_run_id(&pool);
    advance(secs(1)).await;
    assert!(matches!(
        job.await.unwrap(),
        Err(Error::WarmupFailed { .. })
    ));
    assert_eq!(farm.made(), 1);
    advance(ms(999)).await;
    assert_eq!(farm.made(), 1, "not before the 1 s back-off");
    advance(ms(1)).await;
    assert_eq!(farm.made(), 2);
    settle().await;
    assert_eq!(pool.stats().idle, 1);
}

#[tokio::test(start_paused = true)]
async fn a_factory_error_is_a_warm_up_failure() {
    let farm = Farm::new();
    farm.fail_factory(1);
    let pool = Pool::builder(farm.factory())
        .sizing(Fixed(1))
        .build()
        .unwrap();
    let err = pool.run(async |w: &mut Fake| w.id).await.unwrap_err();
    assert!(matches!(err, Error::WarmupFailed { .. }), "{err}");
    assert!(err.to_string().contains("factory refused"), "{err}");
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 0);
}

#[tokio::test(start_paused = true)]
async fn workers_the_pool_ends_itself_start_no_back_off() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.job_timeout = Some(secs(1)))
        .build()
        .unwrap();
    let mut events = pool.events();
    // Failed, timed out: replaced at once, without a back-off.
    pool.lend().await.unwrap().fail();
    settle().await;
    let err = pool
        .run(async |w: &mut Fake| w.work(secs(5)).await)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }));
    settle().await;
    assert_eq!(farm.made(), 3);
    assert!(
        !drain(&mut events)
            .iter()
            .any(|e| matches!(e, Event::Backoff { .. }))
    );
}

#[tokio::test(start_paused = true)]
async fn an_evicted_worker_is_not_replaced_and_starts_no_back_off() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .eviction(IdleTimeout::new(secs(30)).unwrap())
        .build()
        .unwrap();
    let mut events = pool.events();
    advance(secs(31)).await;
    assert!(farm.has_exited(0));
    advance(secs(300)).await;
    assert_eq!(farm.made(), 1);
    let names: Vec<_> = drain(&mut events).iter().map(Event::name).collect();
    assert!(names.contains(&"worker:evicted"), "{names:?}");
    assert!(!names.contains(&"worker:backoff"), "{names:?}");
}

#[tokio::test(start_paused = true)]
async fn a_worker_the_pool_retires_after_ten_minutes_also_ends_the_back_off() {
    let farm = Farm::new();
    let pool = parallel(&farm, 1);
    for id in 0..3 {
        until_made(&farm, id).await;
        settle().await;
        farm.exit(id);
    }
    until_made(&farm, 3).await;
    advance(secs(600)).await;
    pool.lend().await.unwrap().fail();
    settle().await;
    assert_eq!(farm.made(), 5, "a failed worker is replaced at once");
    farm.exit(4);
    until_made(&farm, 5).await;
    assert_eq!(
        farm.started_at(5) - farm.started_at(4),
        secs(1),
        "the back-off count started again"
    );
}

#[tokio::test(start_paused = true)]
async fn a_slot_above_the_capacity_starts_no_back_off_when_its_lent_worker_exits() {
    let farm = Farm::new();
    let pool = parallel(&farm, 3);
    until_made(&farm, 2).await;
    settle().await;
    let leases = [
        pool.lend().await.unwrap(),
        pool.lend().await.unwrap(),
        pool.lend().await.unwrap(),
    ];
    assert_eq!(leases[2].slot(), 2);
    let mut events = pool.events();
    pool.reconfigure(Reconfig::new().sizing(Fixed(1))).unwrap();
    // Slot 2 is gone from the pool; its worker exits under its job.
    farm.exit(leases[2].id);
    settle().await;
    drop(leases);
    settle().await;
    let backoffs: Vec<Event> = drain(&mut events)
        .into_iter()
        .filter(|e| matches!(e, Event::Backoff { .. }))
        .collect();
    assert_eq!(backoffs, [], "nothing refills a slot above the capacity");
    // The slot comes back: the startup fills it at once.
    pool.reconfigure(Reconfig::new().sizing(Fixed(2))).unwrap();
    pool.reconfigure(Reconfig::new().sizing(Fixed(3))).unwrap();
    settle().await;
    assert_eq!(pool.stats().backing_off, 0, "{:?}", pool.stats());
    assert_eq!(pool.stats().starting + pool.stats().idle, 3);
}
