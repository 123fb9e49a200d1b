//! The four startups side by side: which slot starts when.
//!
//! `cargo run -p kennel-examples --example startups`

use std::time::Duration;

use kennel::{
    BoxError, Event, Fixed, LeaderFirst, OnDemand, OrderedReady, Parallel, Pool, Startup, Worker,
};
use tokio::time::Instant;

struct Slow;

impl Worker for Slow {
    async fn ready(&mut self) -> Result<(), BoxError> {
        tokio::time::sleep(Duration::from_millis(200)).await;
        Ok(())
    }
}

async fn show(name: &str, startup: impl Startup) -> Result<(), Box<dyn std::error::Error>> {
    let t0 = Instant::now();
    let pool = Pool::builder(|_slot| async { Ok::<_, BoxError>(Slow) })
        .startup(startup)
        .sizing(Fixed(3))
        .build()?;
    let mut events = pool.events();
    // Note when each slot starts, as the events arrive.
    let watcher = tokio::spawn(async move {
        let mut starts = Vec::new();
        while let Ok(e) = events.recv().await {
            if let Event::Starting { slot } = e {
                starts.push((slot, t0.elapsed()));
            }
        }
        starts
    });
    if name == "OnDemand" {
        // Nothing starts until a job needs a worker.
        pool.run(async |_w: &mut Slow| ()).await?;
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    pool.close().await;
    drop(pool);
    println!("{name}:");
    for (slot, at) in watcher.await? {
        // Rounded to 10 ms: warm-ups take 200 ms.
        println!("  slot {slot} starts at {:>4} ms", at.as_millis() / 10 * 10);
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    show("OnDemand", OnDemand).await?;
    show("Parallel", Parallel).await?;
    show("OrderedReady", OrderedReady).await?;
    show("LeaderFirst", LeaderFirst).await?;
    Ok(())
}
