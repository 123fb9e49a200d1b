//! Jobs on a pool of fakes: workers held, jobs, lends and closes spawned,
//! and calls that must answer at once.

use kennel::{Error, Lease, Pool, Worker};
use tokio::task::JoinHandle;

use super::clock::secs;
use super::fake::Fake;

/// Holds `n` workers of `pool`, lent one after the other.
pub async fn hold(pool: &Pool<Fake>, n: usize) -> Vec<Lease<Fake>> {
    let mut leases = Vec::with_capacity(n);
    for _ in 0..n {
        leases.push(pool.lend().await.unwrap());
    }
    leases
}

/// Spawns a job that runs on a worker of `pool` and returns that worker's id.
pub fn spawn_run_id(pool: &Pool<Fake>) -> JoinHandle<Result<usize, Error>> {
    let p = pool.clone();
    tokio::spawn(async move { p.run(async |w: &mut Fake| w.id).await })
}

/// Spawns a job that runs on a worker of `pool` and returns that worker's
/// slot.
pub fn spawn_run_slot(pool: &Pool<Fake>) -> JoinHandle<Result<usize, Error>> {
    let p = pool.clone();
    tokio::spawn(async move { p.run(async |w: &mut Fake| w.slot).await })
}

/// Spawns a job that lends a worker of `pool`, gives it back at once and
/// returns the slot it was lent from.
pub fn spawn_lend_slot(pool: &Pool<Fake>) -> JoinHandle<Result<usize, Error>> {
    let p = pool.clone();
    tokio::spawn(async move { p.lend().await.map(|l| l.slot()) })
}

/// Spawns a job that lends a worker of `pool`, gives it back at once and
/// returns its id.
pub fn spawn_lend_id(pool: &Pool<Fake>) -> JoinHandle<Result<usize, Error>> {
    let p = pool.clone();
    tokio::spawn(async move { p.lend().await.map(|l| l.id) })
}

/// Spawns a close of `pool`; the task ends when the pool has closed.
pub fn spawn_close<W: Worker>(pool: &Pool<W>) -> JoinHandle<()> {
    let p = pool.clone();
    tokio::spawn(async move { p.close().await })
}

/// The answer of a call that must not wait (a refusal, never a queue).
pub async fn at_once<F: std::future::Future>(call: F) -> F::Output {
    tokio::time::timeout(secs(1), call)
        .await
        .expect("answered at once, not queued")
}
