//! The `Worker` trait and the small types a worker hands the pool; the
//! [`ExitSignal`](crate::ExitSignal) that makes an [`Exited`] is in `exit.rs`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::cancel::CancelOutcome;
use crate::heartbeat::Heartbeat;

/// A boxed error as a worker reports it (a failed warm-up, for example).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What the factory gets: which pool and which slot the worker is for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SlotInfo {
    /// The pool's name.
    pub pool: Arc<str>,
    /// The slot the worker will live in.
    pub slot: usize,
    /// How many slots the pool runs as the worker starts (its size then),
    /// for a factory that shares something out among the workers, such as
    /// CPU threads. 1 when not known.
    pub size: usize,
    /// The key the worker is started for, in a pool whose workers are
    /// bound to one key each ([`KeyBinding::Spawn`](crate::KeyBinding::Spawn));
    /// `None` otherwise, and for a worker started for jobs without a key.
    pub key: Option<crate::Key>,
    /// The GPU the worker is placed on, in a pool with `gpus_per_worker`;
    /// `None` otherwise.
    pub gpu: Option<crate::GpuPlace>,
}

impl SlotInfo {
    /// The slot `slot` of the pool `pool`, whose size is not known (1).
    pub fn new(pool: impl Into<Arc<str>>, slot: usize) -> Self {
        Self {
            pool: pool.into(),
            slot,
            size: 1,
            key: None,
            gpu: None,
        }
    }

    /// The same, for a pool that runs `size` slots.
    pub fn with_size(mut self, size: usize) -> Self {
        self.size = size.max(1);
        self
    }
}

/// A long-lived thing that does one job at a time.
///
/// The pool owns each worker. It calls [`exited`](Worker::exited) and
/// [`killer`](Worker::killer) once, right after the factory made the worker,
/// so that it can watch for the end and kill the worker even while a job holds
/// it mutably (ADR 0001). It then awaits [`ready`](Worker::ready) (the
/// warm-up), lends the worker to jobs, and at the end calls
/// [`close`](Worker::close) (graceful) or the kill switch (at once).
///
/// No method is required: a worker that lives in the pool's process and
/// never ends on its own needs none of them (it is killed by being dropped).
/// A worker that can end on its own (a child process, a thread) hands out
/// its end through `exited()` and a switch through `killer()`, usually both
/// from an [`ExitSignal`](crate::ExitSignal).
///
/// # Example: an in-memory worker
///
/// ```
/// struct Counter {
///     total: u64,
/// }
///
/// impl kennel::Worker for Counter {}
/// ```
pub trait Worker: Send + 'static {
    /// Resolves when the worker is warm and can take a job.
    ///
    /// The default is ready at once. A worker whose warm-up can hang should
    /// set its own limit or rely on the pool's `warmup_timeout`.
    ///
    /// # Errors
    ///
    /// An error means the warm-up failed: the pool kills the worker, fails the
    /// job that waited for it with [`Error::WarmupFailed`](crate::Error::WarmupFailed)
    /// and counts an early exit.
    ///
    /// # Cancel safety
    ///
    /// The pool may drop this future when `warmup_timeout` ends or the pool
    /// closes; it then kills the worker, so no state needs to survive.
    fn ready(&mut self) -> impl Future<Output = Result<(), BoxError>> + Send {
        std::future::ready(Ok(()))
    }

    /// Hands out the future that resolves once, when the worker has ended.
    ///
    /// The pool calls it exactly once per worker. The future must not borrow
    /// the worker: it is watched while a job holds the worker. The default
    /// never resolves: a worker that never ends on its own.
    fn exited(&mut self) -> Exited {
        Exited::never()
    }

    /// Hands out a cheap, cloneable switch that ends the worker at once.
    ///
    /// The pool calls it once per worker and keeps the switch, so that it can
    /// kill a worker that a job holds (a timeout, an abort). After a kill the
    /// future from [`exited`](Worker::exited) must resolve.
    ///
    /// The default: the worker is killed by being dropped. The pool then
    /// records the kill itself ([`ExitStatus::Killed`]) and drops the worker
    /// as soon as no job holds it.
    fn killer(&self) -> Killer {
        Killer::by_drop()
    }

    /// A health probe, for a pool with `probe_every` or `probe_on_lend`:
    /// checks that the worker still serves (a cheap request, a ping). The
    /// pool calls it only on a worker no job holds. The default: healthy.
    ///
    /// # Errors
    ///
    /// An error means the worker is not fit to serve: the pool retires it
    /// (`RetireReason::ProbeFailed`) and starts a replacement.
    ///
    /// # Cancel safety
    ///
    /// The pool drops this future when `probe_timeout` ends; it then
    /// retires the worker, so no state needs to survive.
    fn check(&mut self) -> impl Future<Output = Result<(), BoxError>> + Send {
        std::future::ready(Ok(()))
    }

    /// What the worker said of itself when it became ready (a model
    /// version, a device), as the text of a JSON object, for its status row
    /// ([`Pool::workers`](crate::Pool::workers)). Asked once, after
    /// [`ready`](Worker::ready). The default: nothing.
    fn about(&self) -> Option<String> {
        None
    }

    /// Whether the worker is still alive, as far as it knows without waiting.
    ///
    /// The pool asks when a job gives the worker back, so that a worker that
    /// ended during the job (its exit not yet seen by the pool's watcher) is
    /// not lent to the next job. The default says alive; a worker that can
    /// tell (a child process that was reaped, a thread that ended) should.
    fn is_alive(&self) -> bool {
        true
    }

    /// The worker's process id, for a worker that is a process (shown in
    /// [`Pool::workers`](crate::Pool::workers)). The default: none.
    fn pid(&self) -> Option<u32> {
        None
    }

    /// A meter of the memory the worker holds, for `max_memory`. The pool
    /// takes it once, when the worker is made. The default: none (the
    /// memory is unknown, and `max_memory` never retires the worker).
    fn meter(&self) -> Option<Meter> {
        None
    }

    /// A meter of its threads' CPU time, with the threads it was given, for
    /// the pool's oversubscription check ([`Event::Oversubscribed`]). The
    /// pool takes it once, when the worker is made, and reads it at the
    /// lend and return of its first jobs. The default: none (no check).
    ///
    /// [`Event::Oversubscribed`]: crate::Event::Oversubscribed
    fn threads(&self) -> Option<Meter<crate::ThreadSample>> {
        None
    }

    /// Whether [`cancel`](Worker::cancel) can stop the job in hand without
    /// killing the worker. The pool asks when a job is dropped mid-job or
    /// runs past its `job_timeout`: a worker that says yes is asked to
    /// cancel instead of being killed (ADR 0035). The default: no.
    fn can_cancel(&self) -> bool {
        false
    }

    /// Asks the worker to stop the job that was in hand when the job's
    /// future was dropped, and waits up to `grace` for it to answer.
    ///
    /// [`CancelOutcome::Kept`] means the worker stopped (or had finished)
    /// and can take the next job; [`CancelOutcome::Killed`] that the pool
    /// must kill it. Called only when [`can_cancel`](Worker::can_cancel)
    /// said yes. The default says `Killed`.
    ///
    /// # Cancel safety
    ///
    /// The pool drops this future after `grace` (or when the worker ends)
    /// and then kills the worker, so no state needs to survive a drop.
    fn cancel(&mut self, grace: Duration) -> impl Future<Output = CancelOutcome> + Send {
        let _ = grace;
        std::future::ready(CancelOutcome::Killed)
    }

    /// A heartbeat that the worker beats for each progress item of the job
    /// in hand; with the pool's `progress_extends_timeout` each beat moves
    /// the job's deadline. The pool reads it at the start of each job. The
    /// default: none.
    fn heartbeat(&self) -> Option<Heartbeat> {
        None
    }

    /// Loads what jobs of `key` need (a model, a workspace, a session), in
    /// a pool whose workers load keys
    /// ([`KeyBinding::Load`](crate::KeyBinding::Load)). The pool calls it
    /// before it hands the worker a job of a key the worker does not hold,
    /// and holds the worker's keys itself: a key is loaded once until the
    /// pool unloads it. The default loads nothing (the key only routes).
    ///
    /// # Errors
    ///
    /// An error fails the job that needed the key with
    /// [`Error::LoadFailed`](crate::Error::LoadFailed) and its message; the
    /// worker keeps serving with the keys it held.
    ///
    /// # Cancel safety
    ///
    /// The pool drops this future only when the job that needed the key
    /// was dropped; it then retires the worker, whose state is unknown.
    fn load(&mut self, key: &str) -> impl Future<Output = Result<(), BoxError>> + Send {
        let _ = key;
        std::future::ready(Ok(()))
    }

    /// Lets go of `key`, to make room for another (`keys_per_worker`).
    /// The default does nothing.
    ///
    /// # Errors
    ///
    /// An error retires the worker: what it holds is no longer known.
    ///
    /// # Cancel safety
    ///
    /// As [`load`](Worker::load).
    fn unload(&mut self, key: &str) -> impl Future<Output = Result<(), BoxError>> + Send {
        let _ = key;
        std::future::ready(Ok(()))
    }

    /// Ends the worker gracefully; resolves when it has ended.
    ///
    /// The default kills it.
    ///
    /// # Cancel safety
    ///
    /// The pool drives this future to completion on a task of its own; if the
    /// pool is dropped meanwhile, the worker is killed.
    fn close(self) -> impl Future<Output = ()> + Send
    where
        Self: Sized,
    {
        self.killer().kill();
        std::future::ready(())
    }
}

/// How a worker ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExitStatus {
    /// A process exited with this code.
    Code(i32),
    /// A process was ended by this signal.
    Signal(i32),
    /// The worker was killed through its [`Killer`].
    Killed,
    /// The worker was closed gracefully.
    Closed,
    /// The worker panicked (a thread worker).
    Panicked(String),
    /// Anything else, in the worker's words.
    Other(String),
}

impl fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Code(c) => write!(f, "exited with code {c}"),
            Self::Signal(s) => write!(f, "ended by signal {s}"),
            Self::Killed => f.write_str("killed"),
            Self::Closed => f.write_str("closed"),
            Self::Panicked(m) => write!(f, "panicked: {m}"),
            Self::Other(m) => f.write_str(m),
        }
    }
}

/// How a worker ended and how long it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// How it ended.
    pub status: ExitStatus,
    /// How long it ran, from its start to its end.
    pub ran_for: Duration,
    /// Its last words: the last lines it wrote to stderr, oldest first, for
    /// a worker type that keeps them (`Coprocess` keeps a bounded tail);
    /// empty otherwise.
    pub last_words: Vec<String>,
}

/// The owned future that resolves once, when a worker has ended.
#[must_use = "futures do nothing unless polled"]
pub struct Exited(Pin<Box<dyn Future<Output = Exit> + Send + 'static>>);

impl Exited {
    /// Wraps any future that resolves when the worker ends.
    pub fn new(fut: impl Future<Output = Exit> + Send + 'static) -> Self {
        Self(Box::pin(fut))
    }

    /// A future that never resolves, for a worker that cannot end by itself
    /// and whose killer does nothing.
    pub fn never() -> Self {
        Self::new(std::future::pending())
    }
}

impl fmt::Debug for Exited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Exited(..)")
    }
}

impl Future for Exited {
    type Output = Exit;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

/// Reads something of a worker now without borrowing it (the pool reads
/// it while a job holds the worker, and outside its lock): by default how
/// much memory it holds, in bytes (for a process, the resident memory of
/// its whole process group, measured by the pool's side, not reported by
/// the worker); as a `Meter<ThreadSample>`, its threads' CPU time
/// ([`Worker::threads`]).
pub struct Meter<T = u64>(Arc<dyn Fn() -> Option<T> + Send + Sync + 'static>);

impl<T> Meter<T> {
    /// A meter that calls `f`; `None` from `f` means "not known now".
    pub fn new(f: impl Fn() -> Option<T> + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// What it measures now, if known.
    pub fn read(&self) -> Option<T> {
        (self.0)()
    }
}

impl<T> Clone for Meter<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T> fmt::Debug for Meter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Meter(..)")
    }
}

/// A cheap, cloneable switch that ends a worker at once (no grace).
#[derive(Clone)]
pub struct Killer(Option<Arc<dyn Fn() + Send + Sync + 'static>>);

impl Killer {
    /// A switch that calls `f` to kill the worker. `f` may be called more
    /// than once and must not block.
    pub fn new(f: impl Fn() + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(f)))
    }

    /// The switch of a worker that is killed by being dropped: the pool
    /// records the kill and drops the worker. Its [`kill`](Self::kill) does
    /// nothing by itself.
    pub fn by_drop() -> Self {
        Self(None)
    }

    /// Kills the worker. Calling it again does nothing more.
    pub fn kill(&self) {
        if let Some(f) = &self.0 {
            f();
        }
    }

    /// Whether this is the switch of [`by_drop`](Self::by_drop).
    pub(crate) fn is_by_drop(&self) -> bool {
        self.0.is_none()
    }
}

impl fmt::Debug for Killer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Killer(..)")
    }
}
