//! A worker that ends under a job leaves the job's error to the pool: one
//! crash, one type (`kennel::Error::Crashed`, with the worker's exit and
//! last words), whatever the worker.

use std::time::Duration;

/// How long a worker whose end a pool watches waits, once it saw its own
/// end under a job, for the pool to fail the job with its crash (the pool's
/// watcher sees the exit well within it; a bare `Lease` never does).
pub(crate) const POOL_REPORT_WAIT: Duration = Duration::from_secs(1);

/// Waits [`POOL_REPORT_WAIT`] when a pool watches the worker's end
/// (`watched`), at once otherwise.
///
/// # Cancel safety
///
/// Cancel safe: it only waits.
pub(crate) async fn leave_to_pool(watched: bool) {
    if watched {
        tokio::time::sleep(POOL_REPORT_WAIT).await;
    }
}
