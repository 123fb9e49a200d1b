//! A key's count of jobs outlives its place on a worker (ADR 0062): a key
//! let go keeps its count, however it went (unloaded for another key, or
//! with a worker that ended), and the worker that holds it next resumes
//! it, whether it loads the key or is started for it. In-memory workers on
//! the paused clock.

#[path = "keyed/holder.rs"]
mod holder;

use std::time::Duration;

use holder::{Holder, Signals, builder_warming, builder_with, job, key, loads, new_log, settle};
use kennel::{ExitStatus, KeyBinding, Pool};

/// Runs `n` jobs of `k`, one after the other (the worker of the last
/// gives its id to [`crash`]).
async fn jobs(pool: &Pool<Holder>, k: &str, n: usize) {
    for _ in 0..n {
        job(pool, k, Duration::ZERO).await.unwrap();
    }
}

/// The slot of the worker that holds `k`.
fn holder_of(pool: &Pool<Holder>, k: &str) -> Option<usize> {
    pool.workers().iter().position(|w| w.keys.contains(&key(k)))
}

/// Ends the worker whose id (as a job of it gives it) is `id` as if it crashed, and lets the pool replace it.
async fn crash(signals: &Signals, id: usize) {
    signals.lock().unwrap()[id].exit(ExitStatus::Code(1));
    settle().await;
    tokio::time::advance(Duration::from_secs(5)).await;
    settle().await;
}

#[tokio::test(start_paused = true)]
async fn a_key_unloaded_for_another_keeps_its_count_and_the_worker_that_loads_it_again_resumes_it()
{
    let (log, born) = new_log();
    let pool = builder_with(2, &log, &born, &Signals::default())
        .build()
        .unwrap();
    jobs(&pool, "A", 10).await;
    jobs(&pool, "B", 3).await;
    // C and then D take A's worker's place in turn only while A's count is
    // the smaller; A, asked for ten times, goes for neither.
    jobs(&pool, "C", 1).await;
    jobs(&pool, "D", 1).await;
    assert!(holder_of(&pool, "A").is_some(), "{:?}", loads(&log));
    assert!(holder_of(&pool, "B").is_none(), "B, used least, went");
}

#[tokio::test(start_paused = true)]
async fn a_key_whose_worker_crashed_keeps_its_count() {
    let (log, born) = new_log();
    let signals = Signals::default();
    let pool = builder_with(2, &log, &born, &signals).build().unwrap();
    jobs(&pool, "A", 10).await;
    jobs(&pool, "B", 3).await;
    let a = job(&pool, "A", Duration::ZERO).await.unwrap();
    crash(&signals, a).await;
    assert!(holder_of(&pool, "A").is_none(), "A went with its worker");
    // A's next job loads it onto the replacement, which resumes A's ten
    // jobs: C then takes B's worker, not A's (counted from one job, A's
    // would be the one used least).
    jobs(&pool, "A", 1).await;
    jobs(&pool, "C", 1).await;
    assert!(holder_of(&pool, "A").is_some(), "{:?}", loads(&log));
    assert!(holder_of(&pool, "B").is_none(), "{:?}", loads(&log));
}

#[tokio::test(start_paused = true)]
async fn with_spawn_a_worker_started_for_a_key_resumes_its_count() {
    let (log, born) = new_log();
    let signals = Signals::default();
    let pool = builder_with(2, &log, &born, &signals)
        .with_options(|o| o.key_binding = KeyBinding::Spawn)
        .build()
        .unwrap();
    settle().await;
    jobs(&pool, "A", 10).await;
    jobs(&pool, "B", 3).await;
    let a = job(&pool, "A", Duration::ZERO).await.unwrap();
    crash(&signals, a).await;
    jobs(&pool, "A", 1).await;
    let started_for_a = born.lock().unwrap().len();
    // C moves B's worker (three jobs), not A's new one (eleven, its
    // count resumed).
    jobs(&pool, "C", 1).await;
    assert!(
        holder_of(&pool, "A").is_some(),
        "{:?}",
        born.lock().unwrap()
    );
    assert!(
        holder_of(&pool, "B").is_none(),
        "{:?}",
        born.lock().unwrap()
    );
    assert_eq!(
        born.lock().unwrap().len(),
        started_for_a + 1,
        "one worker started, for C"
    );
}

#[tokio::test(start_paused = true)]
async fn with_spawn_a_warm_replacement_resumes_the_count_of_the_worker_it_replaces() {
    let (log, born) = new_log();
    let pool = builder_warming(2, &log, &born, &Signals::default(), Duration::from_secs(2))
        .with_options(|o| {
            o.key_binding = KeyBinding::Spawn;
            o.max_lifetime = Some(Duration::from_secs(60));
            o.max_surge = 2;
        })
        .build()
        .unwrap();
    tokio::time::advance(Duration::from_secs(2)).await;
    jobs(&pool, "A", 10).await;
    jobs(&pool, "B", 3).await;
    // A job of A holds its worker past the worker's lifetime: the
    // replacement, started for A, warms while the old worker still serves,
    // and takes its slot when the job ends. B's worker, idle, is replaced
    // at its lifetime.
    let long = tokio::spawn({
        let pool = pool.clone();
        async move { job(&pool, "A", Duration::from_secs(70)).await }
    });
    for _ in 0..75 {
        tokio::time::advance(Duration::from_secs(1)).await;
        settle().await;
    }
    long.await.unwrap().unwrap();
    settle().await;
    let started = born.lock().unwrap().len();
    // C moves B's new worker (three jobs), not A's (eleven, the old
    // worker's count resumed).
    jobs(&pool, "C", 1).await;
    let born = born.lock().unwrap();
    assert_eq!(
        born[started - 2..started],
        [Some(key("A")), Some(key("B"))],
        "{born:?}"
    );
    assert!(holder_of(&pool, "A").is_some(), "{born:?}");
    assert!(holder_of(&pool, "B").is_none(), "{born:?}");
    assert_eq!(
        born.len(),
        started + 1,
        "one worker started, for C: {born:?}"
    );
}
