//! Lend + return cycles of a default kennel pool on one task, for
//! instruction counts under `valgrind --tool=callgrind` (repeatable whatever
//! else the machine does).
use kennel::{Fixed, Parallel, Pool};
use kennel_bench::Noop;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    // `KENNEL_CYCLES_THREADS=2`: on a runtime of 2 worker threads, as the
    // lend bench runs.
    let rt = match std::env::var("KENNEL_CYCLES_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
    {
        Some(threads) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build(),
        None => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
    }
    .unwrap();
    // In a task, as jobs run: a lease dropped outside any task costs a
    // look for the runtime's handle more (see docs/BENCHMARKS.md).
    let in_task = std::env::var_os("KENNEL_CYCLES_BLOCK_ON").is_none();
    // `KENNEL_CYCLES_SHAPE=16/32`: a pool of 16 workers lent from 32 tasks
    // (the lend bench's shapes), to profile the pool's lock under contention.
    let (size, tasks) = std::env::var("KENNEL_CYCLES_SHAPE")
        .ok()
        .and_then(|s| {
            let (a, b) = s.split_once('/')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .unwrap_or((1, 1));
    let cycles = async move {
        let pool = Pool::builder(|_| async { Noop::make() })
            .startup(Parallel)
            .sizing(Fixed(size))
            .build()
            .unwrap();
        drop(pool.lend().await.unwrap());
        if tasks == 1 {
            // On this task (or in `block_on`), as the counts above were made.
            cycle(&pool, n).await;
            return;
        }
        let loops: Vec<_> = (0..tasks)
            .map(|_| {
                let pool = pool.clone();
                tokio::spawn(async move { cycle(&pool, n / tasks).await })
            })
            .collect();
        for l in loops {
            l.await.unwrap();
        }
    };
    if in_task {
        rt.block_on(rt.spawn(cycles)).unwrap();
    } else {
        rt.block_on(cycles);
    }
}

/// `n` lends and returns, one after the other.
async fn cycle(pool: &Pool<Noop>, n: usize) {
    for _ in 0..n {
        let lease = pool.lend().await.unwrap();
        std::hint::black_box(&lease);
        drop(lease);
    }
}
