//! Keyed jobs (ADR 0062): a job of a key goes to a worker that holds it;
//! workers load keys (`load`) or are started for one (`spawn`); the keyed
//! lending order, its starvation bound, hot keys, LRU unloads. In-memory
//! workers on the paused clock (real processes are in kennel-process's
//! tests).

#[path = "keyed/holder.rs"]
mod holder;

use std::collections::BTreeSet;
use std::time::Duration;

use holder::{Holder, LOAD, builder, job, key, loads, moved, new_log, settle};
use kennel::{Error, Event, KeyBinding, Pool, Reconfig};
use tokio::time::Instant;

/// A pool of 2 whose worker 0 holds A and worker 1 holds B, each used once.
async fn a_and_b() -> (Pool<Holder>, holder::Log) {
    let (log, born) = new_log();
    let pool = builder(2, &log, &born).build().unwrap();
    job(&pool, "A", Duration::ZERO).await.unwrap();
    job(&pool, "B", Duration::ZERO).await.unwrap();
    (pool, log)
}

#[tokio::test(start_paused = true)]
async fn a_job_goes_to_the_worker_that_holds_its_key() {
    let (log, born) = new_log();
    let pool = builder(2, &log, &born).build().unwrap();
    assert_eq!(job(&pool, "A", Duration::ZERO).await.unwrap(), 0);
    // Worker 1 has room for a key: B loads there, not over A.
    assert_eq!(job(&pool, "B", Duration::ZERO).await.unwrap(), 1);
    for _ in 0..10 {
        assert_eq!(job(&pool, "A", Duration::from_millis(5)).await.unwrap(), 0);
        assert_eq!(job(&pool, "B", Duration::from_millis(5)).await.unwrap(), 1);
    }
    assert_eq!(loads(&log), ["0 load A", "1 load B"]);
    let rows = pool.workers();
    assert_eq!(rows[0].keys, [key("A")]);
    assert_eq!(rows[1].keys, [key("B")]);
}

#[tokio::test(start_paused = true)]
async fn a_job_waits_for_its_keys_busy_worker_rather_than_loading_it_elsewhere() {
    let (pool, log) = a_and_b().await;
    tokio::time::advance(Duration::from_secs(5)).await;
    // Worker 0 is busy with A for 100 ms; worker 1 (B, cold) is idle. A
    // second job of A clears in 100 ms behind it, a load takes 1 s.
    let p = pool.clone();
    let long = tokio::spawn(async move { job(&p, "A", Duration::from_millis(100)).await });
    settle().await;
    let start = Instant::now();
    assert_eq!(job(&pool, "A", Duration::from_millis(10)).await.unwrap(), 0);
    assert_eq!(start.elapsed(), Duration::from_millis(110));
    assert_eq!(long.await.unwrap().unwrap(), 0);
    assert_eq!(
        loads(&log),
        ["0 load A", "1 load B"],
        "nothing loaded again"
    );
}

#[tokio::test(start_paused = true)]
async fn no_job_waits_beyond_max_key_wait_and_one_load() {
    let (pool, log) = a_and_b().await;
    // Jobs of A and B keep both workers busy (40 ms each, back to back).
    let mut loops = Vec::new();
    for k in ["A", "B", "A", "B"] {
        let p = pool.clone();
        loops.push(tokio::spawn(async move {
            for _ in 0..200 {
                job(&p, k, Duration::from_millis(40)).await.unwrap();
            }
        }));
    }
    settle().await;
    let start = Instant::now();
    let worker = job(&pool, "C", Duration::ZERO).await.unwrap();
    let waited = start.elapsed();
    let bound = Duration::from_millis(250) + LOAD + Duration::from_millis(40);
    assert!(waited <= bound, "C waited {waited:?}, over {bound:?}");
    assert!(
        waited >= Duration::from_millis(250) + LOAD,
        "C took a warm worker before it had waited max_key_wait ({waited:?})"
    );
    assert!(loads(&log).contains(&format!("{worker} load C")));
    for l in loops {
        l.await.unwrap();
    }
}

/// Worker 0 holds A, used `a_jobs` times more and just now; worker 1
/// holds B, used `b_jobs` times more, and runs a job of a minute. A job of
/// C comes: how long it waited for its worker (worker 0, A unloaded) and
/// its load.
async fn c_after_b_busy_for_a_minute(a_jobs: usize, b_jobs: usize) -> Duration {
    let (pool, _) = a_and_b().await;
    for _ in 0..b_jobs {
        job(&pool, "B", Duration::from_millis(10)).await.unwrap();
    }
    for _ in 0..a_jobs {
        job(&pool, "A", Duration::from_millis(10)).await.unwrap();
    }
    let p = pool.clone();
    let long = tokio::spawn(async move { job(&p, "B", Duration::from_secs(60)).await });
    settle().await;
    let start = Instant::now();
    assert_eq!(job(&pool, "C", Duration::ZERO).await.unwrap(), 0);
    let waited = start.elapsed();
    assert_eq!(long.await.unwrap().unwrap(), 1);
    waited
}

#[tokio::test(start_paused = true)]
async fn an_overdue_job_waits_for_a_busy_worker_at_most_twice_max_key_wait() {
    // C: B is used least, but its worker is busy; A is used twenty times
    // as much, too much to take at once. After 2 × 250 ms, the job in hand
    // having run 250 ms, C takes the idle worker 0 (A goes) rather than
    // wait out the minute.
    let waited = c_after_b_busy_for_a_minute(20, 0).await;
    assert_eq!(waited, Duration::from_millis(500) + LOAD);
}

#[tokio::test(start_paused = true)]
async fn an_overdue_job_takes_an_idle_worker_at_once_whose_keys_are_used_about_as_little() {
    // A is used a few times more than B (within five times and one job):
    // at 250 ms C takes A's idle worker rather than wait for B's.
    let waited = c_after_b_busy_for_a_minute(5, 0).await;
    assert_eq!(waited, Duration::from_millis(250) + LOAD);
}

#[tokio::test(start_paused = true)]
async fn an_overdue_job_takes_no_idle_worker_at_once_whose_keys_are_used_many_jobs_more() {
    // B has had 11 jobs. A, with 21, is taken at once (within five times
    // and 16 jobs more); with 31 (within five times, but 20 jobs more), it
    // is in steady use: C waits for B's worker, and takes A's only at twice
    // max_key_wait, B's job in hand running on.
    let waited = c_after_b_busy_for_a_minute(20, 10).await;
    assert_eq!(waited, Duration::from_millis(250) + LOAD);
    let waited = c_after_b_busy_for_a_minute(30, 10).await;
    assert_eq!(waited, Duration::from_millis(500) + LOAD);
}

#[tokio::test(start_paused = true)]
async fn a_key_that_no_worker_holds_waits_max_key_wait_and_its_jobs_share_one_load() {
    let (pool, log) = a_and_b().await;
    tokio::time::advance(Duration::from_millis(300)).await;
    job(&pool, "B", Duration::ZERO).await.unwrap();
    // A went unused for 300 ms (cold), B was just used (warm). No worker
    // holds C: its first job waits 250 ms before A goes, and a second job
    // of C that comes meanwhile shares the load.
    let start = Instant::now();
    let p = pool.clone();
    let first = tokio::spawn(async move { job(&p, "C", Duration::ZERO).await });
    settle().await;
    tokio::time::advance(Duration::from_millis(100)).await;
    assert_eq!(job(&pool, "C", Duration::ZERO).await.unwrap(), 0);
    assert_eq!(first.await.unwrap().unwrap(), 0);
    assert_eq!(start.elapsed(), Duration::from_millis(250) + LOAD);
    assert_eq!(loads(&log)[2..], ["0 unload A", "0 load C"]);
}

#[tokio::test(start_paused = true)]
async fn an_overdue_job_claims_the_worker_that_just_loaded_rather_than_a_key_in_steady_use() {
    let (pool, log) = a_and_b().await;
    for _ in 0..20 {
        job(&pool, "A", Duration::from_millis(10)).await.unwrap();
    }
    tokio::time::advance(Duration::from_millis(300)).await;
    // C takes B's worker at 250 ms and loads until 1,250 ms.
    let t0 = Instant::now();
    let p = pool.clone();
    let c = tokio::spawn(async move { job(&p, "C", Duration::ZERO).await });
    settle().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A job of B, overdue while C loads, claims C's worker, not A's idle
    // one (A is used twenty times as much): it waits out the load and the
    // 250 ms in which C serves its own jobs first.
    let p = pool.clone();
    let b = tokio::spawn(async move {
        let at = Instant::now();
        (job(&p, "B", Duration::ZERO).await.unwrap(), at.elapsed())
    });
    settle().await;
    assert_eq!(c.await.unwrap().unwrap(), 1);
    assert_eq!(t0.elapsed(), Duration::from_millis(250) + LOAD);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let at = Instant::now();
    assert_eq!(job(&pool, "C", Duration::from_millis(50)).await.unwrap(), 1);
    assert_eq!(
        at.elapsed(),
        Duration::from_millis(50),
        "C's worker serves C"
    );
    let (worker, waited) = b.await.unwrap();
    assert_eq!(worker, 1);
    // It came at 300 ms; C was ready at 1,250 ms and served C until 1,500.
    assert_eq!(waited, Duration::from_millis(1200) + LOAD);
    assert_eq!(
        loads(&log),
        [
            "0 load A",
            "1 load B",
            "1 unload B",
            "1 load C",
            "1 unload C",
            "1 load B"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_full_worker_unloads_the_key_it_used_least() {
    let (log, born) = new_log();
    let pool = builder(1, &log, &born)
        .with_options(|o| o.keys_per_worker = 2)
        .build()
        .unwrap();
    job(&pool, "A", Duration::ZERO).await.unwrap();
    job(&pool, "B", Duration::ZERO).await.unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    job(&pool, "A", Duration::ZERO).await.unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    job(&pool, "C", Duration::ZERO).await.unwrap();
    assert_eq!(
        loads(&log),
        ["0 load A", "0 load B", "0 unload B", "0 load C"]
    );
    assert_eq!(pool.workers()[0].keys, [key("A"), key("C")]);
}

#[tokio::test(start_paused = true)]
async fn a_failed_load_fails_its_job_and_the_worker_keeps_its_other_keys() {
    let (log, born) = new_log();
    let pool = builder(1, &log, &born)
        .with_options(|o| o.keys_per_worker = 2)
        .build()
        .unwrap();
    let mut events = pool.events();
    job(&pool, "A", Duration::ZERO).await.unwrap();
    match job(&pool, "bad", Duration::ZERO).await {
        Err(Error::LoadFailed {
            slot,
            key: k,
            message,
        }) => {
            assert_eq!((slot, k.as_str()), (0, "bad"));
            assert_eq!(message, "no such model: bad");
        }
        other => panic!("expected LoadFailed, got {other:?}"),
    }
    assert_eq!(pool.workers()[0].keys, [key("A")]);
    job(&pool, "A", Duration::ZERO).await.unwrap();
    assert_eq!(loads(&log), ["0 load A"], "A was not loaded again");
    let mut loaded = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let Event::Loaded { slot, key, took } = e {
            loaded.push((slot, key.to_string(), took));
        }
    }
    assert_eq!(loaded, [(0, "A".to_owned(), LOAD)]);
}

#[tokio::test(start_paused = true)]
async fn a_spawn_bound_worker_is_retired_and_one_started_for_the_new_key() {
    let (log, born) = new_log();
    let pool = builder(1, &log, &born)
        .with_options(|o| o.key_binding = KeyBinding::Spawn)
        .build()
        .unwrap();
    let mut events = pool.events();
    settle().await;
    assert_eq!(job(&pool, "A", Duration::ZERO).await.unwrap(), 1);
    assert_eq!(job(&pool, "A", Duration::ZERO).await.unwrap(), 1);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(job(&pool, "B", Duration::ZERO).await.unwrap(), 2);
    assert_eq!(
        *born.lock().unwrap(),
        [None, Some(key("A")), Some(key("B"))]
    );
    assert!(loads(&log).is_empty(), "a spawn-bound worker loads nothing");
    assert_eq!(moved(&mut events), 2, "the keyless worker, then A's");
    assert_eq!(pool.workers()[0].keys, [key("B")]);
}

/// Worker 0 holds A and is busy; jobs of A queue. Sets the mean job time
/// to 100 ms first.
async fn hot_a(pool: &Pool<Holder>) -> Vec<tokio::task::JoinHandle<usize>> {
    job(pool, "A", Duration::ZERO).await.unwrap();
    job(pool, "B", Duration::ZERO).await.unwrap();
    for _ in 0..5 {
        job(pool, "A", Duration::from_millis(100)).await.unwrap();
    }
    tokio::time::advance(Duration::from_secs(1)).await;
    let mut jobs = Vec::new();
    for _ in 0..6 {
        let p = pool.clone();
        jobs.push(tokio::spawn(async move {
            job(&p, "A", Duration::from_millis(100)).await.unwrap()
        }));
        settle().await;
    }
    jobs
}

#[tokio::test(start_paused = true)]
async fn a_hot_key_gets_a_second_worker() {
    let (log, born) = new_log();
    let pool = builder(2, &log, &born).build().unwrap();
    let jobs = hot_a(&pool).await;
    let mut on = BTreeSet::new();
    for j in jobs {
        on.insert(j.await.unwrap());
    }
    assert_eq!(on, BTreeSet::from([0, 1]), "A ran on both workers");
    assert!(loads(&log).contains(&"1 load A".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn max_workers_per_key_caps_a_hot_key() {
    let (log, born) = new_log();
    let pool = builder(2, &log, &born)
        .with_options(|o| o.max_workers_per_key = Some(1))
        .build()
        .unwrap();
    let jobs = hot_a(&pool).await;
    for j in jobs {
        assert_eq!(j.await.unwrap(), 0);
    }
    assert_eq!(loads(&log), ["0 load A", "1 load B"]);
}

#[tokio::test(start_paused = true)]
async fn a_job_without_a_key_takes_any_idle_worker() {
    let (pool, log) = a_and_b().await;
    let p = pool.clone();
    let busy = tokio::spawn(async move { job(&p, "A", Duration::from_millis(50)).await });
    settle().await;
    let id = pool.run(async |w: &mut Holder| w.id).await.unwrap();
    assert_eq!(id, 1, "the idle worker, which holds B");
    busy.await.unwrap().unwrap();
    assert_eq!(
        pool.workers()[1].keys,
        [key("B")],
        "its keys are as they were"
    );
    assert_eq!(loads(&log), ["0 load A", "1 load B"]);
}

#[tokio::test(start_paused = true)]
async fn key_options_change_on_a_live_pool() {
    let (log, born) = new_log();
    let pool = builder(1, &log, &born).build().unwrap();
    job(&pool, "A", Duration::ZERO).await.unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    job(&pool, "B", Duration::ZERO).await.unwrap();
    assert_eq!(loads(&log), ["0 load A", "0 unload A", "0 load B"]);
    pool.reconfigure(Reconfig::new().with_options(|o| o.keys_per_worker = 2))
        .unwrap();
    job(&pool, "C", Duration::ZERO).await.unwrap();
    assert_eq!(
        loads(&log)[3..],
        ["0 load C"],
        "room for a second key: nothing unloaded"
    );
    let refused = pool.reconfigure(Reconfig::new().with_options(|o| o.keys_per_worker = 0));
    assert!(matches!(refused, Err(Error::Config(e)) if e.option == "keys_per_worker"));
}

#[tokio::test(start_paused = true)]
async fn a_job_waiting_when_max_key_wait_changes_claims_a_worker_after_the_new_wait() {
    let (log, born) = new_log();
    let pool = builder(1, &log, &born).build().unwrap();
    job(&pool, "A", Duration::ZERO).await.unwrap();
    let p = pool.clone();
    let busy = tokio::spawn(async move { job(&p, "A", Duration::from_millis(500)).await });
    settle().await;
    let p = pool.clone();
    let b = tokio::spawn(async move { job(&p, "B", Duration::ZERO).await });
    settle().await;
    let start = Instant::now();
    // Longer while B waits: the worker is free at 500 ms, before B has
    // waited 1 s; B takes it at 1 s, and is not forgotten after its old
    // wait of 250 ms.
    pool.reconfigure(Reconfig::new().with_options(|o| o.max_key_wait = Duration::from_secs(1)))
        .unwrap();
    busy.await.unwrap().unwrap();
    tokio::time::timeout(Duration::from_secs(60), b)
        .await
        .expect("B got a worker")
        .unwrap()
        .unwrap();
    // Its 1 s wait, then its 1 s load.
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    assert_eq!(loads(&log), ["0 load A", "0 unload A", "0 load B"]);
}
