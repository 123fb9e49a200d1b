//! Benchmarks of kennel against its peers; see `docs/BENCHMARKS.md`. The
//! bench targets are in this package's `benches/`; what they share is here.

use kennel::{BoxError, Worker};

/// A worker that does nothing: what a lend and return costs by itself.
#[derive(Debug)]
pub struct Noop;

impl Noop {
    /// A new worker, for a pool's factory.
    ///
    /// # Errors
    ///
    /// None: the `Result` is the factory's shape.
    pub fn make() -> Result<Self, BoxError> {
        Ok(Self)
    }
}

impl Worker for Noop {}

/// A pool of one `Coprocess` of `spec`, started at once, once its worker is
/// ready: the echo benches' pool.
///
/// # Panics
///
/// If the pool cannot be built (its options are fixed here).
///
/// # Cancel safety
///
/// Dropping the future while it waits for the worker drops the pool, which
/// ends the worker.
pub async fn echo_pool(
    spec: kennel_process::CoprocessSpec,
) -> kennel::Pool<kennel_process::Coprocess> {
    let pool = kennel::Pool::builder(move |_| {
        let spec = spec.clone();
        async move { spec.spawn() }
    })
    .startup(kennel::Parallel)
    .sizing(kennel::Fixed(1))
    .build()
    .expect("a pool of one worker");
    while pool.stats().idle < 1 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    pool
}
