//! `retry_on_crash`: a job that may run twice runs again on another worker
//! when its worker crashed under it, up to the pool's limit; a job's own
//! error or a timeout is never retried.
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kennel::{Error, OnDemand, Pool};
use support::{Fake, Farm, count, drain, fixed, secs};

fn pool(farm: &Farm, retries: u32) -> Pool<Fake> {
    fixed(farm, OnDemand, 2)
        .with_options(|o| {
            o.retry_on_crash = retries;
            o.job_timeout = Some(secs(5));
        })
        .build()
        .unwrap()
}

/// A job whose first `crashes` attempts crash their worker; then it
/// returns the worker's id.
fn crashing(crashes: usize) -> (Arc<AtomicUsize>, impl AsyncFn(&mut Fake) -> usize) {
    let attempts = Arc::new(AtomicUsize::new(0));
    let seen = attempts.clone();
    let job = async move |w: &mut Fake| {
        if seen.fetch_add(1, Ordering::SeqCst) < crashes {
            w.crash();
            std::future::pending::<()>().await;
        }
        w.id
    };
    (attempts, job)
}

#[tokio::test(start_paused = true)]
async fn a_job_whose_worker_crashed_under_it_runs_again_on_another_worker() {
    let farm = Farm::new();
    let pool = pool(&farm, 2);
    let mut events = pool.events();
    let (attempts, job) = crashing(2);
    let id = pool.run_idempotent(job).await.unwrap();
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    assert!(farm.has_exited(0) && farm.has_exited(1));
    assert_eq!(id, 2, "the third worker answered");
    assert_eq!(count(&drain(&mut events), "job:retried"), 2);
}

#[tokio::test(start_paused = true)]
async fn the_last_crash_names_its_attempts() {
    let farm = Farm::new();
    let pool = pool(&farm, 2);
    let (attempts, job) = crashing(usize::MAX);
    let err = pool.run_idempotent(job).await.unwrap_err();
    assert!(matches!(err, Error::Crashed { attempts: 3, .. }), "{err:?}");
    assert!(err.to_string().contains("3 attempts"), "{err}");
    assert_eq!(attempts.load(Ordering::SeqCst), 3, "no more than allowed");
}

#[tokio::test(start_paused = true)]
async fn without_retry_on_crash_a_crash_fails_the_job_once() {
    let farm = Farm::new();
    let pool = pool(&farm, 0);
    let (attempts, job) = crashing(1);
    let err = pool.run_idempotent(job).await.unwrap_err();
    assert!(matches!(err, Error::Crashed { attempts: 1, .. }), "{err:?}");
    assert_eq!(err.to_string(), "worker failed before responding");
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_jobs_own_error_or_a_timeout_is_never_retried() {
    let farm = Farm::new();
    let pool = pool(&farm, 3);
    let attempts = AtomicUsize::new(0);
    let r = pool
        .run_idempotent(async |_w: &mut Fake| {
            attempts.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>("bad input")
        })
        .await;
    assert!(matches!(r, Ok(Err("bad input"))));
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
    let err = pool
        .run_idempotent(async |w: &mut Fake| w.work(secs(60)).await)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert_eq!(
        farm.made(),
        1,
        "the timed-out job did not run again on a new worker"
    );
}
