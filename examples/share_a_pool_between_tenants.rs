//! Share a pool between tenants: an interactive caller ("web", weight 3)
//! and a batch caller ("batch", weight 1, at most 8 jobs waiting) on one
//! pool of two workers. The batch floods the pool; web's jobs still get the
//! next free worker, the shares follow the weights while both wait, and
//! the batch's ninth waiting job is refused with its own projected wait.
//!
//! `cargo run -p kennel-examples --example share-a-pool-between-tenants`
//! (on paused time: the output is the same at each run).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kennel::{
    BoxError, Error, Fixed, Parallel, Pool, Priority, RunOptions, Tenant, TenantShare, Worker,
};
use tokio::time::Instant;

/// A worker that is ready at once.
struct Model;

impl Worker for Model {}

/// A job of 100 ms that notes whose it was.
async fn infer(order: &Mutex<Vec<&'static str>>, who: &'static str) {
    order.lock().unwrap().push(who);
    tokio::time::sleep(Duration::from_millis(100)).await;
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let web = Tenant::new("web")?;
    let batch = Tenant::new("batch")?;
    let shares = [
        (web.clone(), TenantShare::weight(3)),
        (batch.clone(), TenantShare::weight(1).max_queued(8)),
    ];
    let pool = Pool::builder(|_slot| async { Ok::<_, BoxError>(Model) })
        .startup(Parallel)
        .sizing(Fixed(2))
        .with_options(move |o| o.tenants = shares.into_iter().collect())
        .build()?;
    let order = Arc::new(Mutex::new(Vec::new()));

    // The batch floods: 10 jobs, low priority. Two run, eight wait; the
    // ninth waiting one is over its `max_queued`.
    let mut jobs = Vec::new();
    for _ in 0..10 {
        let (pool, order) = (pool.clone(), order.clone());
        let options = RunOptions::new()
            .tenant(batch.clone())
            .priority(Priority::Low);
        jobs.push(tokio::spawn(async move {
            pool.run_with(options, async |_: &mut Model| infer(&order, "batch").await)
                .await
        }));
        tokio::task::yield_now().await;
    }
    let refused = RunOptions::new().tenant(batch.clone());
    match pool.run_with(refused, async |_: &mut Model| ()).await {
        Err(Error::TenantLimit { retry_after, .. }) => {
            println!("batch's 11th job: refused, try again in {retry_after:?}");
        }
        other => println!("batch's 11th job: {other:?}"),
    }

    // Web sends 6 jobs while the batch waits: they go before the batch's
    // queue, which still gets a worker now and then (weights 3 to 1).
    let start = Instant::now();
    let mut web_jobs = Vec::new();
    for _ in 0..6 {
        let (pool, order) = (pool.clone(), order.clone());
        let options = RunOptions::new().tenant(web.clone());
        web_jobs.push(tokio::spawn(async move {
            pool.run_with(options, async |_: &mut Model| infer(&order, "web").await)
                .await
        }));
    }
    for job in web_jobs {
        job.await??;
    }
    println!("web's 6 jobs done in {:?}", start.elapsed());
    for job in jobs {
        job.await??;
    }
    println!("workers went to: {}", order.lock().unwrap().join(" "));
    for load in pool.tenants() {
        println!("still busy: {load:?}");
    }
    pool.close().await;
    Ok(())
}
