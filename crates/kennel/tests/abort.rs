//! Abort by drop: a job whose future is dropped gives its worker up.
mod support;

use kennel::{Event, Fixed, Pool, RetireReason};
use support::{
    Fake, Farm, advance, drain, on_demand, parallel, secs, settle, spawn_run_id, spawn_run_slot,
};

#[tokio::test(start_paused = true)]
async fn an_aborted_job_kills_its_worker() {
    let farm = Farm::new();
    let pool = parallel(&farm, 1);
    let mut events = pool.events();
    let p = pool.clone();
    let job = tokio::spawn(async move { p.run(async |w: &mut Fake| w.work(secs(60)).await).await });
    settle().await;
    assert_eq!(pool.stats().lent, 1);
    job.abort();
    settle().await;
    assert!(farm.has_exited(0), "its state is unknown: killed");
    assert!(drain(&mut events).iter().any(|e| matches!(
        e,
        Event::Retired {
            reason: RetireReason::Aborted,
            ..
        }
    )));
    // Replaced at once for the eager startup, with no back-off.
    assert_eq!(farm.made(), 2);
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_plain_lease_returns_the_worker_but_dropping_run_mid_job_does_not() {
    let farm = Farm::new();
    let pool = Pool::builder(farm.factory())
        .sizing(Fixed(1))
        .build()
        .unwrap();
    let p = pool.clone();
    let job = tokio::spawn(async move {
        let lease = p.lend().await.unwrap();
        std::future::pending::<()>().await;
        drop(lease);
    });
    settle().await;
    job.abort();
    settle().await;
    assert!(
        !farm.has_exited(0),
        "a lease outside run is returned, not killed"
    );
    assert_eq!(pool.stats().idle, 1);
}

#[tokio::test(start_paused = true)]
async fn an_aborted_job_in_the_queue_leaves_the_queue() {
    let farm = Farm::new();
    let pool = Pool::builder(farm.factory())
        .sizing(Fixed(1))
        .build()
        .unwrap();
    let held = pool.lend().await.unwrap();
    let queued = spawn_run_id(&pool);
    settle().await;
    assert_eq!(pool.stats().waiting, 1);
    queued.abort();
    settle().await;
    assert_eq!(pool.stats().waiting, 0);
    drop(held);
    assert_eq!(pool.stats().idle, 1, "the worker came back to no one");
    assert!(!farm.has_exited(0));
}

#[tokio::test(start_paused = true)]
async fn an_aborted_job_whose_worker_warms_up_leaves_the_warm_up_for_the_next_job() {
    let farm = Farm::with_warmup(secs(10));
    let pool = on_demand(&farm, 1);
    let job = spawn_run_id(&pool);
    advance(secs(4)).await;
    assert_eq!(pool.stats().starting, 1);
    job.abort();
    settle().await;
    assert_eq!(pool.stats().starting, 1, "the warm-up goes on");
    assert_eq!(pool.stats().waiting, 0);
    advance(secs(6)).await;
    assert_eq!(pool.stats().idle, 1);
    // The next job takes that worker: no new one is made.
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 0);
    assert_eq!(farm.made(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_job_that_joins_a_warm_up_after_an_abort_gets_that_worker() {
    let farm = Farm::with_warmup(secs(10));
    let pool = on_demand(&farm, 2);
    let first = spawn_run_id(&pool);
    advance(secs(4)).await;
    first.abort();
    settle().await;
    // The starting worker is no longer awaited: a new job takes it rather
    // than starting slot 1 (rule 2 of docs/concepts/lending.md).
    let second = spawn_run_slot(&pool);
    settle().await;
    assert_eq!(farm.made(), 1);
    advance(secs(6)).await;
    assert_eq!(second.await.unwrap().unwrap(), 0);
}
