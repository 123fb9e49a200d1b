//! A worker that implements no method of `Worker`: it never ends on its own
//! and is killed by being dropped.
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kennel::{BoxError, Error, Event, Fixed, Parallel, Pool, RetireReason, Worker};
use support::{drain, secs, settle};

/// Counts its drops: the only way it ends.
struct Plain(Arc<AtomicUsize>);

impl Worker for Plain {}

impl Drop for Plain {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn plain_pool(dropped: &Arc<AtomicUsize>) -> kennel::PoolBuilder<Plain> {
    let dropped = dropped.clone();
    Pool::builder(move |_slot| {
        let dropped = dropped.clone();
        async move { Ok::<_, BoxError>(Plain(dropped)) }
    })
    .startup(Parallel)
    .sizing(Fixed(1))
}

#[tokio::test(start_paused = true)]
async fn a_worker_with_no_methods_serves_jobs_and_is_dropped_when_the_pool_closes() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let pool = plain_pool(&dropped).build().unwrap();
    for _ in 0..3 {
        pool.run(async |_w: &mut Plain| ()).await.unwrap();
    }
    assert_eq!(dropped.load(Ordering::SeqCst), 0, "one worker, kept");
    pool.close().await;
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_worker_killed_by_being_dropped_is_dropped_and_replaced() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let pool = plain_pool(&dropped)
        .with_options(|o| o.job_timeout = Some(secs(1)))
        .build()
        .unwrap();
    let mut events = pool.events();
    let late = pool
        .run(async |_w: &mut Plain| tokio::time::sleep(secs(60)).await)
        .await;
    assert!(matches!(late, Err(Error::Timeout { .. })), "{late:?}");
    settle().await;
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "killed by its drop");
    assert!(drain(&mut events).iter().any(|e| matches!(
        e,
        Event::Retired {
            reason: RetireReason::Timeout,
            ..
        }
    )));
    pool.run(async |_w: &mut Plain| ()).await.unwrap();
    assert_eq!(pool.stats().idle, 1, "its slot was refilled");
}
