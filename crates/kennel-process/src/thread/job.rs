//! A job as a [`ThreadWorker`](super::ThreadWorker)'s thread receives it:
//! the caller's closure, run on the state, its result sent back, a panic
//! caught and recorded as the worker's end.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use kennel::ExitStatus;
use tokio::sync::oneshot;

use super::Shared;

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
                shared.exit(ExitStatus::Panicked(message.clone()));
                let _ = result_tx.send(Err(message.clone()));
                Err(message)
            }
        }
    });
    (job, result_rx)
}

pub(super) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(message) = payload.downcast_ref::<&str>() {
        (*message).to_owned()
    } else if let Some(message) = payload.downcast_ref::<String>() {
        message.clone()
    } else {
        "the panic carried no message".to_owned()
    }
}
