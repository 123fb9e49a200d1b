//! Keyed workers the pool renews. One started for a key (`key_binding =
//! "spawn"`) that the pool renews (its `max_lifetime`, its `max_jobs`: the
//! retirements a warm replacement covers) is started again for its key,
//! warm first or not; one that crashed is not. Jobs of a key that come
//! together move one worker to it, not one each. A load as long as half of
//! `max_lifetime` is said. In-memory workers on the paused clock, an eager
//! startup.

#[path = "keyed/holder.rs"]
mod holder;

use std::time::Duration;

use holder::{Signals, builder_with, job, moved, new_log, settle, spawn_a_and_b};
use kennel::{Event, ExitStatus, Key, KeyBinding, RetireReason};

/// The keys the workers were started for, in order (`None`: for none).
fn born(born: &std::sync::Mutex<Vec<Option<Key>>>) -> Vec<Option<String>> {
    born.lock()
        .unwrap()
        .iter()
        .map(|k| k.as_ref().map(|k| k.to_string()))
        .collect()
}

fn some(k: &str) -> Option<String> {
    Some(k.to_owned())
}

#[tokio::test(start_paused = true)]
async fn with_spawn_a_worker_retired_at_its_lifetime_is_started_again_for_its_key() {
    let (log, started) = new_log();
    let pool = builder_with(1, &log, &started, &Signals::default())
        .with_options(|o| {
            o.key_binding = KeyBinding::Spawn;
            o.max_lifetime = Some(Duration::from_secs(60));
        })
        .build()
        .unwrap();
    let mut events = pool.events();
    settle().await;
    let a = job(&pool, "A", Duration::ZERO).await.unwrap();
    assert_eq!(born(&started), [None, some("A")]);
    tokio::time::advance(Duration::from_secs(61)).await;
    settle().await;
    let mut retired = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let Event::Retired { reason, .. } = e {
            retired.push(reason);
        }
    }
    assert!(retired.contains(&RetireReason::Lifetime), "{retired:?}");
    assert_eq!(born(&started), [None, some("A"), some("A")]);
    // The next job of A finds its new worker ready: no wait, no move.
    let start = tokio::time::Instant::now();
    assert_ne!(job(&pool, "A", Duration::ZERO).await.unwrap(), a);
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(born(&started).len(), 3);
}

#[tokio::test(start_paused = true)]
async fn with_spawn_a_worker_that_served_its_max_jobs_is_started_again_for_its_key() {
    let (log, started) = new_log();
    let pool = builder_with(1, &log, &started, &Signals::default())
        .with_options(|o| {
            o.key_binding = KeyBinding::Spawn;
            o.max_jobs = Some(2);
        })
        .build()
        .unwrap();
    settle().await;
    job(&pool, "A", Duration::ZERO).await.unwrap();
    job(&pool, "A", Duration::ZERO).await.unwrap();
    settle().await;
    tokio::time::advance(Duration::from_secs(1)).await;
    settle().await;
    assert_eq!(born(&started), [None, some("A"), some("A")]);
}

#[tokio::test(start_paused = true)]
async fn with_spawn_a_worker_that_crashed_is_replaced_by_one_started_for_no_key() {
    let (log, started) = new_log();
    let signals = Signals::default();
    let pool = builder_with(1, &log, &started, &signals)
        .with_options(|o| o.key_binding = KeyBinding::Spawn)
        .build()
        .unwrap();
    settle().await;
    let a = job(&pool, "A", Duration::ZERO).await.unwrap();
    // What crashed a worker may be its key: it is not started again unasked.
    signals.lock().unwrap()[a].exit(ExitStatus::Code(1));
    settle().await;
    tokio::time::advance(Duration::from_secs(5)).await;
    settle().await;
    assert_eq!(born(&started), [None, some("A"), None]);
    assert_eq!(pool.workers()[0].keys, Vec::<Key>::new());
    // A job of A moves it, as any key's would.
    job(&pool, "A", Duration::ZERO).await.unwrap();
    assert_eq!(born(&started), [None, some("A"), None, some("A")]);
}

#[tokio::test(start_paused = true)]
async fn a_load_of_half_of_max_lifetime_or_more_is_said_once() {
    let (log, started) = new_log();
    let pool = builder_with(1, &log, &started, &Signals::default())
        .with_options(|o| o.max_lifetime = Some(Duration::from_millis(1500)))
        .build()
        .unwrap();
    let mut events = pool.events();
    for k in ["A", "B", "A", "B"] {
        job(&pool, k, Duration::ZERO).await.unwrap();
    }
    let mut said = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let Event::Warning { message } = e {
            said.push(message);
        }
    }
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].contains("loading a key") && said[0].contains("max_lifetime"),
        "{said:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn with_spawn_jobs_of_a_new_key_that_come_together_move_one_worker() {
    let (log, started) = new_log();
    let (pool, mut events) = spawn_a_and_b(&log, &started).await;
    let jobs: Vec<_> = (0..3)
        .map(|_| {
            let p = pool.clone();
            tokio::spawn(async move { job(&p, "C", Duration::ZERO).await })
        })
        .collect();
    for j in jobs {
        j.await.unwrap().unwrap();
    }
    assert_eq!(
        moved(&mut events),
        1,
        "the second job of C waited for the worker moving to C"
    );
    assert_eq!(born(&started)[4..], [some("C")]);
    let mut held: Vec<_> = (pool.workers().into_iter())
        .flat_map(|w| w.keys)
        .map(|k| k.to_string())
        .collect();
    held.sort();
    assert_eq!(held.len(), 2, "C and one of A and B: {held:?}");
}
