//! The crash-loop breaker: a run of failed starts with no worker ready
//! between them breaks the pool, which then turns jobs away with
//! `Unavailable` instead of starting a worker for each, makes one trial
//! start at a time after a growing back-off, and recovers with the first
//! worker that becomes ready.
mod support;

use std::time::Duration;

use kennel::{Error, Event, OnDemand, Parallel, Pool};
use support::{
    Fake, Farm, Warmup, advance, at_once, count, drain, fixed, ms, on_demand, secs, settle,
};

/// A farm whose next `n` workers fail their warm-up at once.
fn failing(n: usize) -> Farm {
    let farm = Farm::new();
    farm.plan(std::iter::repeat_n(Warmup::Fails(Duration::ZERO), n));
    farm
}

async fn one_job(pool: &Pool<Fake>) -> Result<usize, Error> {
    at_once(pool.run(async |w: &mut Fake| w.id)).await
}

/// Runs jobs one after the other until one fails with something other
/// than a failed warm-up; returns how many failed their warm-up.
async fn fail_until_broken(pool: &Pool<Fake>) -> usize {
    let mut failed = 0;
    loop {
        match one_job(pool).await {
            Err(Error::WarmupFailed { .. }) => failed += 1,
            Err(Error::Unavailable { .. }) => return failed,
            other => panic!("{other:?}"),
        }
        assert!(failed <= 5, "the breaker never tripped");
    }
}

#[tokio::test(start_paused = true)]
async fn a_crash_looping_pool_turns_jobs_away_with_unavailable_instead_of_starting_workers() {
    let farm = failing(1000);
    let pool = on_demand(&farm, 2);
    let mut events = pool.events();
    assert_eq!(
        fail_until_broken(&pool).await,
        5,
        "five failed starts break it"
    );
    assert_eq!(farm.made(), 5);
    let broken: Vec<Event> = drain(&mut events)
        .into_iter()
        .filter(|e| e.name() == "pool:broken")
        .collect();
    assert!(
        matches!(&broken[..], [Event::Broken { failed_starts: 5, last_failure, .. }] if last_failure.contains("model file is corrupt")),
        "{broken:?}"
    );
    for _ in 0..100 {
        let err = one_job(&pool).await.unwrap_err();
        let Error::Unavailable {
            retry_after,
            last_failure,
        } = err
        else {
            panic!("{err:?}");
        };
        assert_eq!(retry_after, secs(1));
        assert!(last_failure.contains("model file is corrupt"));
    }
    assert_eq!(farm.made(), 5, "no job started a worker of its own");
}

#[tokio::test(start_paused = true)]
async fn one_or_two_failed_warm_ups_still_let_the_next_job_start_a_worker_now() {
    let farm = failing(2);
    let pool = on_demand(&farm, 1);
    for _ in 0..2 {
        assert!(matches!(
            one_job(&pool).await,
            Err(Error::WarmupFailed { .. })
        ));
    }
    assert_eq!(one_job(&pool).await.unwrap(), 2, "started now, no back-off");
    assert!(!pool.stats().broken);
}

#[tokio::test(start_paused = true)]
async fn under_on_demand_the_next_job_after_the_back_off_is_the_trial() {
    let farm = failing(6);
    let pool = on_demand(&farm, 1);
    fail_until_broken(&pool).await;
    advance(ms(500)).await;
    assert!(matches!(
        one_job(&pool).await,
        Err(Error::Unavailable { retry_after, .. }) if retry_after == ms(500)
    ));
    advance(ms(500)).await;
    // The trial: it fails too, and the next one is 2 s away.
    assert!(matches!(
        one_job(&pool).await,
        Err(Error::WarmupFailed { .. })
    ));
    assert_eq!(farm.made(), 6);
    assert!(matches!(
        one_job(&pool).await,
        Err(Error::Unavailable { retry_after, .. }) if retry_after == secs(2)
    ));
    advance(secs(2)).await;
    assert_eq!(one_job(&pool).await.unwrap(), 6, "this trial comes up");
}

#[tokio::test(start_paused = true)]
async fn a_broken_pool_recovers_with_the_first_ready_worker() {
    let farm = failing(5);
    let pool = on_demand(&farm, 2);
    let mut events = pool.events();
    fail_until_broken(&pool).await;
    assert!(pool.stats().broken);
    advance(secs(1)).await;
    assert_eq!(one_job(&pool).await.unwrap(), 5);
    let s = pool.stats();
    assert!(!s.broken && s.is_healthy(), "{s:?}");
    let names: Vec<&str> = drain(&mut events).iter().map(Event::name).collect();
    let broke = names.iter().position(|n| *n == "pool:broken").unwrap();
    let recovered = names.iter().position(|n| *n == "pool:recovered").unwrap();
    assert!(broke < recovered, "{names:?}");
    // Fresh again: one failed start does not break it.
    farm.plan([Warmup::Fails(Duration::ZERO)]);
    let _held = pool.lend().await.unwrap();
    assert!(matches!(
        one_job(&pool).await,
        Err(Error::WarmupFailed { .. })
    ));
    assert!(!pool.stats().broken);
}

#[tokio::test(start_paused = true)]
async fn health_is_false_while_the_pool_is_broken() {
    let farm = failing(5);
    let pool = on_demand(&farm, 1);
    assert!(pool.stats().is_healthy());
    fail_until_broken(&pool).await;
    let s = pool.stats();
    assert!(s.broken, "{s:?}");
    assert_eq!((s.waiting, s.starting, s.idle, s.lent), (0, 0, 0, 0));
    assert!(!s.is_healthy(), "all zeros, yet broken: {s:?}");
    advance(secs(1)).await;
    one_job(&pool).await.unwrap();
    assert!(pool.stats().is_healthy());
}

#[tokio::test(start_paused = true)]
async fn a_broken_eager_pool_starts_at_most_one_trial_per_back_off() {
    let farm = failing(1000);
    let pool = fixed(&farm, Parallel, 2).build().unwrap();
    let mut events = pool.events();
    let step = ms(100);
    let mut starts: Vec<(Duration, usize)> = Vec::new();
    let mut broken_at = None;
    let mut now = Duration::ZERO;
    let mut made = 0;
    settle().await;
    while now < secs(120) {
        let m = farm.made();
        if m > made {
            starts.push((now, m - made));
            made = m;
        }
        if broken_at.is_none() && count(&drain(&mut events), "pool:broken") > 0 {
            broken_at = Some(now);
        }
        advance(step).await;
        now += step;
    }
    let broken_at = broken_at.expect("the pool broke");
    let trials: Vec<&(Duration, usize)> = starts.iter().filter(|(t, _)| *t > broken_at).collect();
    assert!(trials.len() >= 3, "trials go on: {starts:?}");
    assert!(
        trials.iter().all(|(_, n)| *n == 1),
        "one trial at a time: {starts:?}"
    );
    let gaps: Vec<Duration> = trials.windows(2).map(|w| w[1].0 - w[0].0).collect();
    assert!(
        gaps.windows(2).all(|g| g[1] >= g[0]) && gaps.iter().all(|g| *g >= secs(1)),
        "spaced by a growing back-off: {starts:?}"
    );
    // Without the breaker, two slots backing off 1, 2, 4 … 60 s would have
    // started 14 workers in 120 s.
    assert!(farm.made() < 14, "{starts:?}");
    assert!(pool.stats().broken);
}

#[tokio::test(start_paused = true)]
async fn a_worker_that_became_ready_and_later_exited_is_not_a_failed_start() {
    let farm = Farm::new();
    let pool = fixed(&farm, OnDemand, 1).build().unwrap();
    for id in 0..10 {
        assert_eq!(one_job(&pool).await.unwrap(), id);
        farm.exit(id);
        settle().await;
    }
    assert!(!pool.stats().broken);
    assert_eq!(one_job(&pool).await.unwrap(), 10);
}

#[tokio::test(start_paused = true)]
async fn the_breaker_can_be_turned_off() {
    let farm = failing(20);
    let pool = fixed(&farm, OnDemand, 1)
        .with_options(|o| o.break_after_failed_starts = None)
        .build()
        .unwrap();
    for _ in 0..20 {
        assert!(matches!(
            one_job(&pool).await,
            Err(Error::WarmupFailed { .. })
        ));
    }
    assert_eq!(farm.made(), 20, "every job started a worker of its own");
}
