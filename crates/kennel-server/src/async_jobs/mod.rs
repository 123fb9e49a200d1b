//! Asynchronous jobs: `POST /pools/{name}/jobs` with `Prefer:
//! respond-async` is stored, answered 202 with its id and `Location:
//! /jobs/{id}`, and run when the pool has a worker for it; `GET /jobs/{id}`
//! says where it stands (and, once done, the worker's reply as written);
//! `DELETE /jobs/{id}` cancels it. The store is one SQLite file in the
//! server's `state_dir` ([`store`]), written before the 202, so accepted
//! jobs outlive a connection and a restart of kennel: at start, queued jobs
//! run again, and a job that was running is run again where its pool says
//! its jobs may run twice (`retry_on_crash`), else failed `interrupted`.
//!
//! The file is made on the first asynchronous job; a server that never
//! takes one writes nothing. A pool with `[pool.queue]` keeps its jobs in
//! JetStream instead ([`crate::queue::record`]); the routes read either.

pub(crate) mod routes;
mod runner;
mod store;

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub(crate) use self::routes::{JobView, accept, cancel_job, get_job, job_events, prefers_async};
use self::runner::Runner;
pub(crate) use self::store::JobState;
use self::store::{Store, StoreError};
use crate::state::AppState;

/// The most jobs the store keeps (queued, running and ended within
/// `result_ttl`); an asynchronous job beyond it is answered 503.
pub(crate) const MAX_STORED_JOBS: usize = 100_000;

/// How often ended jobs past `result_ttl` are forgotten.
const EXPIRE_EVERY: Duration = Duration::from_secs(60);

/// The service's asynchronous jobs: where the store lives, and, once
/// opened, the store and its runner.
pub(crate) struct AsyncJobs {
    dir: Option<PathBuf>,
    pub(crate) result_ttl: Duration,
    runner: OnceLock<Result<Arc<Runner>, StoreError>>,
}

impl AsyncJobs {
    /// Jobs stored in `dir`, their results kept for `result_ttl`.
    pub(crate) fn new(dir: Option<PathBuf>, result_ttl: Duration) -> Self {
        Self {
            dir,
            result_ttl,
            runner: OnceLock::new(),
        }
    }

    /// At start: if a store is there, opens it, takes back the jobs a
    /// stopped server left, and starts running them.
    pub(crate) fn resume(&self, state: &AppState) {
        let _ = self.existing(state);
    }

    /// Looks at the stored jobs again, if there is a store open (after a
    /// reload: a pool taken out, or one added).
    pub(crate) fn wake(&self) {
        if let Some(Ok(runner)) = self.runner.get() {
            runner.wake();
        }
    }

    /// The runner if there is a store (opened, or a file to open): reading
    /// a job never makes one.
    pub(crate) fn existing(&self, state: &AppState) -> Option<Result<Arc<Runner>, StoreError>> {
        let file = self
            .dir
            .as_ref()
            .is_some_and(|d| d.join("jobs.sqlite3").exists());
        (self.runner.get().is_some() || file).then(|| self.runner(state))
    }

    /// The runner, the store opened (and its jobs recovered) on first use.
    pub(crate) fn runner(&self, state: &AppState) -> Result<Arc<Runner>, StoreError> {
        self.runner
            .get_or_init(|| {
                let dir = self.dir.as_ref().ok_or("asynchronous jobs need a state directory (AppStateBuilder::state_dir)")?;
                let store = Store::open(dir)?;
                let rerun = |pool: &str| {
                    state
                        .pools()
                        .get(pool)
                        .is_ok_and(|p| p.options().retry_on_crash > 0)
                };
                let (again, failed) = store.recover(rerun)?;
                if again + failed > 0 {
                    tracing::warn!(again, failed, "jobs that were running when kennel stopped: run again where their pool allows, else failed `interrupted`");
                }
                let runner = Arc::new(Runner::new(store));
                tokio::spawn(Arc::clone(&runner).run(state.clone()));
                let (expiring, ttl) = (runner.store.clone(), self.result_ttl);
                tokio::spawn(async move {
                    let mut tick = tokio::time::interval(EXPIRE_EVERY);
                    loop {
                        tick.tick().await;
                        if let Err(e) = expiring.expire(ttl) {
                            tracing::error!(%e, "forgetting old jobs failed");
                        }
                    }
                });
                runner.wake();
                Ok(runner)
            })
            .clone()
    }
}
