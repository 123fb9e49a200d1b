//! Recycling and spares: a worker is retired after `max_jobs` (spread by
//! its jitter), `min_idle` keeps spare workers ahead of demand, and a job
//! held past `slow_job` is said once.
mod support;

use kennel::{Event, IdleTimeout, OnDemand, Parallel, Reconfig, RetireReason};
use support::{Fake, Farm, advance, count, drain, fixed, hold, ms, retired, secs, settle};

#[tokio::test(start_paused = true)]
async fn a_worker_is_retired_when_its_last_job_of_max_jobs_returns() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.max_jobs = Some(3))
        .build()
        .unwrap();
    let mut events = pool.events();
    for _ in 0..3 {
        assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 0);
    }
    settle().await;
    assert!(farm.has_exited(0), "retired after its third job");
    assert_eq!(retired(&drain(&mut events)), [(0, RetireReason::MaxJobs)]);
    // Replaced, and the new worker serves the next jobs.
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 1);
    assert_eq!(pool.stats().idle, 1);
}

#[tokio::test(start_paused = true)]
async fn a_worker_never_serves_more_than_max_jobs() {
    let farm = Farm::new();
    let pool = fixed(&farm, OnDemand, 1)
        .with_options(|o| o.max_jobs = Some(2))
        .build()
        .unwrap();
    let mut served = std::collections::BTreeMap::<usize, u32>::new();
    for _ in 0..10 {
        let id = pool.run(async |w: &mut Fake| w.id).await.unwrap();
        *served.entry(id).or_default() += 1;
        settle().await;
    }
    assert_eq!(served.len(), 5, "{served:?}");
    assert!(served.values().all(|&n| n == 2), "{served:?}");
}

#[tokio::test(start_paused = true)]
async fn max_jobs_with_jitter_stays_in_its_bounds_and_spreads() {
    let farm = Farm::new();
    let pool = fixed(&farm, OnDemand, 1)
        .with_options(|o| {
            o.max_jobs = Some(10);
            o.max_jobs_jitter = 3;
        })
        .seed(11)
        .build()
        .unwrap();
    let mut served = std::collections::BTreeMap::<usize, u64>::new();
    for _ in 0..400 {
        let id = pool.run(async |w: &mut Fake| w.id).await.unwrap();
        *served.entry(id).or_default() += 1;
        settle().await;
    }
    // Every worker but the last retired within 10 ± 3 jobs.
    let last = *served.keys().max().unwrap();
    let counts: Vec<u64> = served
        .iter()
        .filter(|(id, _)| **id != last)
        .map(|(_, n)| *n)
        .collect();
    assert!(counts.iter().all(|n| (7..=13).contains(n)), "{counts:?}");
    let mut distinct = counts.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(distinct.len() > 2, "spread: {counts:?}");
}

#[tokio::test(start_paused = true)]
async fn a_max_jobs_jitter_not_below_max_jobs_or_without_it_is_refused() {
    let farm = Farm::new();
    let err = fixed(&farm, OnDemand, 1)
        .with_options(|o| {
            o.max_jobs = Some(3);
            o.max_jobs_jitter = 3;
        })
        .build()
        .unwrap_err();
    assert_eq!(err.option, "max_jobs_jitter");
    let err = fixed(&farm, OnDemand, 1)
        .with_options(|o| o.max_jobs_jitter = 1)
        .build()
        .unwrap_err();
    assert_eq!(err.option, "max_jobs_jitter");
    let err = fixed(&farm, OnDemand, 1)
        .with_options(|o| o.max_jobs = Some(0))
        .build()
        .unwrap_err();
    assert_eq!(err.option, "max_jobs");
}

#[tokio::test(start_paused = true)]
async fn min_idle_keeps_spare_workers_ahead_of_demand() {
    let farm = Farm::with_warmup(secs(5));
    let pool = fixed(&farm, OnDemand, 4)
        .with_options(|o| o.min_idle = Some(2))
        .build()
        .unwrap();
    settle().await;
    assert_eq!(pool.stats().starting, 2, "two spares start at once");
    advance(secs(5)).await;
    assert_eq!(pool.stats().idle, 2);
    // A job takes one: another spare starts to keep two.
    let held = hold(&pool, 1).await;
    assert_eq!((pool.stats().idle, pool.stats().starting), (1, 1));
    advance(secs(5)).await;
    let more = hold(&pool, 2).await;
    // Four running slots: three lent, one spare (no room for a second).
    assert_eq!(pool.stats().lent, 3);
    assert_eq!(pool.stats().idle + pool.stats().starting, 1);
    drop((held, more));
    advance(secs(5)).await;
    assert_eq!(
        pool.stats().idle,
        4,
        "spares are idle workers like the others"
    );
    let actions = pool
        .reconfigure(Reconfig::new().with_options(move |o| o.min_idle = None))
        .unwrap();
    assert!(!actions.is_empty());
}

#[tokio::test(start_paused = true)]
async fn eviction_leaves_the_spares_that_min_idle_keeps() {
    let farm = Farm::new();
    let pool = fixed(&farm, OnDemand, 3)
        .eviction(IdleTimeout::new(secs(3)).unwrap())
        .with_options(|o| o.min_idle = Some(1))
        .build()
        .unwrap();
    let mut events = pool.events();
    settle().await;
    // Two more idle workers than the spare: they go after 3 s, the spare
    // stays (evicting it would only start another in its place).
    let held = hold(&pool, 3).await;
    drop(held);
    settle().await;
    advance(secs(30)).await;
    let all = drain(&mut events);
    assert_eq!(count(&all, "worker:evicted"), 2, "{all:?}");
    assert_eq!(pool.stats().idle, 1);
    assert_eq!(
        farm.made(),
        3,
        "no worker started to replace an evicted spare"
    );
}

#[tokio::test(start_paused = true)]
async fn min_idle_starts_a_spare_when_the_idle_spare_exits() {
    let farm = Farm::with_warmup(secs(1));
    let pool = fixed(&farm, OnDemand, 3)
        .with_options(|o| o.min_idle = Some(1))
        .build()
        .unwrap();
    settle().await;
    advance(secs(1)).await;
    assert_eq!(pool.stats().idle, 1, "one spare");
    // Past the early-exit window, so its slot does not back off.
    advance(secs(700)).await;
    farm.exit(0);
    settle().await;
    assert_eq!(pool.stats().starting, 1, "a new spare starts at once");
    advance(secs(5)).await;
    assert_eq!((pool.stats().idle, pool.stats().starting), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn min_idle_starts_a_spare_when_a_job_takes_the_one_that_was_starting() {
    let farm = Farm::with_warmup(secs(1));
    let pool = fixed(&farm, OnDemand, 3)
        .with_options(|o| o.min_idle = Some(1))
        .build()
        .unwrap();
    settle().await;
    assert_eq!(pool.stats().starting, 1, "the spare warms");
    let p = pool.clone();
    // The job holds the worker it gets (its lease is its task's output).
    let job = tokio::spawn(async move { p.lend().await });
    settle().await;
    advance(secs(1)).await;
    // The job got the spare when it was ready: another one starts.
    assert_eq!(pool.stats().lent, 1);
    assert_eq!((pool.stats().idle, pool.stats().starting), (0, 1));
    drop(job.await.unwrap().unwrap());
}

#[tokio::test(start_paused = true)]
async fn a_job_held_past_slow_job_is_said_once() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.slow_job = Some(secs(10)))
        .build()
        .unwrap();
    settle().await;
    let mut events = pool.events();
    let job = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.run(async |w: &mut Fake| w.work(secs(25)).await).await })
    };
    advance(secs(9)).await;
    assert_eq!(count(&drain(&mut events), "job:slow"), 0);
    advance(secs(2)).await;
    let got = drain(&mut events);
    assert!(
        matches!(
            &got[..],
            [Event::SlowJob { slot: 0, running_for, .. }] if *running_for == secs(10)
        ),
        "{got:?}"
    );
    advance(secs(20)).await;
    job.await.unwrap().unwrap();
    assert_eq!(count(&drain(&mut events), "job:slow"), 0, "once per job");
    // A quick job says nothing.
    pool.run(async |w: &mut Fake| w.work(ms(10)).await)
        .await
        .unwrap();
    advance(secs(30)).await;
    assert_eq!(count(&drain(&mut events), "job:slow"), 0);
}

#[tokio::test(start_paused = true)]
async fn workers_lists_one_row_per_slot_with_its_state_jobs_and_retirement() {
    use kennel::WorkerState;
    let farm = Farm::with_warmup(secs(2));
    let pool = fixed(&farm, OnDemand, 3)
        .with_options(|o| o.max_jobs = Some(5))
        .build()
        .unwrap();
    assert!(
        pool.workers().iter().all(|r| r.state == WorkerState::Empty),
        "{:?}",
        pool.workers()
    );
    let job = {
        let pool = pool.clone();
        tokio::spawn(async move { pool.run(async |w: &mut Fake| w.id).await })
    };
    settle().await;
    assert_eq!(pool.workers()[0].state, WorkerState::Starting);
    advance(secs(2)).await;
    job.await.unwrap().unwrap();
    let held = hold(&pool, 1).await;
    let rows = pool.workers();
    assert_eq!(rows.len(), 3);
    let row = &rows[0];
    assert_eq!(
        (row.slot, row.state, row.generation),
        (0, WorkerState::Lent, 1)
    );
    assert_eq!(row.ready_after, Some(secs(2)));
    assert_eq!(row.jobs, 1);
    let due = row.retire_due.expect("max_jobs is due");
    assert_eq!(
        (due.reason, due.jobs_left),
        (RetireReason::MaxJobs, Some(4))
    );
    assert!(row.running_for >= Some(secs(2)));
    assert_eq!(rows[1].state, WorkerState::Empty);
    drop(held);
    settle().await;
    assert_eq!(pool.workers()[0].state, WorkerState::Idle);
    assert_eq!(pool.workers()[0].jobs, 2);
}

#[tokio::test(start_paused = true)]
async fn a_worker_whose_memory_passed_max_memory_is_retired_when_its_job_returns() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.max_memory = Some(1_000))
        .build()
        .unwrap();
    settle().await;
    let mut events = pool.events();
    let lease = pool.lend().await.unwrap();
    farm.set_memory(0, 5_000);
    assert!(!farm.has_exited(0), "never cut short under its job");
    drop(lease);
    settle().await;
    assert!(farm.has_exited(0));
    assert_eq!(retired(&drain(&mut events)), [(0, RetireReason::MaxMemory)]);
    // It was retired younger than a second: replaced once it would have
    // been a second old.
    advance(secs(1)).await;
    assert_eq!(farm.made(), 2, "and replaced");
}

#[tokio::test(start_paused = true)]
async fn an_idle_worker_over_max_memory_is_retired_at_the_next_sample() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 2)
        .with_options(|o| {
            o.max_memory = Some(1_000);
            o.memory_check_every = secs(10);
        })
        .build()
        .unwrap();
    settle().await;
    farm.set_memory(1, 999);
    advance(secs(10)).await;
    settle().await;
    assert_eq!(pool.workers()[1].memory, Some(999));
    assert!(!farm.has_exited(1), "at the limit is not over it");
    farm.set_memory(1, 1_001);
    advance(secs(10)).await;
    settle().await;
    assert!(farm.has_exited(1), "retired at the sample");
    assert!(!farm.has_exited(0));
    assert_eq!(farm.made(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_slot_whose_worker_the_pools_own_limit_retired_young_rests_until_a_second_has_passed() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 1)
        .with_options(|o| o.max_jobs = Some(1))
        .build()
        .unwrap();
    settle().await;
    pool.run(async |w: &mut Fake| w.id).await.unwrap();
    settle().await;
    assert!(farm.has_exited(0), "retired after its one job");
    advance(ms(500)).await;
    assert_eq!(farm.made(), 1, "no restart within the second");
    advance(ms(600)).await;
    assert_eq!(farm.made(), 2, "replaced once a second has passed");
    assert_eq!(pool.stats().idle, 1);
    // Worker 1 serves its one job and is retired young too; a job that
    // needs the slot while it rests starts a worker at once.
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 1);
    settle().await;
    assert_eq!(pool.run(async |w: &mut Fake| w.id).await.unwrap(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_workers_row_says_what_it_said_of_itself_when_ready() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 2).build().unwrap();
    settle().await;
    let about: Vec<_> = pool.workers().into_iter().map(|r| r.about).collect();
    assert_eq!(
        about,
        [Some("{\"fake\":0}".into()), Some("{\"fake\":1}".into())]
    );
}

#[tokio::test(start_paused = true)]
async fn workers_whose_last_jobs_fall_due_together_each_find_a_warm_replacement_in_time() {
    // Two workers that started together serve jobs at the same pace and
    // reach their 50th job at the same moment; one room of surge warms one
    // replacement at a time, so the first must start a warm-up earlier
    // than it alone would need for the second to be warm in time too.
    let farm = Farm::with_warmup(secs(2));
    let pool = fixed(&farm, Parallel, 2)
        .with_options(|o| {
            o.max_jobs = Some(50);
            o.max_surge = 1;
        })
        .build()
        .unwrap();
    let mut events = pool.events();
    advance(secs(2)).await;
    for _ in 0..2 {
        let p = pool.clone();
        tokio::spawn(async move {
            while p
                .run(async |w: &mut Fake| w.work(ms(100)).await)
                .await
                .is_ok()
            {}
        });
    }
    // Through three rounds of recycles, checked at every step of 50 ms.
    for _ in 0..400 {
        advance(ms(50)).await;
        let s = pool.stats();
        assert!(s.idle + s.lent >= 2, "short during a recycle: {s:?}");
        assert!(farm.alive() <= 3, "more than capacity + max_surge alive");
    }
    let all = drain(&mut events);
    let by_jobs = retired(&all)
        .iter()
        .filter(|(_, r)| *r == RetireReason::MaxJobs)
        .count();
    assert!(by_jobs >= 6, "recycled: {by_jobs}");
    // Each retirement had its surge; the last may still be warming.
    let surges = count(&all, "worker:surging");
    assert!((by_jobs..=by_jobs + 1).contains(&surges), "{all:?}");
    assert_eq!(count(&all, "worker:respawned"), 0, "none retired first");
}

/// Moves the clock by `n` seconds, a second at a time (a warm-up under way
/// at a longer jump would seem to take all of it).
async fn step(n: u64) {
    for _ in 0..n {
        advance(secs(1)).await;
    }
}

/// The messages of the `pool:warning` events among `events`.
fn warnings(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Warning { message } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_warm_up_of_half_of_max_lifetime_or_more_is_said_once_until_the_lifetime_changes() {
    let farm = Farm::with_warmup(secs(2));
    let pool = fixed(&farm, Parallel, 2)
        .with_options(|o| o.max_lifetime = Some(secs(3)))
        .build()
        .unwrap();
    let mut events = pool.events();
    step(20).await;
    let said = warnings(&drain(&mut events));
    assert_eq!(said.len(), 1, "once, however many warm-ups: {said:?}");
    assert!(
        said[0].contains("warm-up") && said[0].contains("max_lifetime"),
        "{said:?}"
    );
    // Long enough now: not said again.
    pool.reconfigure(Reconfig::new().with_options(|o| o.max_lifetime = Some(secs(60))))
        .unwrap();
    step(200).await;
    assert_eq!(warnings(&drain(&mut events)), Vec::<String>::new());
    // Too short again: said again.
    pool.reconfigure(Reconfig::new().with_options(|o| o.max_lifetime = Some(secs(4))))
        .unwrap();
    step(20).await;
    assert_eq!(warnings(&drain(&mut events)).len(), 1);
}
