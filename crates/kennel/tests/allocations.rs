//! What a lend and return allocate once the pool is warm: nothing per
//! cycle, timed or not. Counted by dhat's heap profiler in its testing mode,
//! in a test binary of its own (one profiler per process).

mod support;

use std::time::Duration;

use kennel::{Parallel, Pool};
use support::{Fake, Farm, fixed};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// Blocks allocated by `cycles` lends and returns of a warm pool of two.
async fn blocks_per_cycles(pool: &Pool<Fake>, cycles: usize) -> u64 {
    while pool.stats().idle < 2 {
        tokio::task::yield_now().await;
    }
    // The first cycles may grow what is kept for later (the runtime's
    // queues, the pool's own vectors).
    for _ in 0..16 {
        drop(pool.lend().await.expect("a worker is idle"));
    }
    let before = dhat::HeapStats::get().total_blocks;
    for _ in 0..cycles {
        let lease = pool.lend().await.expect("a worker is idle");
        drop(lease);
    }
    dhat::HeapStats::get().total_blocks - before
}

/// The most blocks 1,000 warm cycles may allocate: far below one per
/// cycle (a lend or a return that allocated would show 1,000 or more), and
/// above the few blocks of one-time growth that a run sometimes shows (4,
/// in about one debug run in three, at a moment that varies with timing).
const AT_MOST: u64 = 16;

#[test]
fn a_warm_pools_lend_and_return_allocate_nothing_per_cycle_timed_or_not() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let farm = Farm::new();
        // One pool at a time, so that no other pool's warm-up runs while
        // one is counted.
        let untimed = fixed(&farm, Parallel, 2).build().expect("valid options");
        let blocks = blocks_per_cycles(&untimed, 1000).await;
        assert!(blocks <= AT_MOST, "untimed: {blocks} blocks");
        untimed.close().await;
        // `max_queue_wait` makes the pool time every job.
        let timed = fixed(&farm, Parallel, 2)
            .with_options(|o| o.max_queue_wait = Some(Duration::from_secs(3600)))
            .build()
            .expect("valid options");
        let blocks = blocks_per_cycles(&timed, 1000).await;
        assert!(blocks <= AT_MOST, "timed: {blocks} blocks");
        timed.close().await;
    });
}
