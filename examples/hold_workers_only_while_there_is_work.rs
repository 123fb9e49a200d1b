//! Hold workers only while there is work: `OnDemand` starts a worker when a
//! job needs one, and `IdleTimeout` lets it go once it has been idle for a
//! while, down to a floor of `keep(n)`. Between bursts the pool holds no
//! worker (or one), shows zeros, and is still healthy.
//!
//! `cargo run -p kennel-examples --example hold-workers-only-while-there-is-work`

use std::time::Duration;

use kennel::{BoxError, Event, Fixed, IdleTimeout, OnDemand, Pool, Stats, Worker};
use tokio::time::Instant;

/// A worker whose warm-up takes 100 ms.
struct Session;

impl Worker for Session {
    async fn ready(&mut self) -> Result<(), BoxError> {
        tokio::time::sleep(Duration::from_millis(100)).await;
        Ok(())
    }
}

fn show(when: &str, s: Stats) {
    println!(
        "  {when:<28} starting {} idle {} lent {} waiting {}  healthy: {}",
        s.starting,
        s.idle,
        s.lent,
        s.waiting,
        s.is_healthy()
    );
}

async fn burst_then_quiet(keep: usize) -> Result<(), Box<dyn std::error::Error>> {
    println!("OnDemand, Fixed(4), IdleTimeout 300 ms, keep({keep}):");
    let pool = Pool::builder(|_slot| async { Ok::<_, BoxError>(Session) })
        .startup(OnDemand)
        .sizing(Fixed(4))
        .eviction(IdleTimeout::new(Duration::from_millis(300))?.keep(keep))
        .build()?;
    let mut events = pool.events();
    show("built, no job yet", pool.stats());

    // A burst of 8 jobs of 50 ms.
    let mut jobs = Vec::new();
    for _ in 0..8 {
        let pool = pool.clone();
        jobs.push(tokio::spawn(async move {
            pool.run(async |_s: &mut Session| {
                tokio::time::sleep(Duration::from_millis(50)).await;
            })
            .await
        }));
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    show("burst of 8 jobs, 10 ms in", pool.stats());
    for job in jobs {
        job.await??;
    }
    show("burst done", pool.stats());

    tokio::time::sleep(Duration::from_millis(400)).await;
    show("idle for 400 ms", pool.stats());
    let evicted = std::iter::from_fn(|| events.try_recv().ok())
        .filter(|e| matches!(e, Event::Evicted { .. }))
        .count();
    println!("  worker:evicted events: {evicted}");

    let asked = Instant::now();
    pool.run(async |_s: &mut Session| ()).await?;
    println!(
        "  the next job got a worker after {} ms",
        asked.elapsed().as_millis()
    );
    pool.close().await;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    burst_then_quiet(0).await?;
    println!();
    burst_then_quiet(1).await?;
    Ok(())
}
