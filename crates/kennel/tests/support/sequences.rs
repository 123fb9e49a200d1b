//! What the random-sequence suites (`*_properties.rs`) share: how many
//! sequences to draw, a runtime on the paused clock, a reconfiguration in
//! one call, a job that may be dropped midway, and the wait for every job
//! to end.

use std::future::Future;
use std::time::Duration;

use kennel::{IdleTimeout, NoEviction, Options, Pool, Reconfig, Worker};
use tokio::task::JoinHandle;

/// How long the pool has, once a sequence is over, to end every job.
pub const DRAIN: Duration = Duration::from_secs(3600);

/// A job of a sequence: `Ok`, or what it ended with that it should not.
pub type Ended = JoinHandle<Result<(), String>>;

/// `PROPTEST_CASES`, else `default`.
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// A runtime for one sequence, on the paused clock.
pub fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime")
}

/// Reconfigures the options of `pool` with `f`.
pub fn set<W: Worker>(
    pool: &Pool<W>,
    f: impl FnOnce(&mut Options) + Send + 'static,
) -> Result<(), String> {
    pool.reconfigure(Reconfig::new().with_options(f))
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Evicts the idle workers of `pool` after `idle` ms, keeping `min_idle`,
/// or never.
pub fn evict<W: Worker>(pool: &Pool<W>, idle: Option<(u16, Option<usize>)>) -> Result<(), String> {
    let r = match idle {
        Some((ms, min_idle)) => {
            let after = Duration::from_millis(ms.into());
            Reconfig::new()
                .eviction(IdleTimeout::new(after).map_err(|e| e.to_string())?)
                .with_options(move |o| o.min_idle = min_idle)
        }
        None => Reconfig::new().eviction(NoEviction),
    };
    pool.reconfigure(r).map(drop).map_err(|e| e.to_string())
}

/// Runs `job` on a task of its own; dropped after `drop_ms` if set
/// (whatever it was doing then, it ended well).
pub fn spawn_job(
    job: impl Future<Output = Result<(), String>> + Send + 'static,
    drop_ms: Option<u16>,
) -> Ended {
    tokio::spawn(async move {
        match drop_ms {
            Some(ms) => {
                let limit = Duration::from_millis(ms.into());
                tokio::time::timeout(limit, job).await.unwrap_or(Ok(()))
            }
            None => job.await,
        }
    })
}

/// Waits, on the pool's clock, for every job to end: an error names the
/// first that ended badly, or says that some never ended within [`DRAIN`].
pub async fn all_end(jobs: Vec<Ended>) -> Result<(), String> {
    let all = async {
        for job in jobs {
            job.await.map_err(|e| format!("a job panicked: {e}"))??;
        }
        Ok::<(), String>(())
    };
    tokio::time::timeout(DRAIN, all)
        .await
        .map_err(|_| format!("jobs still not ended {DRAIN:?} after the sequence"))?
}
