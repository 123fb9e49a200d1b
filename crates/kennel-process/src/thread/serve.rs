//! The side of a [`ThreadWorker`](super::ThreadWorker) that runs on its
//! thread: the body, and a job as it receives it.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, mpsc};

use kennel::{BoxError, ExitStatus};
use tokio::sync::oneshot;

use super::Shared;

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
            shared
                .exit
                .exit(ExitStatus::Other(format!("warm-up failed: {message}")));
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
            shared.exit.exit(ExitStatus::Panicked(message));
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
    shared.exit.exit(ExitStatus::Closed);
}

/// A job as the thread receives it: runs on the state, sends its own result,
/// and returns the panic message if it panicked.
pub(super) type Job<S> = Box<dyn FnOnce(&mut S) -> Result<(), String> + Send + 'static>;

/// Wraps `job` for the thread, and returns the receiver of its result: its
/// value, or the panic message if it panicked (then `shared` has recorded
/// [`ExitStatus::Panicked`] before the message is sent).
pub(super) fn wrap<S, F, R>(
    job: F,
    shared: Arc<Shared>,
) -> (Job<S>, oneshot::Receiver<Result<R, String>>)
where
    F: FnOnce(&mut S) -> R + Send + 'static,
    R: Send + 'static,
{
    let (result_tx, result_rx) = oneshot::channel::<Result<R, String>>();
    let job: Job<S> = Box::new(move |state: &mut S| {
        match catch_unwind(AssertUnwindSafe(|| job(state))) {
            Ok(value) => {
                // The caller may have gone; then the result is dropped.
                let _ = result_tx.send(Ok(value));
                Ok(())
            }
            Err(payload) => {
                let message = panic_message(payload.as_ref());
                // The exit first: when the caller sees `Crashed`, the
                // worker has already ended.
                shared.exit.exit(ExitStatus::Panicked(message.clone()));
                let _ = result_tx.send(Err(message.clone()));
                Err(message)
            }
        }
    });
    (job, result_rx)
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(message) = payload.downcast_ref::<&str>() {
        (*message).to_owned()
    } else if let Some(message) = payload.downcast_ref::<String>() {
        message.clone()
    } else {
        "the panic carried no message".to_owned()
    }
}
