//! A pool of Python workers doing CPU work after a costly warm-up.
//!
//! Each worker (`examples/workers/primes.py`) builds a table of the primes up
//! to 20 million when it starts (about a second), then answers many jobs from
//! it. The pool starts two of them at once, lends them to eight jobs that
//! count the primes in slices of the range, and closes them at the end.
//!
//! ```text
//! cargo run -p kennel-process --example python_pool
//! ```

use std::time::{Duration, Instant};

use kennel::{Event, Fixed, Parallel, Pool, SlotInfo};
use kennel_process::{Coprocess, CoprocessSpec};
use serde::{Deserialize, Serialize};

const LIMIT: u64 = 20_000_000;
const SLICES: u64 = 8;

#[derive(Serialize)]
struct StatsRequest {
    op: &'static str,
    lo: u64,
    hi: u64,
}

#[derive(Debug, Deserialize)]
struct StatsReply {
    count: u64,
    sum: u64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // Worker stderr lines and pool events show up here.
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .init();

    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/workers/primes.py"
    );
    let spec = CoprocessSpec::new(["python3", script, "--limit", &LIMIT.to_string()])
        .close_grace(Duration::from_secs(2));

    let pool = Pool::builder(move |info: SlotInfo| {
        let spec = spec.clone().label(&*info.pool, info.slot);
        async move { spec.spawn() }
    })
    .name("primes")
    .startup(Parallel)
    .sizing(Fixed(2))
    .with_options(|o| o.job_timeout = Some(Duration::from_secs(60)))
    .build()?;

    let mut events = pool.events();
    tokio::spawn(async move {
        while let Ok(event) = events.recv().await {
            if let Event::Ready { slot, warmup, .. } = event {
                println!("slot {slot} warmed up in {warmup:.2?}");
            }
        }
    });

    let started = Instant::now();
    let step = (LIMIT + 1).div_ceil(SLICES);
    let jobs: Vec<_> = (0..SLICES)
        .map(|i| {
            let pool = pool.clone();
            let request = StatsRequest {
                op: "stats",
                lo: i * step,
                hi: ((i + 1) * step).min(LIMIT + 1),
            };
            tokio::spawn(async move {
                let reply = pool
                    .run(async |w: &mut Coprocess| w.call::<_, StatsReply>(&request).await)
                    .await;
                (request.lo, request.hi, started.elapsed(), reply)
            })
        })
        .collect();

    let mut total = 0;
    for job in jobs {
        // The outer error is the pool's (timeout, crash), the inner one the
        // worker's (an error reply, bad output).
        let (lo, hi, done_at, reply) = job.await?;
        let StatsReply { count, sum } = reply??;
        println!("[{lo:>9}, {hi:>9}): {count:>7} primes, sum {sum:>15}  (done at {done_at:.2?})");
        total += count;
    }
    println!(
        "{total} primes below {LIMIT} in {:.2?} with {:?}",
        started.elapsed(),
        pool.stats()
    );
    assert_eq!(total, 1_270_607, "pi(20,000,000)");

    pool.close().await;
    Ok(())
}
