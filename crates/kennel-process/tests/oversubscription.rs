//! Oversubscription seen: a worker that keeps far more threads working
//! than the budget it was told is reported, with the figures, once it has
//! been measured over its first jobs; one that keeps to its budget is
//! measured and left alone, however many idle threads it holds.

#![cfg(target_os = "linux")]

mod common;

use std::num::NonZeroUsize;

use common::{fixture, within};
use kennel::{Event, Fixed, Pool};
use kennel_process::{Coprocess, ThreadBudget};
use serde_json::json;

fn pool(name: &str) -> Pool<Coprocess> {
    fixture(&[])
        .threads(ThreadBudget::PerWorker(NonZeroUsize::MIN))
        .pool()
        .name(name)
        .sizing(Fixed(1))
        .build()
        .expect("pool")
}

/// Runs jobs of `threads` busy threads (and 4 idle ones) of 300 ms each
/// until the pool has measured the worker (at least a second of jobs).
async fn spin(pool: &Pool<Coprocess>, threads: u64) -> kennel::ThreadUse {
    for _ in 0..20 {
        within(
            "a job",
            pool.run(async |w: &mut Coprocess| {
                w.request(&json!({"op": "spin", "threads": threads, "ms": 300, "idle": 4}))
                    .await
            }),
        )
        .await
        .expect("lent")
        .expect("a reply");
        if let Some(usage) = pool.workers()[0].threads {
            return usage;
        }
    }
    panic!("the worker was not measured after 20 jobs of 300 ms");
}

#[tokio::test]
async fn a_worker_running_four_times_its_budget_in_threads_raises_the_oversubscription_event() {
    let pool = pool("greedy");
    let mut events = pool.events();
    let usage = spin(&pool, 4).await;
    assert_eq!(usage.budget, 1);
    assert!(usage.working >= 4, "{usage}");
    assert!(
        usage.threads >= 4 + 4,
        "the idle threads are counted: {usage}"
    );
    assert!(usage.oversubscribed(), "{usage}");
    let pid = pool.workers()[0].pid;
    let event = within("the event", async {
        loop {
            if let Event::Oversubscribed { slot, pid, usage } = events.recv().await.expect("event")
            {
                return (slot, pid, usage);
            }
        }
    })
    .await;
    assert_eq!(event, (0, pid, usage));
    pool.close().await;
}

#[tokio::test]
async fn a_worker_that_keeps_to_its_budget_is_measured_and_not_reported() {
    let pool = pool("modest");
    let mut events = pool.events();
    let usage = spin(&pool, 1).await;
    assert_eq!((usage.budget, usage.working), (1, 1), "{usage}");
    assert!(usage.threads >= 5, "itself and 4 idle threads: {usage}");
    assert!(!usage.oversubscribed(), "{usage}");
    pool.close().await;
    while let Ok(event) = events.try_recv() {
        assert!(
            !matches!(event, Event::Oversubscribed { .. }),
            "a modest worker was reported: {event:?}"
        );
    }
}
