//! A tour of kennel: a pool of workers that are costly to start, lent to
//! jobs one at a time, watched through stats and events, then closed.
//!
//! Run it with `cargo run --release`.

use std::time::Duration;

use kennel::{BoxError, Event, Fixed, IdleTimeout, LeaderFirst, Pool, Worker};
use tokio::time::Instant;

/// A worker that "loads a model" (a table of squares) for a while, then
/// answers look-ups. Its state lives as long as the worker.
struct Model {
    table: Vec<u64>,
}

impl Model {
    fn new() -> Self {
        Self { table: Vec::new() }
    }

    fn square(&self, n: usize) -> u64 {
        self.table[n % self.table.len()]
    }
}

impl Worker for Model {
    async fn ready(&mut self) -> Result<(), BoxError> {
        // The costly warm-up: done once per worker, not once per job.
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.table = (0..1_000u64).map(|n| n * n).collect();
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let t0 = Instant::now();
    let pool = Pool::builder(|_slot| async { Ok::<_, BoxError>(Model::new()) })
        .name("squares")
        .startup(LeaderFirst)
        .sizing(Fixed(4))
        .eviction(IdleTimeout::new(Duration::from_secs(300))?.keep(1))
        .with_options(|o| o.job_timeout = Some(Duration::from_secs(5)))
        .build()?;
    let mut events = pool.events();

    println!("kennel tour: a pool of 4 workers, each taking 300 ms to warm up\n");
    println!("LeaderFirst starts slot 0 alone, then the others once it is ready:");
    let first = pool.run(async |m: &mut Model| m.square(12)).await?;
    println!("  first job answered {first} after {:?}", t0.elapsed());

    // Jobs one at a time reuse one worker.
    for n in 0..5 {
        pool.run(async |m: &mut Model| m.square(n)).await?;
    }
    // Let the other three finish their warm-up.
    tokio::time::sleep(Duration::from_millis(350)).await;
    println!("  stats after warm-up: {:?}", pool.stats());

    // Many jobs at once spread over the four workers.
    let started = Instant::now();
    let mut jobs = Vec::new();
    for n in 0..40 {
        let pool = pool.clone();
        jobs.push(tokio::spawn(async move {
            pool.run(async |m: &mut Model| {
                tokio::time::sleep(Duration::from_millis(20)).await;
                m.square(n)
            })
            .await
        }));
    }
    let (mut done, mut rejected) = (0, 0);
    for j in jobs {
        match j.await? {
            Ok(_) => done += 1,
            Err(kennel::Error::Rejected { reason }) => {
                rejected += 1;
                if rejected == 1 {
                    println!("\n  a job was turned away at once: {reason}");
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    println!(
        "40 jobs of 20 ms at once on 4 workers (queue of 8 x 4): {done} done, {rejected} rejected, in {:?}",
        started.elapsed()
    );

    // A job that fails its worker: it is retired and replaced.
    pool.lend().await?.fail();
    tokio::time::sleep(Duration::from_millis(400)).await;

    pool.close().await;
    println!("\nevents, as a subscriber saw them:");
    while let Ok(e) = events.try_recv() {
        match &e {
            Event::Ready { slot, warmup, .. } => {
                println!("  {:<16} slot {slot} warm after {warmup:?}", e.name());
            }
            other => match other.slot() {
                Some(slot) => println!("  {:<16} slot {slot}", e.name()),
                None => println!("  {}", e.name()),
            },
        }
    }
    println!("\nclosed; stats: {:?}", pool.stats());
    Ok(())
}
