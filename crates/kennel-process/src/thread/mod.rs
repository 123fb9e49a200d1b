//! [`ThreadWorker`]: a dedicated OS thread that holds state.
//!
//! The worker's handle is here; what runs on its thread is in `serve.rs`.

use std::fmt;
use std::marker::PhantomData;
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};

use kennel::{BoxError, Exit, ExitSignal, ExitStatus, Exited, Killer, Worker};
use tokio::sync::oneshot;

use crate::error::ThreadError;

mod serve;

use serve::{Job, serve};

/// A worker that is one dedicated OS thread, holding state that it built
/// itself, and running jobs on it one at a time.
///
/// Use it for CPU-bound work that must not block the async runtime: a job
/// runs on the worker's own thread, and the task that awaits
/// [`run`](Self::run) just waits for a message.
///
/// - [`spawn`](Self::spawn) starts the thread and runs the init function on
///   it: that is the warm-up. The state is built once per worker and never
///   leaves its thread, so it need not be `Send` (an `Rc`, a handle of a C
///   library, a model).
/// - [`run`](Self::run) runs a job on the thread; a job that panics ends
///   the worker ([`ExitStatus::Panicked`]: the state is dropped).
/// - In a pool, a freed worker reaches the next job through the async
///   runtime: for jobs of microseconds sent by many tasks, give the pool as
///   many workers as jobs run at once; otherwise, as many as cores.
///
/// # A thread cannot be killed
///
/// Rust has no way to stop a thread from outside. [`kill`](Self::kill) (the
/// pool's kill switch, on a timeout or an abort) marks the worker as
/// abandoned: [`exited`](Self::exited) resolves at once with
/// [`ExitStatus::Killed`] and every later [`run`](Self::run) fails. A
/// running job goes on until it returns (its result dropped); then the
/// thread ends, dropping its state (an idle one ends when the
/// `ThreadWorker` is dropped). A job that never returns keeps its thread
/// and CPU: give long jobs a way to stop by themselves (a deadline, a
/// cancel flag).
///
/// The thread enters the Tokio runtime that spawned it (if any), so a job
/// can use [`tokio::runtime::Handle::current`], e.g. to spawn a task or
/// `block_on` a future.
///
/// # Example
///
/// ```
/// use kennel_process::ThreadWorker;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// // Warm-up: build a table of squares once, on the worker's own thread.
/// let mut worker = ThreadWorker::spawn(|| {
///     Ok::<_, std::io::Error>((0..1000u64).map(|n| n * n).collect::<Vec<_>>())
/// })?;
/// worker.ready().await?;
/// let sum = worker.run(|squares| squares[..10].iter().sum::<u64>()).await?;
/// assert_eq!(sum, 285);
/// worker.close().await;
/// # Ok(()) }
/// ```
pub struct ThreadWorker<S> {
    jobs: Option<mpsc::Sender<Job<S>>>,
    /// The outcome of the warm-up, until it is read.
    ready: Option<oneshot::Receiver<Result<(), BoxError>>>,
    shared: Arc<Shared>,
    /// Fires (by being dropped) when the thread has ended.
    finished: Option<oneshot::Receiver<()>>,
    thread_id: std::thread::ThreadId,
    /// A pool watches the end ([`Worker::exited`] was called): a job that
    /// panics leaves its error to it (`kennel::Error::Crashed`).
    watched: bool,
    // The state lives on the thread only; the worker is Send whatever `S` is.
    _state: PhantomData<fn() -> S>,
}

/// What the worker and its thread share: the exit, first one wins.
#[derive(Debug)]
struct Shared {
    exit: ExitSignal,
    /// Why the warm-up failed: set by the thread before it records the
    /// exit, or by the worker when the thread ended without a word.
    warmup_failed: OnceLock<String>,
}

impl Shared {
    fn status(&self) -> Option<ExitStatus> {
        self.exit.try_exited().map(|exit| exit.status)
    }
}

impl<S: 'static> ThreadWorker<S> {
    /// Starts a thread that builds its state with `init` and then waits for
    /// jobs. Returns at once; await [`ready`](Self::ready) for the warm-up.
    ///
    /// # Errors
    ///
    /// [`ThreadError::Spawn`] if the operating system cannot start a thread.
    pub fn spawn<F, E>(init: F) -> Result<Self, ThreadError>
    where
        F: FnOnce() -> Result<S, E> + Send + 'static,
        E: Into<BoxError>,
    {
        let (exit, _) = ExitSignal::new();
        let shared = Arc::new(Shared {
            exit,
            warmup_failed: OnceLock::new(),
        });
        let (jobs_tx, jobs_rx) = mpsc::channel::<Job<S>>();
        let (ready_tx, ready_rx) = oneshot::channel();
        let (finished_tx, finished_rx) = oneshot::channel::<()>();
        let runtime = tokio::runtime::Handle::try_current().ok();
        let thread_shared = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("kennel-thread-worker".to_owned())
            .spawn(move || {
                // Dropped last, whatever happens: tells `close` the thread ended.
                let _finished = finished_tx;
                let _runtime = runtime.as_ref().map(tokio::runtime::Handle::enter);
                serve(init, &jobs_rx, ready_tx, &thread_shared);
            })
            .map_err(|source| ThreadError::Spawn { source })?;
        Ok(Self {
            jobs: Some(jobs_tx),
            ready: Some(ready_rx),
            shared,
            finished: Some(finished_rx),
            thread_id: handle.thread().id(),
            watched: false,
            _state: PhantomData,
        })
    }

    /// Waits until the state is built.
    ///
    /// # Errors
    ///
    /// [`ThreadError::WarmupFailed`] if the init function returned an error
    /// or panicked; the thread has then ended and
    /// [`exited`](Self::exited) resolves.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe: dropping it does not stop the warm-up, and
    /// a later call goes on waiting for it.
    pub async fn ready(&mut self) -> Result<(), ThreadError> {
        self.ready_boxed()
            .await
            .map_err(|err| ThreadError::WarmupFailed {
                message: err.to_string(),
            })
    }

    /// The init's own error the first time, its message afterwards.
    async fn ready_boxed(&mut self) -> Result<(), BoxError> {
        if let Some(rx) = &mut self.ready {
            let outcome = rx
                .await
                .unwrap_or_else(|_| Err("the worker thread ended during its warm-up".into()));
            self.ready = None;
            if let Err(err) = &outcome {
                let _ = self.shared.warmup_failed.set(err.to_string());
            }
            return outcome;
        }
        match self.shared.warmup_failed.get() {
            Some(message) => Err(message.clone().into()),
            None => Ok(()),
        }
    }

    /// Runs `job` on the worker's thread, with exclusive use of its state,
    /// and returns what it returned.
    ///
    /// If the warm-up has not finished, the job waits for it on the thread.
    ///
    /// # Errors
    ///
    /// - [`ThreadError::Crashed`] if the job panicked; the worker has ended.
    ///   In a pool (which watches the worker's end) the job waits instead
    ///   for the pool to fail it with `kennel::Error::Crashed`, up to a
    ///   second.
    /// - [`ThreadError::Ended`] if the worker had ended before (killed,
    ///   closed, crashed) or was killed while the job ran.
    /// - [`ThreadError::WarmupFailed`] if the warm-up failed.
    ///
    /// # Cancel safety
    ///
    /// The worker stays usable if this future is dropped: the job still
    /// runs to its end on the thread, its result dropped, before the next.
    pub async fn run<F, R>(&mut self, job: F) -> Result<R, ThreadError>
    where
        F: FnOnce(&mut S) -> R + Send + 'static,
        R: Send + 'static,
    {
        if let Some(status) = self.shared.status() {
            return Err(self.ended(status));
        }
        let (job, result_rx) = serve::wrap(job, Arc::clone(&self.shared));
        let sent = self.jobs.as_ref().map(|jobs| jobs.send(job));
        if !matches!(sent, Some(Ok(()))) {
            return Err(self.gone());
        }

        let exited = self.shared.exit.exited();
        let result = tokio::select! {
            biased;
            outcome = result_rx => match outcome {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(message)) => Err(ThreadError::Crashed { message }),
                Err(_) => Err(self.gone()),
            },
            _ = exited => {
                match self.shared.status().unwrap_or(ExitStatus::Killed) {
                    // A job panicked: this one, or one sent before it whose
                    // run was dropped. Either way this job gets no answer.
                    ExitStatus::Panicked(message) => Err(ThreadError::Crashed { message }),
                    status => Err(self.ended(status)),
                }
            }
        };
        if let Err(ThreadError::Crashed { .. }) = &result {
            crate::crash::leave_to_pool(self.watched).await;
        }
        result
    }

    /// A future that resolves once, when the worker has ended: its thread
    /// ended, or it was killed (abandoned). It may be called any number of
    /// times; the future does not borrow the worker.
    pub fn exited(&self) -> Exited {
        self.shared.exit.exited()
    }

    /// How the worker ended, if it has.
    pub fn try_exited(&self) -> Option<Exit> {
        self.shared.exit.try_exited()
    }

    /// A cheap, cloneable switch that abandons the worker, as
    /// [`kill`](Self::kill) does.
    pub fn killer(&self) -> Killer {
        self.shared.exit.killer()
    }

    /// Abandons the worker: [`exited`](Self::exited) resolves at once with
    /// [`ExitStatus::Killed`] and later jobs fail. A running job is **not**
    /// stopped (see [the type's docs](Self#a-thread-cannot-be-killed)).
    pub fn kill(&self) {
        self.shared.exit.exit(ExitStatus::Killed);
    }

    /// Ends the worker gracefully and returns how it ended.
    ///
    /// Stops taking jobs, waits for the thread to finish its job (or
    /// warm-up), drop its state and end: [`ExitStatus::Closed`]. A worker
    /// that has already ended (crashed, killed) resolves at once with how
    /// it ended; an abandoned thread is not waited for.
    ///
    /// # Cancel safety
    ///
    /// Dropping this future does not stop the thread: it still ends after
    /// its current job.
    pub async fn close(mut self) -> Exit {
        drop(self.jobs.take());
        if self.shared.status().is_none()
            && let Some(finished) = self.finished.take()
        {
            // Resolves with an error when the thread drops its sender at its
            // very end, which is the signal.
            let _ = finished.await;
            self.shared.exit.exit(ExitStatus::Closed);
        }
        self.exited().await
    }

    fn ended(&self, status: ExitStatus) -> ThreadError {
        match self.shared.warmup_failed.get() {
            Some(message) => ThreadError::WarmupFailed {
                message: message.clone(),
            },
            None => ThreadError::Ended { status },
        }
    }

    /// The thread stopped taking jobs or dropped one: it has ended.
    fn gone(&self) -> ThreadError {
        let status = self
            .shared
            .status()
            .unwrap_or_else(|| ExitStatus::Other("the worker thread ended".into()));
        self.ended(status)
    }
}

impl<S> fmt::Debug for ThreadWorker<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadWorker")
            .field("thread", &self.thread_id)
            .field("warming", &self.ready.is_some())
            .field("exited", &self.shared.exit.try_exited())
            .finish_non_exhaustive()
    }
}

impl<S: 'static> Worker for ThreadWorker<S> {
    async fn ready(&mut self) -> Result<(), BoxError> {
        self.ready_boxed().await
    }

    /// The pool that takes this watches the end: from then on a job that
    /// panics leaves its error to it (`kennel::Error::Crashed`, whose exit
    /// is [`ExitStatus::Panicked`] with the panic's message).
    fn exited(&mut self) -> Exited {
        self.watched = true;
        Self::exited(self)
    }

    fn killer(&self) -> Killer {
        Self::killer(self)
    }

    fn is_alive(&self) -> bool {
        self.try_exited().is_none()
    }

    async fn close(self) {
        Self::close(self).await;
    }
}
