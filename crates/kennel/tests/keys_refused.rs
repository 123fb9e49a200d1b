//! A key that failed is not tried again at once (ADR 0062): its jobs that
//! no worker holding it can serve fail with the failure for 1 s, then 2,
//! 4 … 60 s after each failure in a row, and no worker lets go of a key or
//! is moved for it; a key kept warm whose worker failed to start is not
//! started ahead again, and a job of no key that waited for that start
//! waits for another. In-memory workers on the paused clock; loading
//! `"bad"` fails, and so does starting a worker for it.

#[path = "keyed/holder.rs"]
mod holder;

use std::time::Duration;

use holder::{Holder, LOAD, builder, job, key, loads, moved, new_log, settle, spawn_a_and_b};
use kennel::{Error, Event, KeyBinding, Pool};
use tokio::time::Instant;

/// `n` jobs of `"bad"` at once: what each got, and when.
async fn bad_jobs(pool: &Pool<Holder>, n: usize) -> Vec<(Result<usize, Error>, Duration)> {
    let start = Instant::now();
    let jobs: Vec<_> = (0..n)
        .map(|_| {
            let p = pool.clone();
            tokio::spawn(async move { (job(&p, "bad", Duration::ZERO).await, start.elapsed()) })
        })
        .collect();
    let mut out = Vec::new();
    for j in jobs {
        out.push(j.await.unwrap());
    }
    out
}

/// The message of a failed load of `"bad"`.
fn load_failed(result: &Result<usize, Error>) -> &str {
    match result {
        Err(Error::LoadFailed {
            key: k, message, ..
        }) if k.as_str() == "bad" => message,
        other => panic!("expected the load of bad to fail, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn the_jobs_of_a_key_whose_load_failed_fail_with_it_and_cost_one_key() {
    let (log, born) = new_log();
    let pool = builder(2, &log, &born).build().unwrap();
    job(&pool, "A", Duration::ZERO).await.unwrap();
    job(&pool, "B", Duration::ZERO).await.unwrap();
    tokio::time::advance(Duration::from_secs(5)).await;
    for (result, took) in bad_jobs(&pool, 4).await {
        assert!(load_failed(&result).starts_with("no such model: bad"));
        // They waited `max_key_wait` for a worker, then its one load.
        assert_eq!(took, Duration::from_millis(250) + LOAD);
    }
    let log = loads(&log);
    let unloads = log.iter().filter(|l| l.contains(" unload ")).count();
    assert_eq!(
        unloads, 1,
        "one key let go for the key that failed: {log:?}"
    );
    let held: Vec<_> = pool.workers().into_iter().flat_map(|w| w.keys).collect();
    assert_eq!(held.len(), 1, "{held:?}");
}

#[tokio::test(start_paused = true)]
async fn a_key_whose_load_failed_is_tried_again_after_one_second_then_two() {
    let (log, born) = new_log();
    let pool = builder(1, &log, &born).build().unwrap();
    let timed = async || {
        let start = Instant::now();
        let result = job(&pool, "bad", Duration::ZERO).await;
        (result, start.elapsed())
    };
    let (first, took) = timed().await;
    assert_eq!((load_failed(&first), took), ("no such model: bad", LOAD));
    let (refused, took) = timed().await;
    assert_eq!(took, Duration::ZERO, "failed at once, no load");
    assert_eq!(
        load_failed(&refused),
        "no such model: bad (the key's last try failed: it is tried again in 1.0 s)"
    );
    tokio::time::advance(Duration::from_secs(1)).await;
    let (second, took) = timed().await;
    assert_eq!((load_failed(&second), took), ("no such model: bad", LOAD));
    tokio::time::advance(Duration::from_millis(1500)).await;
    let (refused, took) = timed().await;
    assert_eq!(took, Duration::ZERO);
    assert!(
        load_failed(&refused)
            .contains("(the key's last 2 tries failed: it is tried again in 0.5 s)")
    );
    tokio::time::advance(Duration::from_millis(500)).await;
    assert_eq!(timed().await.1, LOAD, "tried again");
    // Other keys load as before.
    assert_eq!(job(&pool, "A", Duration::ZERO).await.unwrap(), 0);
    assert_eq!(loads(&log), ["0 load A"]);
}

#[tokio::test(start_paused = true)]
async fn with_spawn_the_jobs_of_a_key_whose_worker_failed_to_start_move_one_worker() {
    let (log, born) = new_log();
    let (pool, mut events) = spawn_a_and_b(&log, &born).await;
    let failed = |result: &Result<usize, Error>| match result {
        Err(e @ Error::WarmupFailed { message, .. }) => {
            assert_eq!(e.kind(), "warmup-failed");
            message.clone()
        }
        other => panic!("expected the start for bad to fail, got {other:?}"),
    };
    for (result, _) in bad_jobs(&pool, 3).await {
        assert!(failed(&result).contains("no such model: bad"), "{result:?}");
    }
    let start = Instant::now();
    let refused = job(&pool, "bad", Duration::ZERO).await;
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert!(
        failed(&refused).contains("it is tried again in"),
        "{refused:?}"
    );
    assert_eq!(
        moved(&mut events),
        1,
        "one worker moved for the key that failed"
    );
    let held: Vec<_> = pool.workers().into_iter().flat_map(|w| w.keys).collect();
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(
        (born.lock().unwrap().iter())
            .filter(|b| b.as_ref().is_some_and(|k| k == &key("bad")))
            .count(),
        0,
        "no worker for bad was made"
    );
}

#[tokio::test(start_paused = true)]
async fn with_spawn_a_key_kept_warm_whose_worker_failed_to_start_is_not_started_ahead_again() {
    let (log, born) = new_log();
    let pool = builder(1, &log, &born)
        .with_options(|o| {
            o.key_binding = KeyBinding::Spawn;
            o.min_workers_per_key = [(key("bad"), 1)].into();
        })
        .build()
        .unwrap();
    let mut events = pool.events();
    for _ in 0..120 {
        tokio::time::advance(Duration::from_secs(1)).await;
        settle().await;
    }
    let mut warnings = Vec::new();
    let mut failed = 0;
    while let Ok(e) = events.try_recv() {
        match e {
            Event::Warning { message } => warnings.push(message),
            Event::WarmupFailed { .. } => failed += 1,
            _ => {}
        }
    }
    assert_eq!(failed, 1, "one start for bad, not one per back-off");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("key \"bad\" of min_workers_per_key was not loaded ahead"),
        "{warnings:?}"
    );
    // The slot serves other jobs, with a worker started for no key.
    assert_eq!(pool.run(async |w: &mut Holder| w.id).await.unwrap(), 0);
    assert_eq!(*born.lock().unwrap(), [None]);
}

#[tokio::test(start_paused = true)]
async fn a_job_of_no_key_that_waited_for_a_start_for_a_key_that_failed_waits_for_another() {
    let (log, born) = new_log();
    let signals = holder::Signals::default();
    let pool = holder::builder_warming(1, &log, &born, &signals, Duration::from_secs(1))
        .with_options(|o| {
            o.key_binding = KeyBinding::Spawn;
            o.min_workers_per_key = [(key("bad"), 1)].into();
        })
        .build()
        .unwrap();
    settle().await;
    // The only slot is starting for `bad`, which fails after its warm-up.
    let got = pool.run(async |w: &mut Holder| w.born_for.clone()).await;
    assert_eq!(got.unwrap(), None, "served by a worker started for no key");
}
