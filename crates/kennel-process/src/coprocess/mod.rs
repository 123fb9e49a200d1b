//! [`Coprocess`]: a child process that speaks JSON lines or JSON-RPC. The
//! type is here; each step of its life has a file of its own.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kennel::{
    BoxError, CancelOutcome, Exit, ExitSignal, Exited, Heartbeat, Killer, Meter, ThreadSample,
    Worker,
};
use nix::sys::signal::Signal;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::process::{ChildStdin, ChildStdout};

use crate::frames::Frames;
use crate::framing::Framing;
use crate::group::ProcessGroup;
use crate::spec::CoprocessSpec;

/// A `tracing` event about a coprocess, with its `pool`, `slot` and `pid`:
/// `event!(warn, self, %err, "…")`.
macro_rules! event {
    ($level:ident, $me:expr, $($rest:tt)+) => {
        tracing::$level!(
            pool = $me.spec.pool.as_deref(),
            slot = $me.spec.slot,
            pid = $me.pid,
            $($rest)+
        )
    };
}

mod budget;
mod cancel;
mod encode;
mod ending;
mod exchange;
mod handshake;
mod keys;
mod notify;
mod procfs;
mod read;
mod relay;
mod replies;
mod reply;
mod rpc;
mod spawn;
mod stderr;

pub use self::budget::{
    STDERR_BYTES_BURST, STDERR_BYTES_PER_SEC, STDERR_LINES_BURST, STDERR_LINES_PER_SEC,
};
pub use self::relay::Relay;
pub use self::stderr::{STDERR_TAIL_BYTES, STDERR_TAIL_LINES, StderrTail};

/// Where the conversation with the worker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Started; the ready line has not been read yet.
    Warming,
    /// Ready, and no request is open.
    Idle,
    /// A request was written and its reply not read yet. Seen at the start of
    /// a request, it means the previous request was dropped half-way.
    InFlight,
    /// The stream can no longer be trusted; the group has been killed.
    Broken,
}

/// The request in hand (written, its reply not read yet).
#[derive(Debug, Clone)]
struct Open {
    /// Its JSON-RPC id, or in JSON lines its `kennel_id`.
    id: u64,
    /// JSON lines: the request carried its id (an object, with ids on).
    carries_id: bool,
    /// The token its progress notifications carry.
    token: Value,
}

/// A child process that does jobs by reading one JSON line per request on
/// stdin and writing one JSON line per reply on stdout (the protocol is
/// written down for worker authors in `docs/PROTOCOL.md`).
///
/// Start one with [`CoprocessSpec::spawn`]. The child runs in its own
/// process group: killing the worker also kills every process it started
/// (unless one left the group on purpose, e.g. with `setsid`).
///
/// # Bad output
///
/// A worker's output is never trusted. A line that is not JSON, a line or
/// frame over [`max_line_bytes`], broken `Content-Length` framing, a line
/// for another job (its `kennel_id`), a reply without the id from a worker
/// that said it echoes it, a second ready line, output no request asked
/// for (waiting when a request is about to be sent), or the end of stdout
/// before a reply fails the request ([`ProcessError::Protocol`] or
/// [`ProcessError::Crashed`]) and kills the whole process group at once:
/// requests and replies may no longer match. Output already waiting once
/// a reply has been read kills it too, the reply standing. Every later
/// request fails at once with `Crashed`.
///
/// # Ending
///
/// [`kill`](Self::kill), its [`Killer`] and dropping it send SIGKILL to the
/// group; [`close`](Self::close) ends it gracefully; when the worker exits
/// by itself, whatever is left of its group is killed. One task per
/// coprocess owns the [`Child`](tokio::process::Child), waits for it and
/// publishes the exit, so [`exited`](Self::exited) and [`kill`](Self::kill)
/// never borrow the worker.
///
/// [`CoprocessSpec::spawn`]: crate::CoprocessSpec::spawn
/// [`max_line_bytes`]: crate::CoprocessSpec::max_line_bytes
/// [`ProcessError::Protocol`]: crate::ProcessError::Protocol
/// [`ProcessError::Crashed`]: crate::ProcessError::Crashed
pub struct Coprocess {
    pid: u32,
    group: Arc<ProcessGroup>,
    stdin: Option<ChildStdin>,
    stdout: Frames<ChildStdout>,
    /// How it was started, and how it speaks.
    spec: CoprocessSpec,
    /// The id of the next request (0 is the JSON-RPC handshake's).
    next_id: u64,
    /// JSON lines: the worker's ready line said `"kennel_id": true` (it
    /// echoes the id), so each reply object to a request that carries one
    /// must carry it.
    echoes_ids: bool,
    /// A pool watches the worker's end ([`Worker::exited`] was called): a
    /// request that meets the end waits for the pool to fail the job with
    /// its crash, instead of failing with [`ProcessError::Crashed`].
    watched: bool,
    /// The request in hand, while the phase is `InFlight`.
    open: Option<Open>,
    /// The handshake's `initialize` was written.
    handshake_sent: bool,
    /// The handshake's result, once the worker answered it.
    handshake_result: Option<Box<RawValue>>,
    /// The fields of its ready line besides `ready`, as JSON text.
    about: Option<String>,
    /// Beaten for each progress item of the request in hand.
    heartbeat: Heartbeat,
    /// The end, recorded by the task that waits for the child.
    exit: ExitSignal,
    phase: Phase,
    /// The last lines of its stderr.
    tail: StderrTail,
}

impl Coprocess {
    /// The worker's process id, which is also the id of its process group.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// A future that resolves once, when the process has ended and been
    /// reaped, with how it ended and how long it ran (on Tokio's clock).
    ///
    /// [`ExitStatus::Killed`] after the [`Killer`] or [`kill`](Self::kill),
    /// otherwise the process's own [`ExitStatus::Code`] or
    /// [`ExitStatus::Signal`] (a kill for bad output is signal 9). The
    /// future does not borrow the worker.
    ///
    /// [`ExitStatus::Killed`]: kennel::ExitStatus::Killed
    /// [`ExitStatus::Code`]: kennel::ExitStatus::Code
    /// [`ExitStatus::Signal`]: kennel::ExitStatus::Signal
    pub fn exited(&self) -> Exited {
        self.exit.exited()
    }

    /// The worker's last words: the tail of its stderr, readable after it
    /// has ended too, for an error that carries none (a pool's); a failed
    /// warm-up, a crash and a protocol error carry a copy
    /// ([`ProcessError::stderr`](crate::ProcessError::stderr)).
    pub fn stderr_tail(&self) -> StderrTail {
        self.tail.clone()
    }

    /// The framing the worker speaks.
    pub fn framing(&self) -> Framing {
        self.spec.framing
    }

    /// The result the worker answered to the handshake's `initialize`, as
    /// it wrote it (an MCP server's `serverInfo`, `capabilities`, …), once
    /// it is ready; `None` without a handshake.
    pub fn handshake_result(&self) -> Option<&RawValue> {
        self.handshake_result.as_deref()
    }

    /// Whether [`cancel`](Self::cancel) can stop a request in hand without
    /// a kill: in a JSON-RPC framing, or in JSON lines with cancel lines
    /// ([`CoprocessSpec::cancel_lines`](crate::CoprocessSpec::cancel_lines)),
    /// while the stream is sound.
    pub fn can_cancel(&self) -> bool {
        matches!(self.phase, Phase::Idle | Phase::InFlight)
            && (self.spec.framing.is_rpc() || self.spec.cancel_lines)
            && self.try_exited().is_none()
    }

    /// How the worker ended, if it has.
    pub fn try_exited(&self) -> Option<Exit> {
        self.exit.try_exited()
    }

    /// A cheap, cloneable switch that sends SIGKILL to the worker's whole
    /// process group. It does nothing once the worker has been reaped.
    pub fn killer(&self) -> Killer {
        let group = Arc::clone(&self.group);
        Killer::new(move || group.kill_by_switch())
    }

    /// Sends SIGKILL to the worker's whole process group, as the
    /// [`killer`](Self::killer) does. It does not wait: await
    /// [`exited`](Self::exited) for the end.
    pub fn kill(&self) {
        self.group.kill_by_switch();
    }
}

impl Drop for Coprocess {
    fn drop(&mut self) {
        self.group.signal(Signal::SIGKILL);
    }
}

impl fmt::Debug for Coprocess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Coprocess")
            .field("pid", &self.pid)
            .field("pool", &self.spec.pool)
            .field("slot", &self.spec.slot)
            .field("framing", &self.spec.framing)
            .field("phase", &self.phase)
            .field("exited", &self.try_exited())
            .finish_non_exhaustive()
    }
}

impl Worker for Coprocess {
    async fn ready(&mut self) -> Result<(), BoxError> {
        Self::ready(self).await.map_err(Into::into)
    }

    /// The pool that takes this watches the end: from then on a request
    /// that meets the worker's end leaves the job's error to it
    /// (`kennel::Error::Crashed`).
    fn exited(&mut self) -> Exited {
        self.watched = true;
        Self::exited(self)
    }

    fn killer(&self) -> Killer {
        Self::killer(self)
    }

    fn pid(&self) -> Option<u32> {
        Some(Self::pid(self))
    }

    fn meter(&self) -> Option<Meter> {
        // Its own process group: the worker and every child it starts.
        let pgid = Self::pid(self);
        Some(Meter::new(move || procfs::group_rss(pgid)))
    }

    /// Its threads and those of the processes it started, with the budget
    /// the worker was told in `KENNEL_THREADS` (none told: no check).
    fn threads(&self) -> Option<Meter<ThreadSample>> {
        let budget = self
            .spec
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == "KENNEL_THREADS")
            .and_then(|(_, v)| v.to_str()?.parse::<usize>().ok())?;
        let pid = Self::pid(self);
        Some(Meter::new(move || {
            procfs::tree_threads(pid).map(|threads| ThreadSample::new(budget, threads))
        }))
    }

    /// Not once it was killed for its output, even before it is reaped.
    fn is_alive(&self) -> bool {
        self.phase != Phase::Broken && self.try_exited().is_none()
    }

    /// The fields of its ready line besides `ready` (JSON lines), or the
    /// handshake's result (JSON-RPC: the server's name and capabilities).
    fn about(&self) -> Option<String> {
        self.about
            .clone()
            .or_else(|| self.handshake_result.as_ref().map(|r| r.get().to_owned()))
    }

    fn can_cancel(&self) -> bool {
        Self::can_cancel(self)
    }

    async fn cancel(&mut self, grace: Duration) -> CancelOutcome {
        Self::cancel(self, grace).await
    }

    fn heartbeat(&self) -> Option<Heartbeat> {
        Some(self.heartbeat.clone())
    }

    /// Sends the spec's probe request and passes on a reply that is not an
    /// error; without a probe request, passes while the process runs.
    async fn check(&mut self) -> Result<(), BoxError> {
        if self.try_exited().is_some() {
            return Err("the worker has ended".into());
        }
        if let Some(request) = self.spec.probe.clone() {
            let method = self.spec.method.clone();
            self.exchange(&encode::json(&*request)?, method.as_deref(), None)
                .await?;
        }
        Ok(())
    }

    /// [`Coprocess::load`]; an error reply fails the job with the
    /// worker's message alone.
    async fn load(&mut self, key: &str) -> Result<(), BoxError> {
        Self::load(self, key).await.map_err(keys::for_pool)
    }

    /// [`Coprocess::unload`].
    async fn unload(&mut self, key: &str) -> Result<(), BoxError> {
        Self::unload(self, key).await.map_err(keys::for_pool)
    }

    async fn close(self) {
        Self::close(self).await;
    }
}
