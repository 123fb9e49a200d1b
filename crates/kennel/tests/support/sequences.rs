//! What the random-sequence suites (`*_properties.rs`) share: how many
//! sequences to draw, a runtime on the paused clock, a reconfiguration in
//! one call (the eviction and the recycling among them, and a draw of
//! either: [`Churn`]), a job that may be
//! dropped midway, the wait for every job to end, and the last check of
//! the pool before it closes.

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

/// An eviction to set: idle workers evicted after 100 ms to 5 s, keeping
/// up to 2 with `min_idle`, or none.
pub fn eviction() -> impl proptest::strategy::Strategy<Value = Option<(u16, Option<usize>)>> {
    use proptest::prelude::*;
    prop::option::of((100u16..5000, prop::option::of(0usize..3)))
}

/// How the pool lets workers go, changed live, for the suites that do not
/// vary it finer.
#[derive(Debug, Clone)]
pub enum Churn {
    /// Idle workers evicted after so many ms (and `min_idle` kept), or
    /// never.
    Eviction(Option<(u16, Option<usize>)>),
    /// Workers retired after so many seconds or jobs, replaced warm with a
    /// surge of so many.
    Recycle(Option<u16>, Option<u64>, usize),
}

/// A churn to set, an eviction or a recycling as likely, lifetimes from
/// `min_life` seconds.
pub fn churn(min_life: u16) -> impl proptest::strategy::Strategy<Value = Churn> {
    use proptest::prelude::*;
    prop_oneof![
        eviction().prop_map(Churn::Eviction),
        (
            prop::option::of(min_life..30),
            prop::option::of(1u64..10),
            0usize..=2
        )
            .prop_map(|(life, jobs, surge)| Churn::Recycle(life, jobs, surge)),
    ]
}

/// Sets `churn` on `pool`.
pub fn set_churn<W: Worker>(pool: &Pool<W>, churn: &Churn) -> Result<(), String> {
    match *churn {
        Churn::Eviction(idle) => evict(pool, idle),
        Churn::Recycle(life, jobs, surge) => recycle(pool, life, jobs, surge),
    }
}

/// Retires the workers of `pool` after `life` seconds or `jobs` jobs (or
/// neither), replaced warm with a surge of `surge`.
pub fn recycle<W: Worker>(
    pool: &Pool<W>,
    life: Option<u16>,
    jobs: Option<u64>,
    surge: usize,
) -> Result<(), String> {
    let life = life.map(|s| Duration::from_secs(s.into()));
    set(pool, move |o| {
        o.max_lifetime = life;
        o.max_jobs = jobs;
        o.max_surge = surge;
    })
}

/// Checks that `pool` holds no job, lent or waiting, closes it, and checks
/// that none of its workers is `alive` after.
pub async fn close_empty<W: Worker>(
    pool: &Pool<W>,
    alive: impl Fn() -> usize,
) -> Result<(), String> {
    let s = pool.stats();
    if s.lent != 0 || s.waiting != 0 {
        return Err(format!("the pool ends with jobs in it: {s:?}"));
    }
    pool.close().await;
    match alive() {
        0 => Ok(()),
        n => Err(format!("{n} workers alive after close")),
    }
}
