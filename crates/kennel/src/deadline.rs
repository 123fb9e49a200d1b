//! A job's deadlines: the soft `job_timeout` (moved by heartbeats when the
//! pool says so), the hard `job_kill_after`, and the worker's end, raced
//! against the job.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// How a job's race ended.
pub(crate) enum End<R> {
    /// The job returned.
    Done(R),
    /// The soft limit passed (`job_timeout`): the worker may be asked to
    /// cancel.
    TimedOut(Duration),
    /// The hard limit passed (`job_kill_after`): the worker is killed.
    KillAfter(Duration),
    /// The worker ended under the job.
    Died,
}

/// The limits of one job.
pub(crate) struct Limits {
    /// `job_timeout`, for this call.
    pub(crate) soft: Option<Duration>,
    /// `job_kill_after`.
    pub(crate) hard: Option<Duration>,
    /// The worker's heartbeat, when beats move the soft deadline.
    pub(crate) beats: Option<watch::Receiver<u64>>,
}

impl Limits {
    /// When the hard limit falls, for a job that started at `start`.
    pub(crate) fn hard_at(&self, start: Instant) -> Option<Instant> {
        self.hard.map(|d| start + d)
    }
}

/// Runs `job` until it returns, the worker dies or a limit passes.
pub(crate) async fn race<R>(
    job: impl Future<Output = R>,
    died: impl Future<Output = ()>,
    limits: Limits,
    start: Instant,
) -> End<R> {
    match limits {
        // The common cases first, as they always ran: no limit, or one
        // fixed limit.
        Limits {
            soft: None,
            hard: None,
            ..
        } => tokio::select! {
            biased;
            r = job => End::Done(r),
            () = died => End::Died,
        },
        Limits {
            soft: Some(d),
            hard: None,
            beats: None,
        } => tokio::select! {
            biased;
            r = tokio::time::timeout(d, job) => r.map_or(End::TimedOut(d), End::Done),
            () = died => End::Died,
        },
        Limits { soft, hard, beats } => moving(job, died, soft, hard, beats, start).await,
    }
}

async fn moving<R>(
    job: impl Future<Output = R>,
    died: impl Future<Output = ()>,
    soft: Option<Duration>,
    hard: Option<Duration>,
    mut beats: Option<watch::Receiver<u64>>,
    start: Instant,
) -> End<R> {
    tokio::pin!(job, died);
    let soft_sleep = tokio::time::sleep_until(soft.map_or(start, |d| start + d));
    let hard_sleep = tokio::time::sleep_until(hard.map_or(start, |d| start + d));
    tokio::pin!(soft_sleep, hard_sleep);
    loop {
        let beat = async {
            match beats.as_mut() {
                Some(rx) => rx.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            r = &mut job => return End::Done(r),
            () = &mut soft_sleep, if soft.is_some() => {
                return End::TimedOut(soft.unwrap_or_default());
            }
            () = &mut hard_sleep, if hard.is_some() => {
                return End::KillAfter(hard.unwrap_or_default());
            }
            () = &mut died => return End::Died,
            alive = beat => {
                match (alive, soft) {
                    (true, Some(d)) => soft_sleep.as_mut().reset(Instant::now() + d),
                    // The worker dropped its heartbeat: no more beats.
                    _ => beats = None,
                }
            }
        }
    }
}
