//! Warm a model once: with `LeaderFirst`, slot 0 starts alone and fills a
//! shared cache (the "compiled model"); the other slots start once it is
//! ready and only read the cache, so their warm-up is quick.
//!
//! `cargo run -p kennel-examples --example warm-a-model-once`

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kennel::{BoxError, Event, Fixed, LeaderFirst, Pool, SlotInfo, Worker};
use tokio::sync::OnceCell;
use tokio::time::Instant;

/// What the costly step produces: here a table of squares, standing for a
/// compiled model or a model file on disk.
struct Compiled {
    squares: Vec<u64>,
}

/// The cache every worker of the pool shares. `get_or_init` runs the
/// compile once; a worker that asks while it runs waits for that result.
#[derive(Clone, Default)]
struct Cache {
    compiled: Arc<OnceCell<Arc<Compiled>>>,
    compiles: Arc<AtomicUsize>,
}

impl Cache {
    async fn get(&self) -> Arc<Compiled> {
        self.compiled
            .get_or_init(|| async {
                self.compiles.fetch_add(1, Ordering::Relaxed);
                // The costly step, done once per pool (a sleep stands in
                // for compiling a model).
                tokio::time::sleep(Duration::from_millis(600)).await;
                Arc::new(Compiled {
                    squares: (0..1_000u64).map(|n| n * n).collect(),
                })
            })
            .await
            .clone()
    }
}

struct Model {
    cache: Cache,
    compiled: Option<Arc<Compiled>>,
}

impl Model {
    fn new(cache: Cache) -> Self {
        Self {
            cache,
            compiled: None,
        }
    }

    fn infer(&self, n: usize) -> u64 {
        let squares = &self.compiled.as_ref().expect("ready").squares;
        squares[n % squares.len()]
    }
}

impl Worker for Model {
    async fn ready(&mut self) -> Result<(), BoxError> {
        let compiled = self.cache.get().await;
        // The cheap part every worker does: load what the cache holds.
        tokio::time::sleep(Duration::from_millis(30)).await;
        self.compiled = Some(compiled);
        Ok(())
    }
}

fn model_pool(cache: &Cache) -> Result<Pool<Model>, kennel::BuildError> {
    let cache = cache.clone();
    Pool::builder(move |_slot: SlotInfo| {
        let cache = cache.clone();
        async move { Ok::<_, BoxError>(Model::new(cache)) }
    })
    .name("model")
    .startup(LeaderFirst)
    .sizing(Fixed(4))
    .build()
}

/// Reads the pool's events until `n` workers are ready; returns when each
/// slot started and was ready.
async fn timeline(
    mut events: tokio::sync::broadcast::Receiver<Event>,
    t0: Instant,
    n: usize,
) -> Vec<String> {
    let mut lines = Vec::new();
    let mut ready = 0;
    while ready < n {
        match events.recv().await {
            Ok(Event::Starting { slot }) => {
                lines.push(format!(
                    "slot {slot} starts at {:>3} ms",
                    t0.elapsed().as_millis()
                ));
            }
            Ok(Event::Ready { slot, warmup, .. }) => {
                ready += 1;
                lines.push(format!(
                    "slot {slot} ready  at {:>3} ms (warm-up {} ms)",
                    t0.elapsed().as_millis(),
                    warmup.as_millis()
                ));
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    lines
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("1. No job yet: slot 0 compiles alone, then slots 1-3 read the cache");
    let cache = Cache::default();
    let t0 = Instant::now();
    let pool = model_pool(&cache)?;
    for line in timeline(pool.events(), t0, 4).await {
        println!("  {line}");
    }
    let mut answers = Vec::new();
    for n in 0..8 {
        answers.push(pool.run(async |m: &mut Model| m.infer(n)).await?);
    }
    println!("  8 jobs answered {answers:?}");
    println!(
        "  compiled {} time(s) for 4 workers",
        cache.compiles.load(Ordering::Relaxed)
    );
    pool.close().await;

    println!("\n2. A burst before slot 0 is ready: jobs start slots 1-3 themselves,");
    println!("   and their warm-ups wait for slot 0's compile instead of repeating it");
    let cache = Cache::default();
    let t0 = Instant::now();
    let pool = model_pool(&cache)?;
    let watcher = tokio::spawn(timeline(pool.events(), t0, 4));
    let mut jobs = Vec::new();
    for n in 0..4 {
        let pool = pool.clone();
        jobs.push(tokio::spawn(async move {
            pool.run(async |m: &mut Model| m.infer(n)).await
        }));
    }
    for job in jobs {
        job.await??;
    }
    for line in watcher.await? {
        println!("  {line}");
    }
    println!(
        "  4 jobs done at {} ms; compiled {} time(s) for 4 workers",
        t0.elapsed().as_millis(),
        cache.compiles.load(Ordering::Relaxed)
    );
    pool.close().await;
    Ok(())
}
