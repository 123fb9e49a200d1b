//! Bound the queue: turn jobs away at once rather than let them wait for
//! ever. `max_waiting` caps the queue, `max_queue_wait` refuses a job whose
//! projected wait is too long, `job_timeout` and `lend_timeout` cap the time
//! a job may hold or wait for a worker. Each error maps to a response a web
//! handler would send.
//!
//! `cargo run -p kennel-examples --example bound-the-queue`

use std::time::Duration;

use kennel::{BoxError, Error, Fixed, Parallel, Pool, PoolBuilder, RunOptions, Worker};

/// A worker that is ready at once.
struct Renderer;

impl Worker for Renderer {}

/// Two workers, started when the pool is built.
fn two_renderers() -> PoolBuilder<Renderer> {
    Pool::builder(|_slot| async { Ok::<_, BoxError>(Renderer) })
        .startup(Parallel)
        .sizing(Fixed(2))
}

/// A job of 100 ms.
async fn render(_r: &mut Renderer) -> &'static str {
    tokio::time::sleep(Duration::from_millis(100)).await;
    "rendered"
}

/// The HTTP answer your own handler would give for a pool error.
fn respond(e: &Error) -> String {
    let (status, retry_after) = match e {
        // Busy: come back soon.
        Error::Rejected { .. } | Error::LendTimeout { .. } => ("503 Service Unavailable", Some(1)),
        Error::Timeout { .. } => ("504 Gateway Timeout", None),
        Error::Crashed { .. } => ("502 Bad Gateway", None),
        Error::WarmupFailed { .. } | Error::Closed => ("503 Service Unavailable", None),
        _ => ("500 Internal Server Error", None),
    };
    let reason = match e {
        Error::Rejected { reason } => format!(", \"reason\": \"{}\"", reason.as_str()),
        _ => String::new(),
    };
    let retry = retry_after.map_or(String::new(), |s| format!(" Retry-After: {s}"));
    format!(
        "{status}{retry} {{\"error\": \"{}\"{reason}, \"message\": \"{e}\"}}",
        e.kind()
    )
}

/// Sends `n` jobs at once and prints what each got.
async fn burst(pool: &Pool<Renderer>, n: usize) -> Result<(), Box<dyn std::error::Error>> {
    let mut jobs = Vec::new();
    for _ in 0..n {
        let pool = pool.clone();
        // On this one-thread runtime, tasks first run in the order spawned.
        jobs.push(tokio::spawn(async move { pool.run(render).await }));
    }
    for (i, job) in jobs.into_iter().enumerate() {
        match job.await? {
            Ok(out) => println!("  job {i}: 200 OK {out}"),
            Err(e) => println!("  job {i}: {}", respond(&e)),
        }
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("max_waiting(3): 8 jobs at once on 2 workers; 2 run, 3 queue, 3 are turned away");
    let pool = two_renderers()
        .with_options(|o| o.max_waiting = Some(3))
        .build()?;
    burst(&pool, 8).await?;
    pool.close().await;

    println!("\nmax_queue_wait(275 ms), jobs of 100 ms on 2 workers:");
    println!("  projected wait = (jobs ahead + 1) / 2 x mean job time (about 100 ms)");
    let pool = two_renderers()
        .with_options(|o| o.max_queue_wait = Some(Duration::from_millis(275)))
        .build()?;
    // Two jobs teach the pool the mean job time.
    pool.run(render).await?;
    pool.run(render).await?;
    burst(&pool, 10).await?;
    pool.close().await;

    println!("\njob_timeout and lend_timeout:");
    let pool = two_renderers()
        .with_options(|o| o.job_timeout = Some(Duration::from_millis(150)))
        .build()?;
    let slow = pool
        .run(async |_r: &mut Renderer| tokio::time::sleep(Duration::from_secs(5)).await)
        .await;
    if let Err(e) = slow {
        println!("  a 5 s job with job_timeout 150 ms: {}", respond(&e));
    }
    // Per call: no time limit for this job.
    let long = pool
        .run_with(
            RunOptions::new().job_timeout(None),
            async |_r: &mut Renderer| {
                tokio::time::sleep(Duration::from_millis(200)).await;
                "done"
            },
        )
        .await?;
    println!("  a 200 ms job with job_timeout(None) for this call: 200 OK {long}");
    // Hold both workers, then ask for one with a short wait.
    let a = pool.lend().await?;
    let b = pool.lend().await?;
    let waited = pool.run_timeout(Duration::from_millis(50), render).await;
    if let Err(e) = waited {
        println!("  both workers lent, run_timeout(50 ms): {}", respond(&e));
    }
    drop((a, b));
    pool.close().await;
    Ok(())
}
