//! Closing a pool, and dropping it without closing.
mod support;

use std::time::Duration;

use kennel::{Error, Fixed, Parallel, Pool};
use support::{
    Ending, Endings, Fake, Farm, Steer, Warmup, Watched, advance, fixed, ms, names, on_demand,
    parallel, secs, settle, spawn_close, within,
};
use tokio::time::Instant;

/// A pool of `n` watched workers, started at once, whose close takes
/// `close_takes`, with a close grace of `grace`.
fn watched(
    farm: &Farm,
    endings: &Endings,
    n: usize,
    close_takes: Duration,
    grace: Duration,
) -> Pool<Watched> {
    Pool::builder(farm.watched_factory(endings, close_takes))
        .startup(Parallel)
        .sizing(Fixed(n))
        .with_options(|o| o.job_grace = grace)
        .build()
        .unwrap()
}

const DAY: Duration = Duration::from_secs(24 * 3600);

/// Closes the pool, failing the test if that takes more than a day.
async fn closed<W: kennel::Worker>(pool: &Pool<W>) {
    within(DAY, pool.close()).await;
}

fn is_closed<T: std::fmt::Debug>(r: &Result<T, Error>) -> bool {
    matches!(r, Err(Error::Closed))
}

#[tokio::test(start_paused = true)]
async fn close_refuses_new_jobs_with_closed() {
    let farm = Farm::new();
    let pool = parallel(&farm, 2);
    settle().await;
    assert!(!pool.is_closed());
    closed(&pool).await;
    assert!(pool.is_closed());

    let made = farm.made();
    let r = pool.run(async |w: &mut Fake| w.id).await;
    assert!(is_closed(&r), "{r:?}");
    assert_eq!(r.unwrap_err().to_string(), "pool is closed");
    assert!(is_closed(&pool.lend().await));
    assert!(is_closed(&pool.lend_timeout(secs(1)).await));
    assert!(is_closed(
        &pool.run_timeout(secs(1), async |w: &mut Fake| w.id).await
    ));
    assert_eq!(farm.made(), made, "no worker was started for them");
    assert_eq!(pool.stats().waiting, 0);
}

#[tokio::test(start_paused = true)]
async fn close_fails_waiting_jobs_with_closed() {
    let farm = Farm::new();
    farm.plan([Warmup::Takes(Duration::ZERO), Warmup::Hangs]);
    let pool = on_demand(&farm, 2);
    let held = pool.lend().await.unwrap();
    // One job waits for the worker that warms up in slot 1, two queue.
    let mut jobs = Vec::new();
    for _ in 0..3 {
        let p = pool.clone();
        jobs.push(tokio::spawn(async move {
            p.run(async |w: &mut Fake| w.id).await
        }));
        settle().await;
    }
    let s = pool.stats();
    assert_eq!((s.waiting, s.starting, s.lent), (3, 1, 1));

    let close = spawn_close(&pool);
    settle().await;
    for j in jobs {
        let r = within(DAY, j).await.unwrap();
        assert!(is_closed(&r), "{r:?}");
    }
    assert_eq!(pool.stats().waiting, 0);
    assert!(!close.is_finished(), "the lent job still holds its worker");
    drop(held);
    within(DAY, close).await.unwrap();
    assert_eq!(farm.alive(), 0);
}

#[tokio::test(start_paused = true)]
async fn close_closes_idle_workers_gracefully() {
    let farm = Farm::new();
    let endings = Endings::default();
    let pool = watched(&farm, &endings, 3, Duration::ZERO, secs(30));
    settle().await;
    assert_eq!(pool.stats().idle, 3);
    let t0 = Instant::now();
    closed(&pool).await;
    assert_eq!(t0.elapsed(), Duration::ZERO, "nothing to wait for");
    for id in 0..3 {
        assert!(farm.has_exited(id));
        assert_eq!(endings.of(id), Some(Ending::Closed), "worker {id}");
    }
}

#[tokio::test(start_paused = true)]
async fn close_closes_kept_workers_too() {
    let farm = Farm::new();
    let endings = Endings::default();
    let steer = Steer::new(3, 3);
    let pool = Pool::builder(farm.watched_factory(&endings, Duration::ZERO))
        .startup(Parallel)
        .sizing(steer.clone())
        .build()
        .unwrap();
    settle().await;
    steer.set_size(1);
    advance(Steer::TICK).await;
    assert_eq!((pool.stats().idle, pool.stats().kept), (1, 2));
    closed(&pool).await;
    assert_eq!(farm.alive(), 0);
    for id in 0..3 {
        assert_eq!(endings.of(id), Some(Ending::Closed), "worker {id}");
    }
}

#[tokio::test(start_paused = true)]
async fn close_lets_lent_jobs_finish_within_the_grace_and_resolves_after_they_return() {
    let farm = Farm::new();
    let endings = Endings::default();
    let pool = watched(&farm, &endings, 2, Duration::ZERO, secs(10));
    settle().await;
    let p = pool.clone();
    let job =
        tokio::spawn(async move { p.run(async |w: &mut Watched| w.work(secs(3)).await).await });
    settle().await;
    assert_eq!(pool.stats().lent, 1);

    let close = spawn_close(&pool);
    advance(secs(3) - ms(1)).await;
    assert!(!close.is_finished(), "the job has not returned yet");
    assert!(!job.is_finished());
    assert!(!farm.has_exited(0), "a lent worker is not cut short");
    assert!(farm.has_exited(1), "the idle one is closed at once");

    advance(ms(1)).await;
    assert_eq!(
        within(DAY, job).await.unwrap().unwrap(),
        0,
        "the job ran to its end"
    );
    assert!(close.is_finished(), "close resolved once the job returned");
    within(DAY, close).await.unwrap();
    assert_eq!(endings.of(0), Some(Ending::Closed), "then it was closed");
    assert_eq!(farm.alive(), 0);
}

#[tokio::test(start_paused = true)]
async fn close_kills_lent_workers_after_the_grace_and_the_job_fails_with_closed() {
    let farm = Farm::new();
    let endings = Endings::default();
    let pool = watched(&farm, &endings, 1, Duration::ZERO, secs(5));
    settle().await;
    let p = pool.clone();
    let job = tokio::spawn(async move {
        p.run(async |w: &mut Watched| w.work(secs(3600)).await)
            .await
    });
    settle().await;

    let close = spawn_close(&pool);
    advance(secs(5) - ms(1)).await;
    assert!(!close.is_finished());
    assert!(!farm.has_exited(0), "the grace is not over");

    advance(ms(1)).await;
    assert!(close.is_finished(), "close resolves once the kill is seen");
    within(DAY, close).await.unwrap();
    assert_eq!(endings.of(0), Some(Ending::Killed));
    assert_eq!(farm.alive(), 0);
    let r = within(DAY, job).await.unwrap();
    assert!(is_closed(&r), "{r:?}");
}

#[tokio::test(start_paused = true)]
async fn a_lease_held_past_the_grace_loses_its_worker() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.job_grace = secs(2))
        .build()
        .unwrap();
    let lease = pool.lend().await.unwrap();
    let t0 = Instant::now();
    closed(&pool).await;
    assert_eq!(t0.elapsed(), secs(2));
    assert!(lease.has_exited());
    assert_eq!(farm.alive(), 0);
    drop(lease);
    settle().await;
    assert_eq!(farm.made(), 1, "nothing is started after close");
}

#[tokio::test(start_paused = true)]
async fn close_resolves_only_when_every_worker_has_ended() {
    let farm = Farm::new();
    let endings = Endings::default();
    // Each worker takes 4 s to close; slot 2 is still warming up.
    farm.plan([
        Warmup::Takes(Duration::ZERO),
        Warmup::Takes(Duration::ZERO),
        Warmup::Takes(secs(3600)),
    ]);
    let pool = watched(&farm, &endings, 3, secs(4), secs(30));
    settle().await;
    let p = pool.clone();
    let job =
        tokio::spawn(async move { p.run(async |w: &mut Watched| w.work(secs(2)).await).await });
    settle().await;
    assert_eq!(
        (pool.stats().starting, pool.stats().idle, pool.stats().lent),
        (1, 1, 1)
    );

    let t0 = Instant::now();
    closed(&pool).await;
    assert_eq!(
        farm.alive(),
        0,
        "every worker has ended when close resolves"
    );
    // The job returns at 2 s, then its worker takes 4 s to close.
    assert_eq!(t0.elapsed(), secs(6));
    assert_eq!(within(DAY, job).await.unwrap().unwrap(), 0);
    assert_eq!(endings.of(0), Some(Ending::Closed));
    assert_eq!(endings.of(1), Some(Ending::Closed));
    assert_eq!(endings.of(2), Some(Ending::Killed), "starting: killed");
}

#[tokio::test(start_paused = true)]
async fn a_worker_whose_close_outlasts_the_grace_is_killed() {
    let farm = Farm::new();
    let endings = Endings::default();
    let pool = watched(&farm, &endings, 2, secs(3600), secs(5));
    settle().await;
    let t0 = Instant::now();
    closed(&pool).await;
    assert_eq!(t0.elapsed(), secs(5));
    assert_eq!(farm.alive(), 0);
}

#[tokio::test(start_paused = true)]
async fn closing_twice_is_harmless() {
    let farm = Farm::new();
    let pool = parallel(&farm, 2);
    let mut events = pool.events();
    let lease = pool.lend().await.unwrap();

    // Two closes at once both wait for the lent worker.
    let (p, q) = (pool.clone(), pool.clone());
    let first = tokio::spawn(async move { p.close().await });
    let second = tokio::spawn(async move { q.close().await });
    settle().await;
    assert!(!first.is_finished() && !second.is_finished());
    drop(lease);
    settle().await;
    first.await.unwrap();
    second.await.unwrap();

    // And once more after it is closed.
    closed(&pool).await;
    assert!(pool.is_closed());
    assert_eq!(farm.alive(), 0);
    assert_eq!(farm.made(), 2);
    let closed = names(&mut events)
        .into_iter()
        .filter(|n| *n == "pool:closed")
        .count();
    assert_eq!(closed, 1, "one pool:closed event");
}

#[tokio::test(start_paused = true)]
async fn dropping_the_last_pool_without_closing_kills_every_worker_at_once() {
    let farm = Farm::new();
    let endings = Endings::default();
    farm.plan([
        Warmup::Takes(Duration::ZERO),
        Warmup::Takes(Duration::ZERO),
        Warmup::Hangs,
    ]);
    let pool = watched(&farm, &endings, 3, secs(3600), secs(3600));
    settle().await;
    let lease = pool.lend().await.unwrap();
    let s = pool.stats();
    assert_eq!((s.lent, s.idle, s.starting), (1, 1, 1));

    let clone = pool.clone();
    drop(pool);
    settle().await;
    assert_eq!(farm.alive(), 3, "a clone is still out");

    let t0 = Instant::now();
    drop(clone);
    settle().await;
    assert_eq!(t0.elapsed(), Duration::ZERO);
    assert_eq!(farm.alive(), 0);
    for id in 0..3 {
        assert_eq!(endings.of(id), Some(Ending::Killed), "worker {id}");
    }
    assert!(lease.has_exited(), "the lent worker was killed too");
    drop(lease);
    settle().await;
    assert_eq!(farm.made(), 3, "nothing was started again");
}

#[tokio::test(start_paused = true)]
async fn workers_starting_at_close_time_are_killed_too() {
    let farm = Farm::new();
    let endings = Endings::default();
    farm.plan([Warmup::Takes(secs(3600)), Warmup::Hangs]);
    let pool = watched(&farm, &endings, 2, Duration::ZERO, secs(30));
    settle().await;
    assert_eq!(pool.stats().starting, 2);
    let p = pool.clone();
    let job = tokio::spawn(async move { p.run(async |w: &mut Watched| w.id).await });
    settle().await;
    assert_eq!(pool.stats().waiting, 1);

    let t0 = Instant::now();
    closed(&pool).await;
    assert_eq!(
        t0.elapsed(),
        Duration::ZERO,
        "close does not wait for warm-ups"
    );
    assert_eq!(farm.alive(), 0);
    assert_eq!(endings.of(0), Some(Ending::Killed));
    assert_eq!(endings.of(1), Some(Ending::Killed));
    let r = within(DAY, job).await.unwrap();
    assert!(is_closed(&r), "{r:?}");
    advance(secs(7200)).await;
    assert_eq!(farm.made(), 2, "no warm-up finished into the pool");
    assert_eq!(pool.stats().idle, 0);
}

#[tokio::test(start_paused = true)]
async fn close_emits_pool_closed() {
    let farm = Farm::new();
    let pool = parallel(&farm, 1);
    let mut events = pool.events();
    settle().await;
    support::drain(&mut events);
    closed(&pool).await;
    assert_eq!(names(&mut events), ["pool:closed"]);
}

#[tokio::test(start_paused = true)]
async fn a_closed_pool_shows_no_worker() {
    let farm = Farm::new();
    let pool = parallel(&farm, 3);
    let _ = pool.lend().await.unwrap();
    closed(&pool).await;
    let s = pool.stats();
    assert_eq!(
        (s.starting, s.idle, s.lent, s.waiting, s.kept),
        (0, 0, 0, 0, 0)
    );
    assert!(s.is_healthy());
}
