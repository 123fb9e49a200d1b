//! Time on the paused clock: let tasks run, move the clock, bound a
//! wait, and durations in short.

use std::time::Duration;

/// Lets every ready task run, without moving the clock.
pub async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

/// Moves the paused clock by `d`, letting tasks run before and after.
pub async fn advance(d: Duration) {
    settle().await;
    tokio::time::advance(d).await;
    settle().await;
}

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Awaits `fut` for at most `d` of the (paused) clock, and panics past it,
/// so that a test fails instead of hanging when the pool never answers.
pub async fn within<F: std::future::Future>(d: Duration, fut: F) -> F::Output {
    match tokio::time::timeout(d, fut).await {
        Ok(out) => out,
        Err(_) => panic!("not done within {d:?}"),
    }
}
