//! `stats()`, one consistent snapshot of the pool's counts, and the
//! health rule.
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kennel::{Error, IdleTimeout, OnDemand, Parallel, Pool, Stats};
use support::{
    Fake, Farm, Steer, advance, fixed, ms, on_demand, parallel, secs, settle, spawn_lend_slot,
    spawn_run_id, within,
};

/// (starting, idle, lent, waiting, kept)
fn counts(s: Stats) -> (usize, usize, usize, usize, usize) {
    (s.starting, s.idle, s.lent, s.waiting, s.kept)
}

#[tokio::test(start_paused = true)]
async fn starting_counts_workers_during_their_warm_up() {
    let farm = Farm::with_warmup(secs(5));
    let pool = parallel(&farm, 3);
    settle().await;
    assert_eq!(counts(pool.stats()), (3, 0, 0, 0, 0));
    advance(secs(5) - ms(1)).await;
    assert_eq!(counts(pool.stats()), (3, 0, 0, 0, 0));
    advance(ms(1)).await;
    assert_eq!(counts(pool.stats()), (0, 3, 0, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn idle_and_lent_count_ready_workers_by_whether_a_job_has_them() {
    let farm = Farm::new();
    let pool = parallel(&farm, 3);
    settle().await;
    assert_eq!(counts(pool.stats()), (0, 3, 0, 0, 0));
    let a = pool.lend().await.unwrap();
    let b = pool.lend().await.unwrap();
    assert_eq!(counts(pool.stats()), (0, 1, 2, 0, 0));
    drop(a);
    assert_eq!(counts(pool.stats()), (0, 2, 1, 0, 0));
    drop(b);
    assert_eq!(counts(pool.stats()), (0, 3, 0, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn waiting_counts_jobs_that_wait_for_a_starting_worker() {
    let farm = Farm::with_warmup(secs(2));
    let pool = on_demand(&farm, 2);
    let mut jobs = Vec::new();
    for _ in 0..2 {
        let p = pool.clone();
        jobs.push(tokio::spawn(async move {
            p.run(async |w: &mut Fake| w.work(secs(10)).await).await
        }));
    }
    settle().await;
    assert_eq!(counts(pool.stats()), (2, 0, 0, 2, 0));
    advance(secs(2)).await;
    assert_eq!(counts(pool.stats()), (0, 0, 2, 0, 0));
    for j in jobs {
        j.abort();
    }
}

#[tokio::test(start_paused = true)]
async fn waiting_counts_jobs_queued_while_every_worker_is_lent() {
    let farm = Farm::new();
    let pool = parallel(&farm, 2);
    settle().await;
    let a = pool.lend().await.unwrap();
    let b = pool.lend().await.unwrap();
    let mut jobs = Vec::new();
    for n in 1..=3 {
        let p = pool.clone();
        jobs.push(tokio::spawn(async move {
            p.run(async |w: &mut Fake| w.work(ms(10)).await).await
        }));
        settle().await;
        assert_eq!(counts(pool.stats()), (0, 0, 2, n, 0));
    }
    drop(a);
    settle().await;
    assert_eq!(counts(pool.stats()), (0, 0, 2, 2, 0));
    drop(b);
    for j in jobs {
        within(secs(3600), j).await.unwrap().unwrap();
    }
    assert_eq!(counts(pool.stats()), (0, 2, 0, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_job_dropped_while_waiting_leaves_the_count() {
    let farm = Farm::new();
    let pool = parallel(&farm, 1);
    settle().await;
    let held = pool.lend().await.unwrap();
    let job = spawn_lend_slot(&pool);
    settle().await;
    assert_eq!(pool.stats().waiting, 1);
    job.abort();
    settle().await;
    assert_eq!(pool.stats().waiting, 0);
    drop(held);
    assert_eq!(counts(pool.stats()), (0, 1, 0, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn capacity_and_size_come_from_the_sizing() {
    let farm = Farm::new();
    let fixed = on_demand(&farm, 3).stats();
    assert_eq!((fixed.capacity, fixed.size), (3, 3));

    let steered = Pool::builder(farm.factory())
        .sizing(Steer::new(5, 2))
        .build()
        .unwrap()
        .stats();
    assert_eq!((steered.capacity, steered.size), (5, 2));
    assert_eq!(farm.made(), 0, "on demand: nothing started");
}

#[tokio::test(start_paused = true)]
async fn kept_counts_idle_workers_in_slots_the_sizing_does_not_run() {
    let farm = Farm::new();
    let steer = Steer::new(3, 3);
    let pool = Pool::builder(farm.factory())
        .startup(Parallel)
        .sizing(steer.clone())
        .build()
        .unwrap();
    settle().await;
    let lease = pool.lend().await.unwrap();
    let lease2 = pool.lend().await.unwrap();
    assert_eq!(lease2.slot(), 1);

    steer.set_size(1);
    advance(Steer::TICK).await;
    let s = pool.stats();
    assert_eq!((s.size, s.capacity), (1, 3));
    // Slot 2 idle out of the running slots: kept. Slot 1 is still lent.
    assert_eq!(counts(s), (0, 0, 2, 0, 1));
    drop(lease2);
    assert_eq!(
        counts(pool.stats()),
        (0, 0, 1, 0, 2),
        "back from a job: kept"
    );
    drop(lease);
    assert_eq!(counts(pool.stats()), (0, 1, 0, 0, 2));

    steer.set_size(3);
    advance(Steer::TICK).await;
    let s = pool.stats();
    assert_eq!(s.size, 3);
    assert_eq!(counts(s), (0, 3, 0, 0, 0), "running again: idle");
    assert_eq!(farm.made(), 3, "kept workers were reused, none started");
}

#[tokio::test(start_paused = true)]
async fn an_exited_worker_is_in_no_count() {
    let farm = Farm::new();
    let pool = on_demand(&farm, 3);
    let leases = [
        pool.lend().await.unwrap(),
        pool.lend().await.unwrap(),
        pool.lend().await.unwrap(),
    ];
    drop(leases);
    assert_eq!(counts(pool.stats()), (0, 3, 0, 0, 0));
    farm.exit(1);
    settle().await;
    assert_eq!(counts(pool.stats()), (0, 2, 0, 0, 0));
    farm.exit(0);
    farm.exit(2);
    settle().await;
    assert_eq!(counts(pool.stats()), (0, 0, 0, 0, 0));
    assert!(pool.stats().is_healthy());
}

#[tokio::test(start_paused = true)]
async fn a_pool_whose_workers_were_evicted_shows_zeros_and_is_healthy() {
    let farm = Farm::new();
    let pool = fixed(&farm, Parallel, 3)
        .eviction(IdleTimeout::new(secs(1)).unwrap())
        .build()
        .unwrap();
    settle().await;
    assert_eq!(counts(pool.stats()), (0, 3, 0, 0, 0));
    advance(secs(1)).await;
    assert_eq!(farm.alive(), 0);
    let s = pool.stats();
    assert_eq!(counts(s), (0, 0, 0, 0, 0));
    assert_eq!((s.capacity, s.size), (3, 3));
    assert!(s.is_healthy());
}

#[test]
fn healthy_means_no_job_waits_or_some_worker_starts_is_idle_or_is_lent() {
    let stats = |starting, idle, lent, waiting, kept| {
        let mut s = Stats::default();
        s.starting = starting;
        s.idle = idle;
        s.lent = lent;
        s.waiting = waiting;
        s.kept = kept;
        s.capacity = 4;
        s.size = 4;
        s
    };
    assert!(stats(0, 0, 0, 0, 0).is_healthy(), "all zeros is healthy");
    assert!(stats(0, 0, 0, 0, 3).is_healthy());
    assert!(stats(1, 0, 0, 5, 0).is_healthy());
    assert!(stats(0, 1, 0, 5, 0).is_healthy());
    assert!(stats(0, 0, 1, 5, 0).is_healthy());
    assert!(
        !stats(0, 0, 0, 1, 0).is_healthy(),
        "a job waits for nothing"
    );
    assert!(
        !stats(0, 0, 0, 7, 2).is_healthy(),
        "kept workers take no jobs"
    );
}

#[tokio::test(start_paused = true)]
async fn a_job_waiting_while_no_worker_may_start_is_unhealthy() {
    let farm = Farm::new();
    let steer = Steer::new(2, 2);
    steer.refuse_starts(true);
    let pool = Pool::builder(farm.factory())
        .sizing(steer.clone())
        .build()
        .unwrap();
    assert!(pool.stats().is_healthy());

    let job = spawn_run_id(&pool);
    advance(secs(60)).await;
    let s = pool.stats();
    assert_eq!(counts(s), (0, 0, 0, 1, 0));
    assert!(!s.is_healthy(), "{s:?}");
    assert_eq!(farm.made(), 0);

    within(secs(3600), pool.close()).await;
    let r = within(secs(3600), job).await.unwrap();
    assert!(matches!(r, Err(Error::Closed)), "{r:?}");
    assert!(pool.stats().is_healthy());
}

#[tokio::test(start_paused = true)]
async fn a_pool_whose_factory_fails_never_leaves_a_job_waiting_for_nothing() {
    let farm = Farm::new();
    farm.fail_factory(3);
    let pool = on_demand(&farm, 1);
    let mut jobs = Vec::new();
    for _ in 0..4 {
        let p = pool.clone();
        jobs.push(tokio::spawn(async move {
            p.run(async |w: &mut Fake| w.id).await
        }));
    }
    // Look after every single step of the pool's tasks.
    for _ in 0..200 {
        let s = pool.stats();
        assert!(s.is_healthy(), "{s:?}");
        tokio::task::yield_now().await;
    }
    let mut failed = 0;
    for j in jobs {
        match within(secs(3600), j).await.unwrap() {
            Err(Error::WarmupFailed { .. }) => failed += 1,
            r => assert_eq!(r.unwrap(), 0),
        }
    }
    assert_eq!(failed, 3, "one job per failed start");
}

/// Many jobs in waves, with warm-ups, evictions and a queue: at every
/// sampled moment the counts agree with each other and with the farm.
#[tokio::test(start_paused = true)]
async fn one_read_is_consistent_in_a_busy_run() {
    const CAPACITY: usize = 6;
    let farm = Farm::with_warmup(ms(250));
    let pool = fixed(&farm, OnDemand, CAPACITY)
        .eviction(IdleTimeout::new(ms(300)).unwrap())
        .with_options(|o| o.max_waiting = Some(10_000))
        .build()
        .unwrap();
    let granted = Arc::new(AtomicUsize::new(0));
    let running = Arc::new(AtomicUsize::new(0));
    let mut submitted = 0;
    let mut jobs = Vec::new();
    let mut seen = Stats::default();
    for tick in 0..1000u64 {
        let burst = match tick % 200 {
            0 => 25,
            20..=29 => 2,
            50 => 1,
            _ => 0,
        };
        for _ in 0..burst {
            let took = ms(10 + (submitted as u64 * 37) % 200);
            submitted += 1;
            let (p, granted, running) = (pool.clone(), granted.clone(), running.clone());
            jobs.push(tokio::spawn(async move {
                p.run(async |w: &mut Fake| {
                    granted.fetch_add(1, Ordering::SeqCst);
                    running.fetch_add(1, Ordering::SeqCst);
                    w.work(took).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                })
                .await
            }));
        }
        advance(ms(10)).await;

        let s = pool.stats();
        let alive = s.starting + s.idle + s.lent + s.kept;
        assert_eq!(alive, farm.alive(), "tick {tick}: {s:?}");
        assert!(alive <= s.capacity, "tick {tick}: {s:?}");
        assert_eq!(s.lent, running.load(Ordering::SeqCst), "tick {tick}: {s:?}");
        assert_eq!(
            s.waiting,
            submitted - granted.load(Ordering::SeqCst),
            "tick {tick}: {s:?}"
        );
        assert_eq!((s.capacity, s.size, s.kept), (CAPACITY, CAPACITY, 0));
        assert!(s.is_healthy(), "tick {tick}: {s:?}");
        seen.starting = seen.starting.max(s.starting);
        seen.idle = seen.idle.max(s.idle);
        seen.lent = seen.lent.max(s.lent);
        seen.waiting = seen.waiting.max(s.waiting);
    }
    for j in jobs {
        within(secs(3600), j).await.unwrap().unwrap();
    }
    // The run went through every state, and workers were evicted and made again.
    assert!(
        seen.starting > 0 && seen.idle > 0 && seen.waiting > 0,
        "{seen:?}"
    );
    assert_eq!(seen.lent, CAPACITY);
    assert!(farm.made() > CAPACITY, "made {}", farm.made());
    assert_eq!(granted.load(Ordering::SeqCst), submitted);
}
