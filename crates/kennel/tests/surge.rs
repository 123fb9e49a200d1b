//! Warm replacement first (`max_surge`): a worker due for retirement keeps
//! serving while its replacement warms above the capacity, then the
//! replacement takes its slot, so a recycle never leaves the pool short.
mod support;

use std::time::Duration;

use kennel::{Event, OnDemand, Parallel, Pool, Resources, RetireReason, TestComputer};
use support::{Fake, Farm, Health, advance, count, drain, fixed, ms, ready, retired, secs, settle};
use tokio::sync::broadcast;

const GIB: u64 = 1 << 30;

/// Keeps `n` jobs of `d` each running on `pool`, one after the other per
/// task, until the pool closes.
fn load(pool: &Pool<Fake>, n: usize, d: Duration) {
    for _ in 0..n {
        let p = pool.clone();
        tokio::spawn(
            async move { while p.run(async |w: &mut Fake| w.work(d).await).await.is_ok() {} },
        );
    }
}

/// The time, from the pool's start, of the first event named `name` seen
/// on `events` while stepping the clock by 100 ms up to `until`; `check`
/// runs at every step.
async fn step_until(
    events: &mut broadcast::Receiver<Event>,
    name: &str,
    until: Duration,
    mut check: impl FnMut(),
) -> Option<Duration> {
    let start = tokio::time::Instant::now();
    let mut elapsed = Duration::ZERO;
    while elapsed < until {
        advance(ms(100)).await;
        elapsed = start.elapsed();
        check();
        if count(&drain(events), name) > 0 {
            return Some(elapsed);
        }
    }
    None
}

#[tokio::test(start_paused = true)]
async fn with_max_surge_1_a_recycled_workers_replacement_is_ready_before_it_leaves() {
    let farm = Farm::with_warmup(secs(2));
    let pool = fixed(&farm, OnDemand, 2)
        .with_options(|o| {
            o.max_lifetime = Some(secs(60));
            o.max_surge = 1;
        })
        .build()
        .unwrap();
    let mut events = pool.events();
    // Two workers, started 30 s apart, so their lifetimes end apart.
    drop(pool.lend().await.unwrap());
    advance(secs(30)).await;
    let held = pool.lend().await.unwrap();
    let second = pool.lend().await.unwrap();
    drop((held, second));
    advance(secs(3)).await;
    assert_eq!(ready(&pool), 2);
    load(&pool, 1, ms(300));
    // Through five recycles, checked at every step of 100 ms.
    for _ in 0..2000 {
        advance(ms(100)).await;
        assert!(
            ready(&pool) >= 2,
            "short during a recycle: {:?}",
            pool.stats()
        );
        assert!(farm.alive() <= 3, "more than capacity + max_surge alive");
    }
    let all = drain(&mut events);
    let lifetimes = retired(&all)
        .iter()
        .filter(|(_, r)| *r == RetireReason::Lifetime)
        .count();
    assert!(lifetimes >= 5, "recycled: {lifetimes}");
    assert_eq!(count(&all, "worker:surging"), lifetimes);
    assert_eq!(count(&all, "worker:surge-skipped"), 0);
}

#[tokio::test(start_paused = true)]
async fn the_pool_never_runs_more_than_capacity_plus_max_surge_workers() {
    let farm = Farm::with_warmup(secs(2));
    let pool = fixed(&farm, Parallel, 3)
        .with_options(|o| {
            o.max_jobs = Some(20);
            o.max_jobs_jitter = 5;
        })
        .seed(3)
        .with_options(|o| o.max_surge = 1)
        .build()
        .unwrap();
    let mut events = pool.events();
    advance(secs(3)).await;
    load(&pool, 3, ms(100));
    let mut most = 0;
    for _ in 0..1500 {
        advance(ms(100)).await;
        most = most.max(farm.alive());
        assert!(farm.alive() <= 4, "{} alive", farm.alive());
        assert!(pool.stats().surging <= 1);
    }
    assert_eq!(most, 4, "a surge ran");
    let all = drain(&mut events);
    assert!(count(&all, "worker:surging") >= 10);
}

#[tokio::test(start_paused = true)]
async fn a_lifetimes_replacement_starts_ahead_of_it_by_the_observed_warm_up() {
    let farm = Farm::with_warmup(secs(2));
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| {
            o.max_lifetime = Some(secs(60));
            o.max_surge = 1;
        })
        .build()
        .unwrap();
    let mut events = pool.events();
    let start = tokio::time::Instant::now();
    settle().await;
    // The longest warm-up seen (2 s) and a quarter more: 2.5 s ahead.
    let at = step_until(&mut events, "worker:surging", secs(70), || {}).await;
    let at = at.expect("a replacement started");
    assert_eq!(at, ms(57_500), "started 2.5 s ahead of the lifetime");
    assert_eq!(pool.stats().surging, 1);
    // Warm at 59.5 s, it takes the idle worker's slot at once.
    let left = step_until(&mut events, "worker:retired", secs(5), || {
        assert_eq!(ready(&pool), 1);
    })
    .await;
    assert!(left.is_some(), "the old worker left");
    assert!(start.elapsed() <= secs(60), "within its lifetime");
    assert!(farm.has_exited(0));
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 1);
    assert_eq!(pool.stats().surging, 0);
}

#[tokio::test(start_paused = true)]
async fn a_max_jobs_replacement_starts_ahead_of_the_last_job() {
    let farm = Farm::with_warmup(secs(2));
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| {
            o.max_jobs = Some(100);
            o.max_surge = 1;
        })
        .build()
        .unwrap();
    let mut events = pool.events();
    advance(secs(2)).await;
    let mut served_by_0 = 0;
    let mut surged_after = None;
    for _ in 0..200 {
        let p = pool.clone();
        let job =
            tokio::spawn(async move { p.run(async |w: &mut Fake| w.work(ms(100)).await).await });
        while !job.is_finished() {
            advance(ms(10)).await;
            assert_eq!(ready(&pool), 1, "short during the recycle");
        }
        if job.await.unwrap().unwrap() == 0 {
            served_by_0 += 1;
        }
        if surged_after.is_none() && count(&drain(&mut events), "worker:surging") > 0 {
            surged_after = Some(served_by_0);
        }
    }
    // 10 jobs a second, 2.5 s ahead: 25 jobs before its last.
    let surged_after = surged_after.expect("a replacement started");
    assert!(
        (74..=76).contains(&surged_after),
        "after {surged_after} jobs"
    );
    // It served no more than its jobs, and left once its replacement was warm.
    assert!((95..=100).contains(&served_by_0), "served {served_by_0}");
    assert!(farm.has_exited(0));
}

#[tokio::test(start_paused = true)]
async fn over_max_memory_a_worker_serves_until_its_replacement_is_ready() {
    let farm = Farm::with_warmup(secs(2));
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| {
            o.max_memory = Some(1000);
            o.memory_check_every = secs(1);
            o.max_surge = 1;
        })
        .build()
        .unwrap();
    let mut events = pool.events();
    advance(secs(3)).await;
    farm.set_memory(0, 2000);
    advance(secs(1)).await;
    let all = drain(&mut events);
    assert_eq!(count(&all, "worker:surging"), 1);
    assert!(
        retired(&all).is_empty(),
        "not retired before its replacement"
    );
    // It still serves meanwhile.
    for _ in 0..5 {
        assert_eq!(
            pool.run(async |w: &mut Fake| w.work(ms(100)).await)
                .await
                .unwrap(),
            0
        );
        assert_eq!(ready(&pool), 1);
    }
    advance(ms(1600)).await;
    assert_eq!(retired(&drain(&mut events)), [(0, RetireReason::MaxMemory)]);
    assert_eq!(ready(&pool), 1);
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_lent_worker_over_max_memory_leaves_when_its_job_returns_to_a_warm_replacement() {
    let farm = Farm::with_warmup(secs(2));
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| {
            o.max_memory = Some(1000);
            o.memory_check_every = secs(1);
            o.max_surge = 1;
        })
        .build()
        .unwrap();
    let mut events = pool.events();
    advance(secs(3)).await;
    let lease = pool.lend().await.unwrap();
    farm.set_memory(0, 2000);
    for _ in 0..5 {
        advance(secs(1)).await;
    }
    // Its replacement is warm; the job is never cut short.
    assert!(!farm.has_exited(0));
    assert_eq!(pool.stats().surging, 1);
    assert!(retired(&drain(&mut events)).is_empty());
    drop(lease);
    settle().await;
    assert_eq!(retired(&drain(&mut events)), [(0, RetireReason::MaxMemory)]);
    assert_eq!(pool.stats().idle, 1);
    assert_eq!(pool.stats().surging, 0);
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_worker_that_answers_its_probe_wrong_serves_until_its_replacement_is_ready() {
    let farm = Farm::with_warmup(secs(2));
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| {
            o.probe_every = Some(secs(1));
            o.max_surge = 1;
        })
        .build()
        .unwrap();
    let mut events = pool.events();
    advance(secs(2)).await;
    farm.set_health(0, Health::Bad);
    advance(secs(1)).await;
    let all = drain(&mut events);
    assert_eq!(count(&all, "worker:probe-failed"), 1);
    assert_eq!(count(&all, "worker:surging"), 1);
    assert!(retired(&all).is_empty());
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 0);
    advance(secs(2)).await;
    assert_eq!(
        retired(&drain(&mut events)),
        [(0, RetireReason::ProbeFailed)]
    );
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_worker_that_does_not_answer_its_probe_is_retired_at_once_even_with_a_surge() {
    let farm = Farm::with_warmup(secs(2));
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| {
            o.probe_every = Some(secs(1));
            o.probe_timeout = secs(1);
            o.max_surge = 1;
        })
        .build()
        .unwrap();
    let mut events = pool.events();
    advance(secs(2)).await;
    farm.set_health(0, Health::Hangs);
    advance(secs(1)).await;
    advance(secs(1)).await;
    let all = drain(&mut events);
    assert_eq!(retired(&all), [(0, RetireReason::ProbeFailed)]);
    assert_eq!(count(&all, "worker:surging"), 0);
}

#[tokio::test(start_paused = true)]
async fn a_surge_that_does_not_fit_in_memory_falls_back_to_retire_then_start_and_says_so() {
    let farm = Farm::with_warmup(secs(2));
    // Memory for exactly the two workers of the capacity, not a third.
    let computer = TestComputer::new(2, 4 * GIB);
    let pool = Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(Resources::new(2 * GIB, computer.clone()))
        .with_options(|o| {
            o.max_lifetime = Some(secs(60));
            o.max_surge = 1;
        })
        .build()
        .unwrap();
    let mut events = pool.events();
    // Ready in 2 s (the clock steps, so the warm-up is timed as it ran).
    advance(secs(2)).await;
    advance(secs(56)).await;
    let all = drain(&mut events);
    let skipped: Vec<_> = all
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::SurgeSkipped {
                    reason: RetireReason::Lifetime,
                    ..
                }
            )
        })
        .collect();
    assert_eq!(skipped.len(), 2, "{all:?}");
    assert_eq!(count(&all, "worker:surging"), 0);
    assert_eq!(farm.made(), 2);
    // At the deadline: retired, then started, as without a surge.
    advance(secs(2)).await;
    let all = drain(&mut events);
    assert_eq!(retired(&all).len(), 2);
    assert_eq!(pool.stats().starting, 2);
    advance(secs(2)).await;
    assert_eq!(ready(&pool), 2);

    // With memory for a third, the next recycle surges.
    computer.set_memory(6 * GIB);
    advance(secs(56)).await;
    let all = drain(&mut events);
    assert_eq!(count(&all, "worker:surging"), 1, "{all:?}");
}

#[tokio::test(start_paused = true)]
async fn with_max_surge_0_a_recycle_retires_first_then_starts() {
    let farm = Farm::with_warmup(secs(2));
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.max_lifetime = Some(secs(60)))
        .build()
        .unwrap();
    assert_eq!(pool.options().max_surge, 0);
    let mut events = pool.events();
    advance(secs(60)).await;
    let all = drain(&mut events);
    assert_eq!(retired(&all), [(0, RetireReason::Lifetime)]);
    assert_eq!(count(&all, "worker:surging"), 0);
    // One short for a whole warm-up.
    assert_eq!((ready(&pool), pool.stats().starting), (0, 1));
    advance(secs(2)).await;
    assert_eq!(ready(&pool), 1);
}
