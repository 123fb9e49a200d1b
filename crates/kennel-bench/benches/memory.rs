//! What a waiting job costs in memory, and what `stats()` costs in time with
//! many workers.
//!
//! - Bytes per waiting job: the pool's one worker is held, then 100,000 jobs
//!   wait for it. Measured as the growth of the process's resident memory
//!   (`/proc/self/statm`), once with each job a `lend()` future boxed and
//!   polled once (what the pool and the future take), once with each job a
//!   spawned task (what a task adds on top). Printed as
//!   `memory/{what}: N bytes per waiting job`.
//! - `stats/{workers}`: one `pool.stats()` with 10 and with 1,000 idle
//!   workers (criterion).
//!
//! `cargo bench -p kennel-bench --bench memory`. See `docs/BENCHMARKS.md`.
#![allow(missing_docs)]

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group};
use kennel::{Fixed, Parallel, Pool};
use kennel_bench::Noop;

/// Waiting jobs for the memory figure.
const WAITING: usize = 100_000;

fn pool(size: usize) -> Pool<Noop> {
    Pool::builder(|_| async { Noop::make() })
        .startup(Parallel)
        .sizing(Fixed(size))
        .with_options(|o| o.max_waiting = Some(2 * WAITING))
        .build()
        .unwrap()
}

/// Resident memory of this process, in bytes.
fn resident() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("Linux");
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

async fn warm(pool: &Pool<Noop>, size: usize) {
    while pool.stats().idle < size {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Bytes per waiting `lend()` future, boxed and polled once.
async fn per_future() -> usize {
    let pool = pool(1);
    warm(&pool, 1).await;
    let held = pool.lend().await.unwrap();
    let mut cx = Context::from_waker(Waker::noop());
    let mut futures: Vec<Pin<Box<dyn Future<Output = _> + Send>>> = Vec::with_capacity(WAITING);
    let before = resident();
    for _ in 0..WAITING {
        let mut f: Pin<Box<dyn Future<Output = _> + Send>> = Box::pin({
            let pool = pool.clone();
            async move { pool.lend().await.map(drop) }
        });
        assert!(f.as_mut().poll(&mut cx).is_pending());
        futures.push(f);
    }
    let after = resident();
    assert_eq!(pool.stats().waiting, WAITING);
    drop(futures);
    drop(held);
    pool.close().await;
    (after - before) / WAITING
}

/// Bytes per waiting job, each a spawned task.
async fn per_task() -> usize {
    let pool = pool(1);
    warm(&pool, 1).await;
    let held = pool.lend().await.unwrap();
    let mut tasks = Vec::with_capacity(WAITING);
    let before = resident();
    for _ in 0..WAITING {
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move { pool.lend().await.map(drop) }));
    }
    while pool.stats().waiting < WAITING {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let after = resident();
    for t in &tasks {
        t.abort();
    }
    drop(held);
    pool.close().await;
    (after - before) / WAITING
}

fn stats(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("stats");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(3));
    for workers in [10, 1_000] {
        let pool = rt.block_on(async {
            let pool = pool(workers);
            warm(&pool, workers).await;
            pool
        });
        group.bench_function(BenchmarkId::from_parameter(workers), |b| {
            b.iter(|| black_box(pool.stats()));
        });
        rt.block_on(pool.close());
    }
    group.finish();
}

criterion_group!(benches, stats);

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Fresh runtimes each: the figures do not share freed memory.
    let future = rt.block_on(per_future());
    println!("memory/future: {future} bytes per waiting job ({WAITING} waiting)");
    let task = rt.block_on(per_task());
    println!("memory/task: {task} bytes per waiting job ({WAITING} waiting)");
    drop(rt);
    benches();
    Criterion::default().configure_from_args().final_summary();
}
