//! The two workers of kennel-process against what a user would write
//! instead, in one run:
//!
//! - `echo/{peer}`: one echo job to a child process, one after the other:
//!   through a kennel pool of one [`Coprocess`] (`kennel`), a bare
//!   `Coprocess::request` (`coprocess`), and the floor: the same child
//!   program driven by hand with tokio (write the request line, read the
//!   reply line; no JSON decoding).
//! - `cpu/{peer}/{tasks}`: a small CPU job (sum of square roots of 0..1000)
//!   from `tasks` tasks at once: through a kennel pool of `tasks`
//!   [`ThreadWorker`]s (`kennel`; as many threads as `spawn_blocking` then
//!   uses), a pool of as many as the cores (`kennel-cores`, from more
//!   tasks than cores: jobs then wait for a worker),
//!   `tokio::task::spawn_blocking`, a rayon pool of two threads (one per
//!   core) with a oneshot for the answer, and the floor of a thread per
//!   state (`threads`): as many plain threads as tasks, each task sending
//!   its jobs to its own thread over a channel, answered by a oneshot, no
//!   pool.
//!
//! The child program is the Rust echo worker of `examples/workers`
//! (`cargo build --release -p kennel-process --example echo_worker`; built
//! here if missing). `cargo bench -p kennel-bench --bench process`.
#![allow(missing_docs)]

use std::hint::black_box;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use kennel::{Fixed, Parallel, Pool};
use kennel_process::{Coprocess, CoprocessSpec, ThreadWorker};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::runtime::Runtime;

/// Echo round trips per measurement.
const ECHOES: usize = 2_000;

/// CPU jobs per measurement.
const JOBS: usize = 20_000;

/// The cores of the machine the figures are for: the runtime's threads,
/// rayon's, and the pool sized to the cores (`kennel-cores`).
const CORES: usize = 2;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(CORES)
        .enable_all()
        .build()
        .unwrap()
}

/// The echo worker binary, built if it is not there yet.
fn echo_worker() -> PathBuf {
    if let Ok(path) = std::env::var("KENNEL_BENCH_ECHO_WORKER") {
        return path.into();
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let path = root.join("target/release/examples/echo_worker");
    if !path.exists() {
        let status = std::process::Command::new(env!("CARGO"))
            .current_dir(&root)
            .args([
                "build",
                "--release",
                "-p",
                "kennel-process",
                "--example",
                "echo_worker",
            ])
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the echo worker failed");
    }
    path
}

/// The small CPU job.
fn cpu_job() -> f64 {
    (0..1000u32).map(|i| f64::from(black_box(i)).sqrt()).sum()
}

/// The floor of a thread per state: plain threads, each fed by its own
/// channel. Task `i` sends its jobs to thread `i`, as a pool of
/// `ThreadWorker`s lends each task the worker it just gave back.
#[derive(Clone)]
struct Threads(Arc<Vec<mpsc::Sender<tokio::sync::oneshot::Sender<f64>>>>);

impl Threads {
    fn new(n: usize) -> Self {
        let senders = (0..n)
            .map(|_| {
                let (tx, rx) = mpsc::channel::<tokio::sync::oneshot::Sender<f64>>();
                std::thread::spawn(move || {
                    while let Ok(answer) = rx.recv() {
                        let _ = answer.send(cpu_job());
                    }
                });
                tx
            })
            .collect();
        Self(Arc::new(senders))
    }

    /// Sends one job to task `task`'s thread and awaits the answer.
    fn run(&self, task: usize) -> impl Future<Output = f64> + Send + use<> {
        let to = self.0[task].clone();
        async move {
            let (tx, rx) = tokio::sync::oneshot::channel();
            to.send(tx).unwrap();
            rx.await.unwrap()
        }
    }
}

fn echo(c: &mut Criterion) {
    let rt = runtime();
    let worker = echo_worker();
    let spec = CoprocessSpec::new([worker.clone()]);
    let request = json!({"n": 1, "text": "hello"});
    let mut group = c.benchmark_group("echo");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    group.throughput(criterion::Throughput::Elements(ECHOES as u64));

    let pool = rt.block_on(kennel_bench::echo_pool(spec.clone()));
    group.bench_function("kennel", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            let (pool, request) = (pool.clone(), request.clone());
            async move {
                let start = Instant::now();
                for _ in 0..iters as usize * ECHOES {
                    let reply = pool
                        .run(async |w: &mut Coprocess| w.request(&request).await)
                        .await
                        .unwrap()
                        .unwrap();
                    black_box(reply);
                }
                start.elapsed()
            }
        });
    });
    rt.block_on(pool.close());

    let mut bare = rt.block_on(async {
        let mut w = spec.spawn().unwrap();
        w.ready().await.unwrap();
        w
    });
    group.bench_function("coprocess", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters as usize * ECHOES {
                    black_box(bare.request(&request).await.unwrap());
                }
                start.elapsed()
            })
        });
    });
    rt.block_on(bare.close());

    // The floor: the same program, by hand, with the request encoded once.
    let line = format!("{request}\n");
    let (mut child, mut stdin, mut stdout) = rt.block_on(async {
        let mut child = tokio::process::Command::new(&worker)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut ready = String::new();
        stdout.read_line(&mut ready).await.unwrap();
        (child, stdin, stdout)
    });
    group.bench_function("floor", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut reply = String::new();
                let start = Instant::now();
                for _ in 0..iters as usize * ECHOES {
                    stdin.write_all(line.as_bytes()).await.unwrap();
                    stdin.flush().await.unwrap();
                    reply.clear();
                    stdout.read_line(&mut reply).await.unwrap();
                    black_box(&reply);
                }
                start.elapsed()
            })
        });
    });
    drop(stdin);
    rt.block_on(child.wait()).unwrap();
    group.finish();
}

/// Times `JOBS` jobs from `tasks` tasks at once, each job made by `job`
/// from `state` and the task's number.
fn measure<S, J, Fut>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    rt: &Runtime,
    id: BenchmarkId,
    tasks: usize,
    state: &S,
    job: J,
) where
    S: Clone + Send + 'static,
    J: Fn(&S, usize) -> Fut + Copy + Send + 'static,
    Fut: Future<Output = f64> + Send + 'static,
{
    group.bench_function(id, |b| {
        b.to_async(rt).iter_custom(|iters| {
            let state = state.clone();
            async move {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    total += drive(tasks, &state, job).await;
                }
                total
            }
        });
    });
}

/// Runs `JOBS` jobs from `tasks` tasks at once; returns the time taken.
async fn drive<S, J, Fut>(tasks: usize, state: &S, job: J) -> Duration
where
    S: Clone + Send + 'static,
    J: Fn(&S, usize) -> Fut + Copy + Send + 'static,
    Fut: Future<Output = f64> + Send + 'static,
{
    let start = Instant::now();
    let mut handles = Vec::with_capacity(tasks);
    for task in 0..tasks {
        let state = state.clone();
        handles.push(tokio::spawn(async move {
            for _ in 0..JOBS / tasks {
                black_box(job(&state, task).await);
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    start.elapsed()
}

fn cpu(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("cpu");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    group.throughput(criterion::Throughput::Elements(JOBS as u64));
    let rayon = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(CORES)
            .build()
            .unwrap(),
    );
    for tasks in [1, 8] {
        // As many worker threads as jobs at once, as spawn_blocking has.
        let pool = rt.block_on(thread_pool(tasks));
        let id = |peer| BenchmarkId::new(peer, tasks);
        measure(&mut group, &rt, id("kennel"), tasks, &pool, pool_job);
        if tasks > CORES {
            // What a user sizing the pool to the cores gets: jobs wait.
            let cores = rt.block_on(thread_pool(CORES));
            measure(&mut group, &rt, id("kennel-cores"), tasks, &cores, pool_job);
            rt.block_on(cores.close());
        }
        measure(
            &mut group,
            &rt,
            id("spawn_blocking"),
            tasks,
            &(),
            |(), _| async { tokio::task::spawn_blocking(cpu_job).await.unwrap() },
        );
        measure(&mut group, &rt, id("rayon"), tasks, &rayon, |rayon, _| {
            let rayon = rayon.clone();
            async move {
                let (tx, rx) = tokio::sync::oneshot::channel();
                rayon.spawn(move || {
                    let _ = tx.send(cpu_job());
                });
                rx.await.unwrap()
            }
        });
        let threads = Threads::new(tasks);
        measure(
            &mut group,
            &rt,
            id("threads"),
            tasks,
            &threads,
            Threads::run,
        );
        rt.block_on(pool.close());
    }
    group.finish();
}

/// One CPU job through a pool of `ThreadWorker`s.
fn pool_job(
    pool: &Pool<ThreadWorker<()>>,
    _task: usize,
) -> impl Future<Output = f64> + Send + use<> {
    let pool = pool.clone();
    async move {
        pool.run(async |w: &mut ThreadWorker<()>| w.run(|_| cpu_job()).await)
            .await
            .unwrap()
            .unwrap()
    }
}

async fn thread_pool(size: usize) -> Pool<ThreadWorker<()>> {
    let pool = Pool::builder(|_| async { ThreadWorker::spawn(|| Ok::<_, kennel::BoxError>(())) })
        .startup(Parallel)
        .sizing(Fixed(size))
        .build()
        .unwrap();
    while pool.stats().idle < size {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    pool
}

criterion_group!(benches, echo, cpu);
criterion_main!(benches);
