//! Lend + return of a no-op in-process worker: kennel against deadpool, bb8
//! and a floor made of a tokio `Semaphore` and a `Mutex<Vec>`, in one run.
//!
//! `cargo bench -p kennel --bench lend`; `KENNEL_BENCH_CYCLES` sets the
//! cycles per measurement (default 1,048,576).
#![allow(missing_docs)]

use std::convert::Infallible;
use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use kennel::{ExitSignal, Exited, Fixed, Killer, Parallel, Pool, Worker};
use tokio::runtime::Runtime;
use tokio::sync::Semaphore;

/// (pool size, concurrent tasks)
const SHAPES: [(usize, usize); 4] = [(1, 1), (2, 8), (8, 32), (16, 32)];

fn cycles() -> usize {
    std::env::var("KENNEL_BENCH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 20)
}

struct Noop {
    signal: ExitSignal,
    exited: Option<Exited>,
}

impl Worker for Noop {
    fn exited(&mut self) -> Exited {
        self.exited.take().unwrap_or_else(Exited::never)
    }
    fn killer(&self) -> Killer {
        self.signal.killer()
    }
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

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `cycles` lend+return cycles split over `tasks` tasks.
async fn drive<F, Fut>(tasks: usize, cycles: usize, one: F) -> Duration
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let per_task = cycles / tasks;
    let start = Instant::now();
    let mut handles = Vec::with_capacity(tasks);
    for _ in 0..tasks {
        let one = one.clone();
        handles.push(tokio::spawn(async move {
            for _ in 0..per_task {
                one().await;
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    start.elapsed()
}

fn kennel_pool(size: usize) -> Pool<Noop> {
    Pool::builder(|_| async {
        let (signal, exited) = ExitSignal::new();
        Ok::<_, kennel::BoxError>(Noop {
            signal,
            exited: Some(exited),
        })
    })
    .startup(Parallel)
    .sizing(Fixed(size))
    .max_waiting(1 << 20)
    .build()
    .unwrap()
}

fn lend(c: &mut Criterion) {
    let rt = runtime();
    let cycles = cycles();
    let mut group = c.benchmark_group("lend_return");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.throughput(criterion::Throughput::Elements(cycles as u64));
    for (size, tasks) in SHAPES {
        let shape = format!("{size}/{tasks}");
        group.bench_function(BenchmarkId::new("kennel", &shape), |b| {
            let pool = rt.block_on(async {
                let pool = kennel_pool(size);
                // Let every worker warm up before measuring.
                while pool.stats().idle < size {
                    tokio::task::yield_now().await;
                }
                pool
            });
            b.to_async(&rt).iter_custom(|iters| {
                let pool = pool.clone();
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let pool = pool.clone();
                        total += drive(tasks, cycles, move || {
                            let pool = pool.clone();
                            async move {
                                drop(black_box(pool.lend().await.unwrap()));
                            }
                        })
                        .await;
                    }
                    total
                }
            });
        });
        group.bench_function(BenchmarkId::new("deadpool", &shape), |b| {
            let pool: deadpool::managed::Pool<DeadpoolManager> =
                deadpool::managed::Pool::builder(DeadpoolManager)
                    .max_size(size)
                    .runtime(deadpool::Runtime::Tokio1)
                    .build()
                    .unwrap();
            b.to_async(&rt).iter_custom(|iters| {
                let pool = pool.clone();
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let pool = pool.clone();
                        total += drive(tasks, cycles, move || {
                            let pool = pool.clone();
                            async move {
                                drop(black_box(pool.get().await.unwrap()));
                            }
                        })
                        .await;
                    }
                    total
                }
            });
        });
        group.bench_function(BenchmarkId::new("bb8", &shape), |b| {
            let pool = rt.block_on(async {
                bb8::Pool::builder()
                    .max_size(size as u32)
                    .min_idle(Some(size as u32))
                    .test_on_check_out(false)
                    .connection_timeout(Duration::from_secs(60))
                    .build(Bb8Manager)
                    .await
                    .unwrap()
            });
            b.to_async(&rt).iter_custom(|iters| {
                let pool = pool.clone();
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let pool = pool.clone();
                        total += drive(tasks, cycles, move || {
                            let pool = pool.clone();
                            async move {
                                drop(black_box(pool.get().await.unwrap()));
                            }
                        })
                        .await;
                    }
                    total
                }
            });
        });
        group.bench_function(BenchmarkId::new("floor", &shape), |b| {
            let floor = Arc::new(Floor {
                permits: Semaphore::new(size),
                items: Mutex::new(vec![0; size]),
            });
            b.to_async(&rt).iter_custom(|iters| {
                let floor = floor.clone();
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let floor = floor.clone();
                        total += drive(tasks, cycles, move || {
                            let floor = floor.clone();
                            async move {
                                let permit = floor.permits.acquire().await.unwrap();
                                let item = floor.items.lock().unwrap().pop().unwrap();
                                black_box(item);
                                floor.items.lock().unwrap().push(item);
                                drop(permit);
                            }
                        })
                        .await;
                    }
                    total
                }
            });
        });
    }
    group.finish();
}

criterion_group!(benches, lend);
criterion_main!(benches);
