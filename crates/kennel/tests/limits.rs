//! Time limits, bounded waiting, projected wait, options.
mod support;

use kennel::{Error, Event, Fixed, Parallel, Pool, RejectReason, RunOptions};
use support::{Fake, Farm, Warmup, drain, fixed, ms, parallel, secs, settle, spawn_lend_slot};

/// Queues `n` jobs behind the held worker, one after the other, and returns
/// their tasks.
async fn queue_jobs(
    pool: &Pool<Fake>,
    n: usize,
) -> Vec<tokio::task::JoinHandle<Result<(), Error>>> {
    let mut queued = Vec::new();
    for _ in 0..n {
        let p = pool.clone();
        queued.push(tokio::spawn(async move { p.lend().await.map(|_| ()) }));
        settle().await;
    }
    queued
}

#[tokio::test(start_paused = true)]
async fn a_job_past_its_timeout_fails_and_its_worker_is_killed_and_replaced() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.job_timeout = Some(secs(1)))
        .build()
        .unwrap();
    let mut events = pool.events();
    let started = tokio::time::Instant::now();
    let err = pool
        .run(async |w: &mut Fake| w.work(secs(10)).await)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Timeout { after } if after == secs(1)),
        "{err}"
    );
    assert_eq!(tokio::time::Instant::now() - started, secs(1));
    settle().await;
    assert!(farm.has_exited(0));
    let names: Vec<_> = drain(&mut events).iter().map(Event::name).collect();
    let timeout = names.iter().position(|n| *n == "worker:timeout").unwrap();
    let respawned = names.iter().position(|n| *n == "worker:respawned").unwrap();
    assert!(timeout < respawned, "{names:?}");
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_per_call_job_timeout_overrides_the_pools() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.job_timeout = Some(secs(1)))
        .build()
        .unwrap();
    let longer = RunOptions::new().job_timeout(Some(secs(3)));
    let got = pool
        .run_with(longer, async |w: &mut Fake| w.work(secs(2)).await)
        .await;
    assert_eq!(got.unwrap(), 0);
    let none = RunOptions::new().job_timeout(None);
    let got = pool
        .run_with(none, async |w: &mut Fake| w.work(secs(3600)).await)
        .await;
    assert_eq!(got.unwrap(), 0);
    let shorter = RunOptions::new().job_timeout(Some(ms(100)));
    let got = pool
        .run_with(shorter, async |w: &mut Fake| w.work(ms(500)).await)
        .await;
    assert!(matches!(got, Err(Error::Timeout { after }) if after == ms(100)));
}

#[tokio::test(start_paused = true)]
async fn a_warm_up_past_its_limit_fails_the_waiting_job_and_kills_the_worker() {
    let farm = Farm::new();
    farm.plan([Warmup::Hangs]);
    let pool = Pool::builder(farm.factory())
        .sizing(Fixed(1))
        .with_options(|o| o.warmup_timeout = Some(secs(5)))
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    let err = pool.run(async |w: &mut Fake| w.id).await.unwrap_err();
    assert!(matches!(err, Error::WarmupFailed { .. }), "{err}");
    assert!(err.to_string().contains("5s"), "{err}");
    assert_eq!(tokio::time::Instant::now() - started, secs(5));
    settle().await;
    assert!(farm.has_exited(0));
}

#[tokio::test(start_paused = true)]
async fn a_job_beyond_max_waiting_is_rejected_at_once_as_queue_full() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.max_waiting = Some(2))
        .build()
        .unwrap();
    let mut events = pool.events();
    let held = pool.lend().await.unwrap();
    let mut queued = Vec::new();
    for _ in 0..2 {
        let p = pool.clone();
        queued.push(tokio::spawn(async move {
            p.run(async |w: &mut Fake| w.id).await
        }));
    }
    settle().await;
    let err = pool.run(async |w: &mut Fake| w.id).await.unwrap_err();
    assert!(matches!(
        err,
        Error::Rejected {
            reason: RejectReason::QueueFull
        }
    ));
    assert!(drain(&mut events).iter().any(|e| matches!(
        e,
        Event::Rejected {
            reason: RejectReason::QueueFull
        }
    )));
    assert_eq!(RejectReason::QueueFull.as_str(), "queue-depth");
    drop(held);
    for q in queued {
        assert_eq!(q.await.unwrap().unwrap(), 0, "accepted jobs still complete");
    }
}

#[tokio::test(start_paused = true)]
async fn max_waiting_defaults_to_eight_times_the_capacity() {
    let farm = Farm::new();
    let pool = parallel(&farm, 2);
    settle().await;
    let _a = pool.lend().await.unwrap();
    let _b = pool.lend().await.unwrap();
    let mut queued = Vec::new();
    for _ in 0..16 {
        let p = pool.clone();
        queued.push(tokio::spawn(async move { p.lend().await.map(|_| ()) }));
    }
    settle().await;
    assert_eq!(pool.stats().waiting, 16);
    assert!(matches!(
        pool.lend().await,
        Err(Error::Rejected {
            reason: RejectReason::QueueFull
        })
    ));
}

#[tokio::test(start_paused = true)]
async fn lend_timeout_gives_up_after_its_wait_and_leaves_the_queue() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1).build().unwrap();
    let held = pool.lend().await.unwrap();
    let started = tokio::time::Instant::now();
    let err = pool.lend_timeout(secs(2)).await.unwrap_err();
    assert!(matches!(err, Error::LendTimeout { after } if after == secs(2)));
    assert_eq!(tokio::time::Instant::now() - started, secs(2));
    assert_eq!(pool.stats().waiting, 0);
    let err = pool
        .run_timeout(secs(1), async |w: &mut Fake| w.id)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::LendTimeout { .. }));
    drop(held);
    assert_eq!(
        pool.run_timeout(secs(1), async |w: &mut Fake| w.id)
            .await
            .unwrap(),
        0
    );
}

#[tokio::test(start_paused = true)]
async fn a_job_whose_projected_wait_is_too_long_is_rejected_as_queue_wait() {
    let farm = Farm::new();
    // A first job of 10 s sets the mean: one job ahead → 2 × 10 s = 20 s > 15 s.
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.max_queue_wait = Some(secs(15)))
        .build()
        .unwrap();
    pool.run(async |w: &mut Fake| w.work(secs(10)).await)
        .await
        .unwrap();
    let held = pool.lend().await.unwrap();
    let first = spawn_lend_slot(&pool);
    settle().await;
    let err = pool.lend().await.unwrap_err();
    assert!(matches!(
        err,
        Error::Rejected {
            reason: RejectReason::QueueWait
        }
    ));
    assert_eq!(RejectReason::QueueWait.as_str(), "queue-wait");
    drop(held);
    first.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_cold_pool_makes_no_projected_wait_rejection_before_a_job_returns() {
    // No job time is known yet: the job timeout (20 s) is no guess of it.
    // 20 jobs of 2 s on 3 workers really wait at most 6 × 2 s = 12 s.
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 3)
        .with_options(|o| {
            o.job_timeout = Some(secs(20));
            o.max_waiting = Some(20);
            o.max_queue_wait = Some(secs(30));
        })
        .build()
        .unwrap();
    let burst: Vec<_> = (0..20)
        .map(|_| {
            let p = pool.clone();
            tokio::spawn(async move { p.run(async |w: &mut Fake| w.work(secs(2)).await).await })
        })
        .collect();
    let mut rejected = 0;
    for job in burst {
        match job.await.unwrap() {
            Ok(_) => {}
            Err(Error::Rejected { .. }) => rejected += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(rejected, 0);
    assert!(pool.projected_wait().is_some(), "the mean is known now");
}

#[tokio::test(start_paused = true)]
async fn the_projected_wait_uses_the_mean_of_observed_job_times() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| {
            o.job_timeout = Some(secs(10));
            o.max_queue_wait = Some(secs(15));
            o.max_waiting = Some(100);
        })
        .build()
        .unwrap();
    // Jobs of 1 s: the mean drops to 1 s, so 14 jobs ahead still fit.
    for _ in 0..5 {
        pool.run(async |w: &mut Fake| w.work(secs(1)).await)
            .await
            .unwrap();
    }
    let held = pool.lend().await.unwrap();
    let mut queued = queue_jobs(&pool, 14).await;
    assert_eq!(pool.stats().waiting, 14);
    // The 15th waits (14 + 1) / 1 × 1 s = 15 s: still allowed; the 16th not.
    let p = pool.clone();
    queued.push(tokio::spawn(async move { p.lend().await.map(|_| ()) }));
    settle().await;
    assert!(matches!(
        pool.lend().await,
        Err(Error::Rejected {
            reason: RejectReason::QueueWait
        })
    ));
    drop(held);
    for q in queued {
        q.await.unwrap().unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn max_queue_wait_turned_on_later_learns_job_times_from_then_on() {
    // A pool that needs no job times does not read the clock for them;
    // setting `max_queue_wait` by reconfiguration starts timing.
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.max_waiting = Some(100))
        .build()
        .unwrap();
    pool.reconfigure(
        kennel::Reconfig::new().with_options(move |o| o.max_queue_wait = Some(secs(3))),
    )
    .unwrap();
    // Jobs of 1 s: with one worker, two jobs ahead still fit in 3 s.
    pool.run(async |w: &mut Fake| w.work(secs(1)).await)
        .await
        .unwrap();
    let held = pool.lend().await.unwrap();
    let queued = queue_jobs(&pool, 3).await;
    assert_eq!(pool.stats().waiting, 3, "(2 + 1) / 1 × 1 s = 3 s fits");
    assert!(matches!(
        pool.lend_timeout(secs(100)).await,
        Err(Error::Rejected {
            reason: RejectReason::QueueWait
        })
    ));
    drop(held);
    for q in queued {
        q.await.unwrap().unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn projected_wait_is_the_queue_over_the_running_slots_times_the_mean_job_time() {
    let farm = Farm::new();
    let untimed = fixed(&farm, Parallel, 1).build().unwrap();
    untimed
        .run(async |w: &mut Fake| w.work(secs(2)).await)
        .await
        .unwrap();
    assert_eq!(untimed.projected_wait(), None, "a pool that times no job");

    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| {
            o.max_queue_wait = Some(secs(3600));
            o.max_waiting = Some(10);
        })
        .build()
        .unwrap();
    settle().await;
    assert_eq!(pool.projected_wait(), None, "no job time known yet");
    pool.run(async |w: &mut Fake| w.work(secs(2)).await)
        .await
        .unwrap();
    assert_eq!(pool.projected_wait(), Some(secs(2)), "(0 + 1) / 1 × 2 s");
    let held = pool.lend().await.unwrap();
    let queued = queue_jobs(&pool, 2).await;
    assert_eq!(pool.projected_wait(), Some(secs(6)), "(2 + 1) / 1 × 2 s");
    drop(held);
    for q in queued {
        q.await.unwrap().unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn options_out_of_range_are_refused_naming_the_option() {
    let farm = Farm::new();
    for (builder, option) in [
        (
            fixed(&farm, Parallel, 1).with_options(|o| o.job_timeout = Some(secs(0))),
            "job_timeout",
        ),
        (
            fixed(&farm, Parallel, 1).with_options(|o| o.warmup_timeout = Some(secs(0))),
            "warmup_timeout",
        ),
        (
            fixed(&farm, Parallel, 1).with_options(|o| o.max_queue_wait = Some(secs(0))),
            "max_queue_wait",
        ),
        (
            fixed(&farm, Parallel, 1).with_options(|o| o.job_timeout = Some(secs(3_000_000))),
            "job_timeout",
        ),
        (fixed(&farm, Parallel, 1).name(""), "name"),
        (
            fixed(&farm, Parallel, 1).event_capacity(0),
            "event_capacity",
        ),
        (fixed(&farm, Parallel, 1).sizing(Fixed(0)), "sizing"),
    ] {
        let err = builder.build().unwrap_err();
        assert_eq!(err.option, option);
        assert!(err.to_string().contains(option), "{err}");
        assert!(err.to_string().contains("allowed"), "{err}");
    }
}
