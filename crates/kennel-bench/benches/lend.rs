//! Lend + return of a no-op in-process worker: kennel against deadpool, bb8
//! and a floor made of a tokio `Semaphore` and a `Mutex<Vec>`, in one run.
//!
//! - `lend_return/{peer}/{size}/{tasks}`: `tasks` tasks lend and return at
//!   once, over and over, from a pool of `size` workers. `kennel` is a pool
//!   as built by default; `kennel-timed` times its jobs.
//! - `lend_cancel/{peer}/{size}/{tasks}`: each job holds its worker across
//!   one yield, so jobs wait for workers, and every fourth lend is dropped
//!   while it waits (when it has not got a worker by its second poll).
//!
//! `cargo bench -p kennel-bench --bench lend`; `KENNEL_BENCH_CYCLES` sets the
//! cycles per measurement (default 1,048,576). See `docs/BENCHMARKS.md`.
#![allow(missing_docs)]

use std::convert::Infallible;
use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{BenchmarkGroup, BenchmarkId, Criterion, criterion_group, criterion_main};
use kennel::{Fixed, Parallel, Pool};
use kennel_bench::Noop;
use tokio::runtime::Runtime;
use tokio::sync::Semaphore;
use tokio::task::yield_now;

/// (pool size, concurrent tasks)
const SHAPES: [(usize, usize); 4] = [(1, 1), (2, 8), (8, 32), (16, 32)];

/// With one task nothing ever waits, so nothing can be dropped mid-wait.
const CANCEL_SHAPES: [(usize, usize); 3] = [(2, 8), (8, 32), (16, 32)];

/// In the cancellation variant, one lend in this many is dropped if it
/// waits.
const CANCEL_EVERY: usize = 4;

fn cycles() -> usize {
    std::env::var("KENNEL_BENCH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 20)
}

struct DeadpoolManager;

impl deadpool::managed::Manager for DeadpoolManager {
    type Type = u64;
    type Error = Infallible;
    async fn create(&self) -> Result<u64, Infallible> {
        Ok(0)
    }
    async fn recycle(
        &self,
        _: &mut u64,
        _: &deadpool::managed::Metrics,
    ) -> deadpool::managed::RecycleResult<Infallible> {
        Ok(())
    }
}

struct Bb8Manager;

impl bb8::ManageConnection for Bb8Manager {
    type Connection = u64;
    type Error = Infallible;
    async fn connect(&self) -> Result<u64, Infallible> {
        Ok(0)
    }
    async fn is_valid(&self, _: &mut u64) -> Result<(), Infallible> {
        Ok(())
    }
    fn has_broken(&self, _: &mut u64) -> bool {
        false
    }
}

/// The floor: a semaphore for the count and a mutex-guarded stack.
struct Floor {
    permits: Semaphore,
    items: Mutex<Vec<u64>>,
}

/// What the floor lends: the item, given back when dropped.
struct FloorLease<'a> {
    floor: &'a Floor,
    item: u64,
    _permit: tokio::sync::SemaphorePermit<'a>,
}

impl Floor {
    fn new(size: usize) -> Self {
        Self {
            permits: Semaphore::new(size),
            items: Mutex::new(vec![0; size]),
        }
    }

    async fn lend(&self) -> FloorLease<'_> {
        let permit = self.permits.acquire().await.unwrap();
        let item = self.items.lock().unwrap().pop().unwrap();
        FloorLease {
            floor: self,
            item,
            _permit: permit,
        }
    }
}

impl Drop for FloorLease<'_> {
    fn drop(&mut self) {
        // Before the permit is released (fields drop after this).
        self.floor.items.lock().unwrap().push(self.item);
    }
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A kennel pool as built by default: it times no job. With
/// `timed`, a `max_queue_wait` makes it time every job (two clock reads per
/// cycle), as a metrics recorder or a learning sizing would.
fn kennel_pool(size: usize, timed: bool) -> Pool<Noop> {
    let builder = Pool::builder(|_| async { Noop::make() })
        .startup(Parallel)
        .sizing(Fixed(size))
        .with_options(|o| o.max_waiting = Some(kennel::MAX_WAITING));
    let builder = if timed {
        builder.with_options(|o| o.max_queue_wait = Some(Duration::from_secs(3600)))
    } else {
        builder
    };
    builder.build().unwrap()
}

fn deadpool_pool(size: usize) -> deadpool::managed::Pool<DeadpoolManager> {
    deadpool::managed::Pool::builder(DeadpoolManager)
        .max_size(size)
        .runtime(deadpool::Runtime::Tokio1)
        .build()
        .unwrap()
}

async fn bb8_pool(size: usize) -> bb8::Pool<Bb8Manager> {
    bb8::Pool::builder()
        .max_size(size as u32)
        .min_idle(Some(size as u32))
        .test_on_check_out(false)
        .connection_timeout(Duration::from_secs(60))
        .build(Bb8Manager)
        .await
        .unwrap()
}

/// One lend+return. In the cancellation variant the job holds the worker
/// across a yield, and lend number `n` with `n % CANCEL_EVERY == 0` is
/// dropped if it has no worker by its second poll.
async fn cycle<L, F: Future<Output = L>>(lend: F, cancel: bool, n: usize) {
    if !cancel {
        drop(black_box(lend.await));
        return;
    }
    if n % CANCEL_EVERY == 0 {
        tokio::select! {
            biased;
            lease = lend => {
                yield_now().await;
                drop(black_box(lease));
            }
            () = yield_now() => {}
        }
    } else {
        let lease = lend.await;
        yield_now().await;
        drop(black_box(lease));
    }
}

/// Runs `cycles` cycles split over `tasks` tasks; returns the time taken.
async fn drive<P, F, Fut>(pool: &P, tasks: usize, cycles: usize, one: F) -> Duration
where
    P: Clone + Send + 'static,
    F: Fn(P, usize) -> Fut + Copy + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let per_task = cycles / tasks;
    let start = Instant::now();
    let mut handles = Vec::with_capacity(tasks);
    for _ in 0..tasks {
        let pool = pool.clone();
        handles.push(tokio::spawn(async move {
            for n in 0..per_task {
                one(pool.clone(), n).await;
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    start.elapsed()
}

fn measure<P, F, Fut>(
    group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    rt: &Runtime,
    id: BenchmarkId,
    pool: &P,
    tasks: usize,
    one: F,
) where
    P: Clone + Send + 'static,
    F: Fn(P, usize) -> Fut + Copy + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let cycles = cycles();
    group.bench_function(id, |b| {
        b.to_async(rt).iter_custom(|iters| {
            let pool = pool.clone();
            async move {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    total += drive(&pool, tasks, cycles, one).await;
                }
                total
            }
        });
    });
}

fn bench(c: &mut Criterion, name: &str, shapes: &[(usize, usize)], cancel: bool) {
    let rt = runtime();
    let mut group = c.benchmark_group(name);
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.throughput(criterion::Throughput::Elements(cycles() as u64));
    for &(size, tasks) in shapes {
        let shape = format!("{size}/{tasks}");
        for (peer, timed) in [("kennel", false), ("kennel-timed", true)] {
            let pool = rt.block_on(async {
                let pool = kennel_pool(size, timed);
                // Let every worker warm up before measuring.
                while pool.stats().idle < size {
                    tokio::task::yield_now().await;
                }
                pool
            });
            measure(
                &mut group,
                &rt,
                BenchmarkId::new(peer, &shape),
                &pool,
                tasks,
                move |pool: Pool<Noop>, n| async move {
                    cycle(async { pool.lend().await.unwrap() }, cancel, n).await;
                },
            );
        }
        measure(
            &mut group,
            &rt,
            BenchmarkId::new("deadpool", &shape),
            &deadpool_pool(size),
            tasks,
            move |pool: deadpool::managed::Pool<DeadpoolManager>, n| async move {
                cycle(async { pool.get().await.unwrap() }, cancel, n).await;
            },
        );
        measure(
            &mut group,
            &rt,
            BenchmarkId::new("bb8", &shape),
            &rt.block_on(bb8_pool(size)),
            tasks,
            move |pool: bb8::Pool<Bb8Manager>, n| async move {
                cycle(async { pool.get().await.unwrap() }, cancel, n).await;
            },
        );
        measure(
            &mut group,
            &rt,
            BenchmarkId::new("floor", &shape),
            &Arc::new(Floor::new(size)),
            tasks,
            move |floor: Arc<Floor>, n| async move {
                cycle(floor.lend(), cancel, n).await;
            },
        );
    }
    group.finish();
}

fn lend_return(c: &mut Criterion) {
    bench(c, "lend_return", &SHAPES, false);
}

fn lend_cancel(c: &mut Criterion) {
    bench(c, "lend_cancel", &CANCEL_SHAPES, true);
}

criterion_group!(benches, lend_return, lend_cancel);
criterion_main!(benches);
