//! A worker that ends under a job leaves the job's error to the pool: one
//! crash, one type (`kennel::Error::Crashed`, with the worker's exit and
//! last words), whatever the worker.

use std::time::Duration;

/// How long a worker whose end a pool watches waits, once it has seen its
/// own end under a job, for the pool to fail the job with its crash. The
/// pool does so as soon as its watcher has seen the exit, well within it;
/// past it (a worker held through a bare `Lease`, whose job no pool
/// races), the worker's own `Crashed` is returned.
pub(crate) const POOL_REPORT_WAIT: Duration = Duration::from_secs(1);

/// Waits [`POOL_REPORT_WAIT`] when a pool watches the worker's end
/// (`watched`: it took [`Worker::exited`](kennel::Worker::exited)), so that
/// a job the pool runs fails with the pool's `Error::Crashed` instead of
/// the worker's own error; at once otherwise.
///
/// # Cancel safety
///
/// Cancel safe: it only waits.
pub(crate) async fn leave_to_pool(watched: bool) {
    if watched {
        tokio::time::sleep(POOL_REPORT_WAIT).await;
    }
}
