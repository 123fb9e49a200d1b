//! Running a job on a lent worker: its time limit, its worker's end, and
//! the errors of a job that returns a `Result`.

use std::time::Duration;

use tokio::time::Instant;

use crate::cancel::settle;
use crate::deadline::{End, Limits, race};
use crate::error::Error;
use crate::event::{Event, RetireReason};
use crate::lease::{InFlight, Lease};
use crate::pool::Pool;
use crate::worker::Worker;

/// Per-call limits for [`Pool::run_with`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use]
pub struct RunOptions {
    pub(crate) lend_timeout: Option<Duration>,
    pub(crate) job_timeout: Option<Option<Duration>>,
    pub(crate) key: Option<crate::Key>,
    pub(crate) tenant: Option<crate::Tenant>,
    pub(crate) priority: crate::Priority,
}

impl RunOptions {
    /// No per-call limits: the pool's defaults apply.
    pub fn new() -> Self {
        Self::default()
    }

    /// Waits at most `d` for a worker.
    pub fn lend_timeout(mut self, d: Duration) -> Self {
        self.lend_timeout = Some(d);
        self
    }

    /// Overrides the pool's `job_timeout` for this call (`None`: no limit).
    pub fn job_timeout(mut self, d: Option<Duration>) -> Self {
        self.job_timeout = Some(d);
        self
    }

    /// Runs the job on a worker that holds `key` (a model, a workspace, a
    /// session): one that holds it already if there is one, else one that
    /// loads it first (the pool's `key_binding`).
    pub fn key(mut self, key: crate::Key) -> Self {
        self.key = Some(key);
        self
    }

    /// Runs the job as `tenant`: while workers are scarce, they go to the
    /// tenants in proportion to their weights (the pool's
    /// [`tenants`](crate::Options::tenants)), and the tenant's limits there
    /// apply.
    pub fn tenant(mut self, tenant: crate::Tenant) -> Self {
        self.tenant = Some(tenant);
        self
    }

    /// Runs the job at `priority` within its tenant (default
    /// [`Normal`](crate::Priority::Normal)).
    pub fn priority(mut self, priority: crate::Priority) -> Self {
        self.priority = priority;
        self
    }

    /// What the job asks the pool for.
    pub(crate) fn ask(&self) -> crate::dispatch::Ask {
        crate::dispatch::Ask {
            key: self.key.clone(),
            class: crate::dispatch::Class {
                tenant: self.tenant.clone(),
                priority: self.priority,
            },
        }
    }
}

/// The error of [`Pool::try_run`](crate::Pool::try_run): the pool's, or
/// the job's own.
#[derive(Debug, thiserror::Error)]
pub enum JobError<E> {
    /// The job did not get a worker, or lost it.
    #[error(transparent)]
    Pool(Error),
    /// The job ran and returned this error.
    #[error("the job failed: {0}")]
    Job(#[source] E),
}

/// Runs `job` on a lent worker: the job timeout applies (a worker that can
/// cancel is asked to, else killed; `job_kill_after` kills), the worker's
/// end fails the job as crashed, and a drop mid-job cancels or kills the
/// worker. Also says whether the worker ended under the job, though the
/// job returned (a worker that saw its own end, as a child process whose
/// pipe closed).
pub(crate) async fn run_seen<W: Worker, R>(
    lease: Lease<W>,
    job_timeout: Option<Option<Duration>>,
    job: impl AsyncFnOnce(&mut W) -> R,
) -> (Result<R, Error>, bool) {
    let (soft, hard, beats) = (
        job_timeout.unwrap_or(lease.limits.job_timeout),
        lease.limits.job_kill_after,
        lease.limits.progress_extends_timeout,
    );
    let start = Instant::now();
    let beats = match (soft, beats) {
        (Some(_), true) => lease.heartbeat().map(|h| h.subscribe()),
        _ => None,
    };
    let limits = Limits { soft, hard, beats };
    let hard_at = hard.map(|d| start + d);
    let cell = lease.cell.clone();
    let mut job_guard = InFlight::new(lease);
    let end = race(job(&mut job_guard), cell.died(), limits, start).await;
    let lease = job_guard.disarm();
    match end {
        End::Done(r) => {
            let ended = lease.has_exited() || !lease.is_alive();
            drop(lease);
            (Ok(r), ended)
        }
        End::TimedOut(after) => {
            lease.engine.timed_out(lease.slot, after);
            // A worker that can cancel is asked to, and may stay.
            settle(lease, RetireReason::Timeout, hard_at);
            (Err(Error::Timeout { after }), false)
        }
        End::KillAfter(after) => {
            lease.engine.timed_out(lease.slot, after);
            lease.retire(RetireReason::Timeout);
            (Err(Error::Timeout { after }), false)
        }
        End::Died => {
            let engine = lease.engine.clone();
            drop(lease);
            let err = if engine.lock().closed {
                Error::Closed
            } else {
                Error::Crashed {
                    exit: cell.exit().map(Box::new),
                    attempts: 1,
                }
            };
            (Err(err), false)
        }
    }
}

impl<W: Worker> Lease<W> {
    /// Runs `job` on this lent worker as [`Pool::run`] runs it once lent:
    /// with the pool's `job_timeout`, the worker's end failing the job as
    /// crashed. For a caller that chose its worker itself (say, the first
    /// of several pools that could lend at once).
    ///
    /// # Errors
    ///
    /// As [`Pool::run`] once the job runs.
    ///
    /// # Cancel safety
    ///
    /// As [`Pool::run`]: dropping the future mid-job cancels or kills the
    /// worker.
    pub async fn run<R>(self, job: impl AsyncFnOnce(&mut W) -> R) -> Result<R, Error> {
        run_seen(self, None, job).await.0
    }
}

/// The ways to run a job that returns a `Result` or may run twice.
impl<W: Worker> Pool<W> {
    /// As [`run`](Pool::run), for a job that may run more than once: when
    /// its worker crashes under it (it ends during the job, whether the pool
    /// saw the end first or the job returned with it; not a job's own error
    /// from a live worker, nor a timeout), the job runs again on another
    /// worker, up to the pool's `retry_on_crash` times, with a `job:retried`
    /// event for each. When the pool saw the last crash, its error says how
    /// many attempts were made; when the job returned, its own result is
    /// given.
    ///
    /// # Errors
    ///
    /// As [`run`](Pool::run); [`Error::Crashed`] with `attempts` above 1
    /// when every attempt's worker crashed.
    ///
    /// # Cancel safety
    ///
    /// As [`run`](Pool::run): dropping the future mid-job kills that
    /// attempt's worker, and no further attempt is made.
    pub async fn run_idempotent<R>(&self, job: impl AsyncFn(&mut W) -> R) -> Result<R, Error> {
        self.run_idempotent_with(RunOptions::new(), job).await
    }

    /// As [`run_idempotent`](Pool::run_idempotent), with per-call limits
    /// and key ([`RunOptions`]), which apply to each attempt.
    ///
    /// # Errors
    ///
    /// As [`run_idempotent`](Pool::run_idempotent), and
    /// [`Error::LendTimeout`] when a lend timeout was given and ended.
    ///
    /// # Cancel safety
    ///
    /// As [`run_idempotent`](Pool::run_idempotent).
    pub async fn run_idempotent_with<R>(
        &self,
        options: RunOptions,
        job: impl AsyncFn(&mut W) -> R,
    ) -> Result<R, Error> {
        let retries = self.options().retry_on_crash;
        let mut attempt = 1;
        loop {
            let lease = self.lend_with(&options).await?;
            let cell = lease.cell.clone();
            let (result, ended) = run_seen(lease, options.job_timeout, &job).await;
            let exit = match result {
                Ok(_) if ended && attempt <= retries => cell.exit(),
                Err(Error::Crashed { exit, .. }) if attempt <= retries => exit.map(|e| *e),
                Err(Error::Crashed { exit, .. }) => {
                    return Err(Error::Crashed {
                        exit,
                        attempts: attempt,
                    });
                }
                other => return other,
            };
            attempt += 1;
            self.engine().emit(Event::Retried { attempt, exit });
        }
    }

    /// As [`run`](Pool::run), for a job that returns a `Result`: one `?`
    /// gives the job's value, and the error says whether the pool or the
    /// job failed.
    ///
    /// ```
    /// # async fn demo(pool: kennel::Pool<impl kennel::Worker>) -> Result<(), Box<dyn std::error::Error>> {
    /// let n: u32 = pool.try_run(async |_w| "42".parse::<u32>()).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`JobError::Pool`] with the pool's error as [`run`](Pool::run) has
    /// it; [`JobError::Job`] with the job's own error.
    ///
    /// # Cancel safety
    ///
    /// As [`run`](Pool::run).
    pub async fn try_run<T, E>(
        &self,
        job: impl AsyncFnOnce(&mut W) -> Result<T, E>,
    ) -> Result<T, JobError<E>> {
        self.run(job)
            .await
            .map_err(JobError::Pool)?
            .map_err(JobError::Job)
    }
}
