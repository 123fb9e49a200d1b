//! The body of a [`ThreadWorker`](super::ThreadWorker)'s thread: build the
//! state, then run jobs until the worker is closed, dropped, killed or a job
//! panics.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;

use kennel::{BoxError, ExitStatus};
use tokio::sync::oneshot;

use super::Shared;
use super::job::{Job, panic_message};

/// The body of the worker's thread.
pub(super) fn serve<S, F, E>(
    init: F,
    jobs: &mpsc::Receiver<Job<S>>,
    ready: oneshot::Sender<Result<(), BoxError>>,
    shared: &Shared,
) where
    F: FnOnce() -> Result<S, E>,
    E: Into<BoxError>,
{
    let init: Result<S, BoxError> = match catch_unwind(AssertUnwindSafe(init)) {
        Ok(result) => result.map_err(Into::into),
        Err(payload) => Err(format!("init panicked: {}", panic_message(payload.as_ref())).into()),
    };
    let mut state = match init {
        Ok(state) => state,
        Err(err) => {
            let message = err.to_string();
            let _ = shared.warmup_failed.set(message.clone());
            shared.exit(ExitStatus::Other(format!("warm-up failed: {message}")));
            let _ = ready.send(Err(err));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    // Ends when the worker drops its sender (close, drop), after a panic, or
    // after the worker was abandoned.
    while let Ok(job) = jobs.recv() {
        if shared.status().is_some() {
            break;
        }
        if let Err(message) = job(&mut state) {
            shared.exit(ExitStatus::Panicked(message));
            break;
        }
        if shared.status().is_some() {
            break;
        }
    }
    // The state may be half updated after a panic; dropping it must not take
    // the "finished" signal down with it.
    if catch_unwind(AssertUnwindSafe(move || drop(state))).is_err() {
        tracing::warn!("a thread worker's state panicked while it was dropped");
    }
    // The channel closed: the worker was closed or dropped. A crash or a kill
    // recorded before keeps its status.
    shared.exit(ExitStatus::Closed);
}
