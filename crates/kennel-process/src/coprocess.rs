//! [`Coprocess`]: a child process that speaks JSON lines (SPEC S10).

use std::fmt;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use kennel::{BoxError, Exit, ExitSignal, ExitStatus, Exited, Killer, Worker};
use nix::sys::signal::Signal;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use crate::error::{NO_MESSAGE, ProcessError};
use crate::group::ProcessGroup;
use crate::lines::{Line, LineReader, Overflow, excerpt};
use crate::spec::{CoprocessSpec, ReadyMode};

/// The longest stderr line forwarded whole; longer ones are cut.
const STDERR_LINE_BYTES: usize = 64 * 1024;

/// How long to wait for the exit status after the worker closed its stdout,
/// so that an error can say how the worker ended.
const EXIT_STATUS_WAIT: Duration = Duration::from_millis(200);

/// How long to wait, after killing a broken worker, until it has been reaped
/// and its exit published. SIGKILL takes effect at once, unless the process
/// is stuck in the kernel; then the error is returned without waiting more.
const REAP_WAIT: Duration = Duration::from_secs(1);

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

/// The pool and slot a worker serves, for its log lines.
#[derive(Debug, Clone, Default)]
struct Label {
    pool: Option<String>,
    slot: Option<usize>,
}

/// A child process that does jobs by reading one JSON line per request on
/// stdin and writing one JSON line per reply on stdout (SPEC S10; the
/// protocol is written down for worker authors in `docs/PROTOCOL.md`).
///
/// Start one with [`CoprocessSpec::spawn`]. The child runs in its own
/// process group: killing the worker also kills every process it started
/// (unless one left the group on purpose, e.g. with `setsid`).
///
/// # Bad output
///
/// A worker's output is never trusted. A line that is not JSON, a line over
/// [`max_line_bytes`](CoprocessSpec::max_line_bytes), output already waiting
/// when a request is about to be sent (a line no request asked for), or the
/// end of stdout before a reply fails the request ([`ProcessError::Protocol`]
/// or [`ProcessError::Crashed`]), and the coprocess kills its whole process
/// group at once, because requests and replies may no longer match. The
/// future from [`exited`](Self::exited) then resolves (so a pool replaces the
/// worker) and every later request fails at once with `Crashed`.
///
/// # Ending
///
/// - [`kill`](Self::kill) (or the [`Killer`]) sends SIGKILL to the group.
/// - [`close`](Self::close) closes stdin, waits the grace period, sends
///   SIGTERM to the group, waits the grace period again, then sends SIGKILL.
/// - Dropping a `Coprocess` sends SIGKILL to the group.
/// - When the worker exits by itself, whatever is left of its group is
///   killed.
///
/// One task per coprocess owns the [`Child`](tokio::process::Child) and waits
/// for it; it publishes the exit, so [`exited`](Self::exited) and
/// [`kill`](Self::kill) never borrow the worker.
///
/// # Example
///
/// ```no_run
/// use kennel_process::CoprocessSpec;
/// use serde_json::json;
///
/// # async fn demo() -> Result<(), kennel_process::ProcessError> {
/// let mut worker = CoprocessSpec::new(["python3", "examples/workers/echo.py"]).spawn()?;
/// worker.ready().await?;
/// let reply = worker.request(&json!({"hello": "world"})).await?;
/// assert_eq!(reply, json!({"hello": "world"}));
/// worker.close().await;
/// # Ok(()) }
/// ```
pub struct Coprocess {
    pid: u32,
    group: Arc<ProcessGroup>,
    stdin: Option<ChildStdin>,
    stdout: LineReader<ChildStdout>,
    /// The end, recorded by the task that waits for the child.
    exit: ExitSignal,
    phase: Phase,
    max_line_bytes: usize,
    close_grace: Duration,
    label: Label,
}

impl Coprocess {
    pub(crate) fn spawn(spec: &CoprocessSpec) -> Result<Self, ProcessError> {
        let program = spec
            .argv
            .first()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some((first, rest)) = spec.argv.split_first() else {
            return Err(ProcessError::Spawn {
                program,
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "the argv is empty"),
            });
        };
        let mut command = Command::new(first);
        command
            .args(rest)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        if spec.env_clear {
            command.env_clear();
        }
        command.envs(spec.env.iter().map(|(k, v)| (k, v)));
        if let Some(dir) = &spec.current_dir {
            command.current_dir(dir);
        }
        // Started now: the exit counts how long the worker ran from here.
        let (exit, _) = ExitSignal::new();
        let mut child = command.spawn().map_err(|source| ProcessError::Spawn {
            program: program.clone(),
            source,
        })?;
        let pid = child
            .id()
            .expect("a child that was just spawned has not been reaped");
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            unreachable!("stdin, stdout and stderr were all set to piped");
        };

        let label = Label {
            pool: spec.pool.clone(),
            slot: spec.slot,
        };
        let group = Arc::new(ProcessGroup::new(pid));
        tokio::spawn(wait_for_exit(
            child,
            Arc::clone(&group),
            exit.clone(),
            label.clone(),
            pid,
        ));
        tokio::spawn(forward_stderr(stderr, label.clone(), pid));
        tracing::debug!(pool = label.pool.as_deref(), slot = label.slot, pid, %program, "worker started");

        Ok(Self {
            pid,
            group,
            stdin: Some(stdin),
            stdout: LineReader::new(stdout, spec.max_line_bytes, Overflow::Fail),
            exit,
            phase: match spec.ready {
                ReadyMode::Line => Phase::Warming,
                ReadyMode::Immediate => Phase::Idle,
            },
            max_line_bytes: spec.max_line_bytes,
            close_grace: spec.close_grace,
            label,
        })
    }

    /// The worker's process id, which is also the id of its process group.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Waits until the worker has written its ready line `{"ready":true}`.
    ///
    /// With [`ReadyMode::Immediate`], or once the worker is ready, this
    /// resolves at once. Lines the worker writes before its ready line that
    /// are not an error line (a library's banner, a progress note, even text
    /// that is not JSON) are logged with `tracing` at level WARN and skipped.
    /// A line over the size limit is not skipped: it is a protocol error.
    ///
    /// A warm-up has no time limit of its own; a pool can set one
    /// (`warmup_timeout`), or wrap this in [`tokio::time::timeout`].
    ///
    /// # Errors
    ///
    /// - [`ProcessError::NotReady`] if the worker exits or closes its stdout
    ///   before its ready line, or writes an error line
    ///   `{"error":true,"message":"…"}` instead (the reason is its message).
    /// - [`ProcessError::Protocol`] if a line is over the size limit.
    /// - [`ProcessError::Crashed`] if the worker was already broken.
    ///
    /// In each case the worker's process group is killed.
    ///
    /// # Cancel safety
    ///
    /// This method is cancel safe. If it is dropped before it completes, the
    /// worker keeps warming up and nothing it wrote is lost: a later call
    /// goes on waiting for the same ready line.
    pub async fn ready(&mut self) -> Result<(), ProcessError> {
        match self.phase {
            Phase::Idle | Phase::InFlight => return Ok(()),
            Phase::Broken => return Err(self.crashed_now()),
            Phase::Warming => {}
        }
        loop {
            let bytes = match self.stdout.next_line().await {
                Ok(Line::Complete(bytes) | Line::Truncated(bytes)) => bytes,
                Ok(Line::TooLong(head)) => {
                    let err = self.too_long(&head);
                    return Err(self.break_stream(err).await);
                }
                Ok(Line::Eof { .. }) => {
                    let status = self
                        .break_after_eof("it closed its stdout before its ready line")
                        .await;
                    let reason = match &status {
                        Some(status) => status.to_string(),
                        None => "it closed its stdout".to_owned(),
                    };
                    return Err(ProcessError::NotReady { reason, status });
                }
                Err(err) => {
                    let reason = format!("reading its stdout failed: {err}");
                    let status = self.break_after_eof(&reason).await;
                    return Err(ProcessError::NotReady { reason, status });
                }
            };
            if bytes.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(value) if value.get("ready") == Some(&Value::Bool(true)) => {
                    self.phase = Phase::Idle;
                    tracing::debug!(
                        pool = self.label.pool.as_deref(),
                        slot = self.label.slot,
                        pid = self.pid,
                        "worker is ready"
                    );
                    return Ok(());
                }
                Ok(value) if is_error_reply(&value) => {
                    let reason = error_message(&value);
                    let err = ProcessError::NotReady {
                        reason: reason.clone(),
                        status: None,
                    };
                    self.break_stream(err).await;
                    return Err(ProcessError::NotReady {
                        reason,
                        status: self.status_now(),
                    });
                }
                _ => {
                    tracing::warn!(
                        pool = self.label.pool.as_deref(),
                        slot = self.label.slot,
                        pid = self.pid,
                        line = %excerpt(&bytes),
                        "worker wrote a line before its ready line; skipped"
                    );
                }
            }
        }
    }

    /// Sends one request and returns the worker's reply.
    ///
    /// The request is written as one line of compact JSON; the next line the
    /// worker writes is its reply. If the worker is still warming up, this
    /// first waits for [`ready`](Self::ready).
    ///
    /// # Errors
    ///
    /// - [`ProcessError::Worker`] if the reply is `{"error":true,…}`. The
    ///   worker stays usable.
    /// - [`ProcessError::Protocol`] if the reply is not JSON, is over the size
    ///   limit, the worker had already written output no request asked for,
    ///   or an earlier request was dropped before its reply was read.
    /// - [`ProcessError::Crashed`] if the worker exits or closes its stdout
    ///   before it replies, or was already broken.
    /// - The errors of [`ready`](Self::ready) while it warms up.
    ///
    /// After `Protocol` or `Crashed` the worker's process group has been
    /// killed, and every later request fails at once with `Crashed`.
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe. If it is dropped after the request was
    /// written but before the reply was read, the worker's reply would be
    /// taken as the answer to the next request, so the coprocess kills its
    /// process group at once, and the next request fails with
    /// [`ProcessError::Protocol`]. A pool that drops a job (abort, timeout)
    /// kills the worker anyway.
    pub async fn request(&mut self, request: &Value) -> Result<Value, ProcessError> {
        let line = encode(request)?;
        self.exchange(line).await
    }

    /// Sends a typed request and decodes the typed reply, through serde.
    ///
    /// ```no_run
    /// # use kennel_process::CoprocessSpec;
    /// #[derive(serde::Serialize)]
    /// struct Add { a: i64, b: i64 }
    /// #[derive(serde::Deserialize)]
    /// struct Sum { sum: i64 }
    ///
    /// # async fn demo(worker: &mut kennel_process::Coprocess) -> Result<(), kennel_process::ProcessError> {
    /// let Sum { sum } = worker.call(&Add { a: 1, b: 2 }).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The errors of [`request`](Self::request), and:
    ///
    /// - [`ProcessError::Encode`] if `request` cannot be written as JSON
    ///   (nothing is sent);
    /// - [`ProcessError::Decode`] if the reply does not fit `Resp` (the worker
    ///   stays usable).
    ///
    /// # Cancel safety
    ///
    /// This method is not cancel safe, as [`request`](Self::request).
    pub async fn call<Req, Resp>(&mut self, request: &Req) -> Result<Resp, ProcessError>
    where
        Req: Serialize + ?Sized,
        Resp: DeserializeOwned,
    {
        let line = encode(request)?;
        let reply = self.exchange(line).await?;
        serde_json::from_value(reply).map_err(|source| ProcessError::Decode { source })
    }

    /// A future that resolves once, when the process has ended and been
    /// reaped, with how it ended and how long it ran (on Tokio's clock).
    ///
    /// The status is [`ExitStatus::Killed`] when the [`Killer`] (or
    /// [`kill`](Self::kill)) was used before the end, otherwise the
    /// process's own [`ExitStatus::Code`] or [`ExitStatus::Signal`]
    /// (a kill because of bad output shows as signal 9). It may be called any
    /// number of times; the future does not borrow the worker.
    pub fn exited(&self) -> Exited {
        self.exit.exited()
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

    /// Ends the worker gracefully and returns how it ended.
    ///
    /// Closes the worker's stdin (a well-behaved worker exits when it reads
    /// the end of its input), waits up to the
    /// [`close_grace`](CoprocessSpec::close_grace), then sends SIGTERM to the
    /// whole process group, waits up to the grace again, then sends SIGKILL
    /// and waits for the end. Whatever is left in the group when the worker
    /// exits is killed.
    ///
    /// # Cancel safety
    ///
    /// Dropping this future drops the coprocess, which kills its process
    /// group at once.
    pub async fn close(mut self) -> Exit {
        drop(self.stdin.take());
        let grace = self.close_grace;
        let exited = self.exited();
        tokio::pin!(exited);
        if let Ok(exit) = tokio::time::timeout(grace, &mut exited).await {
            return exit;
        }
        tracing::debug!(
            pool = self.label.pool.as_deref(),
            slot = self.label.slot,
            pid = self.pid,
            "worker did not exit after stdin closed; sending SIGTERM"
        );
        self.group.signal(Signal::SIGTERM);
        if let Ok(exit) = tokio::time::timeout(grace, &mut exited).await {
            return exit;
        }
        tracing::warn!(
            pool = self.label.pool.as_deref(),
            slot = self.label.slot,
            pid = self.pid,
            "worker did not exit after SIGTERM; sending SIGKILL"
        );
        self.group.signal(Signal::SIGKILL);
        exited.await
    }

    /// Writes `line` and reads the reply. See [`Self::request`].
    async fn exchange(&mut self, line: Vec<u8>) -> Result<Value, ProcessError> {
        match self.phase {
            Phase::Warming => self.ready().await?,
            Phase::Idle => {
                if let Some(head) = self.stdout.unsolicited() {
                    let err = ProcessError::Protocol {
                        message: format!(
                            "the worker wrote output no request asked for, so replies would no \
                             longer match requests; it reads {}",
                            excerpt(&head)
                        ),
                    };
                    return Err(self.break_stream(err).await);
                }
            }
            Phase::InFlight => {
                let err = ProcessError::Protocol {
                    message: "an earlier request was dropped before its reply was read, so \
                              replies no longer match requests; the worker was killed"
                        .to_owned(),
                };
                return Err(self.break_stream(err).await);
            }
            Phase::Broken => return Err(self.crashed_now()),
        }
        self.phase = Phase::InFlight;
        // Dropping this future from here on leaves the stream out of step.
        let guard = KillOnDrop(Some(Arc::clone(&self.group)));

        let written = match self.stdin.as_mut() {
            Some(stdin) => match stdin.write_all(&line).await {
                Ok(()) => stdin.flush().await,
                Err(err) => Err(err),
            },
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        };
        if let Err(err) = written {
            guard.disarm();
            let status = self
                .break_after_eof(&format!("writing a request failed: {err}"))
                .await;
            return Err(ProcessError::Crashed { status });
        }

        let result = loop {
            let bytes = match self.stdout.next_line().await {
                Ok(Line::Complete(bytes) | Line::Truncated(bytes)) => bytes,
                Ok(Line::TooLong(head)) => {
                    let err = self.too_long(&head);
                    break Err(self.break_stream(err).await);
                }
                Ok(Line::Eof { .. }) => {
                    let status = self
                        .break_after_eof("it closed its stdout before replying")
                        .await;
                    break Err(ProcessError::Crashed { status });
                }
                Err(err) => {
                    let status = self
                        .break_after_eof(&format!("reading a reply failed: {err}"))
                        .await;
                    break Err(ProcessError::Crashed { status });
                }
            };
            if bytes.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(value) if is_error_reply(&value) => {
                    self.phase = Phase::Idle;
                    break Err(ProcessError::Worker {
                        message: error_message(&value),
                    });
                }
                Ok(value) => {
                    self.phase = Phase::Idle;
                    break Ok(value);
                }
                Err(err) => {
                    let err = ProcessError::Protocol {
                        message: format!("reply is not JSON ({err}); it reads {}", excerpt(&bytes)),
                    };
                    break Err(self.break_stream(err).await);
                }
            }
        };
        guard.disarm();
        result
    }

    /// Marks the stream broken, kills the group, and waits (a bounded time)
    /// until the exit is published, so that when the error reaches the caller
    /// the process is gone and [`exited`](Self::exited) has resolved.
    /// Returns `err`, after logging it.
    async fn break_stream(&mut self, err: ProcessError) -> ProcessError {
        tracing::warn!(pool = self.label.pool.as_deref(), slot = self.label.slot, pid = self.pid, %err, "killing the worker: its output can no longer be trusted");
        self.phase = Phase::Broken;
        // Kill first: a worker that saw its stdin close could exit by itself
        // in between, and the exit would not show that it was killed.
        self.group.signal(Signal::SIGKILL);
        self.stdin = None;
        self.wait_for_exit(REAP_WAIT).await;
        err
    }

    /// The worker closed its stdout (or a pipe failed): waits a moment for
    /// it to exit by itself, so that the error can say how it ended, then
    /// marks the stream broken, kills the group and waits (a bounded time)
    /// for the exit.
    async fn break_after_eof(&mut self, what: &str) -> Option<ExitStatus> {
        tracing::warn!(
            pool = self.label.pool.as_deref(),
            slot = self.label.slot,
            pid = self.pid,
            "worker failed before responding: {what}"
        );
        self.phase = Phase::Broken;
        self.stdin = None;
        if let Some(status) = self.wait_for_exit(EXIT_STATUS_WAIT).await {
            return Some(status);
        }
        self.group.signal(Signal::SIGKILL);
        self.wait_for_exit(REAP_WAIT).await
    }

    /// Waits at most `limit` for the exit; returns its status if it came.
    async fn wait_for_exit(&self, limit: Duration) -> Option<ExitStatus> {
        let exit = tokio::time::timeout(limit, self.exit.exited()).await;
        exit.ok().map(|exit| exit.status)
    }

    fn status_now(&self) -> Option<ExitStatus> {
        self.exit.try_exited().map(|exit| exit.status)
    }

    fn crashed_now(&self) -> ProcessError {
        ProcessError::Crashed {
            status: self.status_now(),
        }
    }

    fn too_long(&self, head: &[u8]) -> ProcessError {
        ProcessError::Protocol {
            message: format!(
                "a line is over the {}-byte limit; it starts with {}",
                self.max_line_bytes,
                excerpt(head)
            ),
        }
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
            .field("pool", &self.label.pool)
            .field("slot", &self.label.slot)
            .field("phase", &self.phase)
            .field("exited", &self.try_exited())
            .finish_non_exhaustive()
    }
}

impl Worker for Coprocess {
    async fn ready(&mut self) -> Result<(), BoxError> {
        Self::ready(self).await.map_err(Into::into)
    }

    fn exited(&mut self) -> Exited {
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

/// Kills the process group if a request is dropped half-way.
struct KillOnDrop(Option<Arc<ProcessGroup>>);

impl KillOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(group) = self.0.take() {
            group.signal(Signal::SIGKILL);
        }
    }
}

fn encode<T: Serialize + ?Sized>(request: &T) -> Result<Vec<u8>, ProcessError> {
    let mut line = serde_json::to_vec(request).map_err(|source| ProcessError::Encode { source })?;
    line.push(b'\n');
    Ok(line)
}

fn is_error_reply(value: &Value) -> bool {
    value.get("error") == Some(&Value::Bool(true))
}

fn error_message(value: &Value) -> String {
    match value.get("message") {
        Some(Value::String(message)) => message.clone(),
        None | Some(Value::Null) => NO_MESSAGE.to_owned(),
        Some(other) => other.to_string(),
    }
}

/// Owns the child, waits for it, kills what is left of its group and
/// records the exit.
async fn wait_for_exit(
    mut child: Child,
    group: Arc<ProcessGroup>,
    exit: ExitSignal,
    label: Label,
    pid: u32,
) {
    // Stopped before the child was reaped (its runtime shut down): the end
    // is recorded all the same, so no `exited()` waits for ever.
    let stopped = ExitOnDrop(exit);
    let waited = child.wait().await;
    group.leader_reaped();
    let status = match waited {
        _ if group.was_killed_by_switch() => ExitStatus::Killed,
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => ExitStatus::Code(code),
            (None, Some(signal)) => ExitStatus::Signal(signal),
            (None, None) => ExitStatus::Other(status.to_string()),
        },
        Err(err) => ExitStatus::Other(format!("could not wait for the worker: {err}")),
    };
    let exit = &stopped.0;
    exit.exit(status);
    if let Some(exit) = exit.try_exited() {
        tracing::debug!(pool = label.pool.as_deref(), slot = label.slot, pid, status = %exit.status, ran_for = ?exit.ran_for, "worker ended");
    }
}

/// Records that the task waiting for the worker stopped, unless the worker's
/// end was recorded first.
struct ExitOnDrop(ExitSignal);

impl Drop for ExitOnDrop {
    fn drop(&mut self) {
        self.0.exit(ExitStatus::Other(
            "the task waiting for the worker was stopped".into(),
        ));
    }
}

/// Forwards each stderr line of the worker to `tracing`.
async fn forward_stderr(stderr: ChildStderr, label: Label, pid: u32) {
    let mut reader = LineReader::new(stderr, STDERR_LINE_BYTES, Overflow::Truncate);
    loop {
        let (bytes, last) = match reader.next_line().await {
            Ok(Line::Complete(bytes) | Line::Truncated(bytes) | Line::TooLong(bytes)) => {
                (bytes, false)
            }
            Ok(Line::Eof { partial }) => (partial, true),
            Err(_) => return,
        };
        if !bytes.is_empty() || !last {
            let line = String::from_utf8_lossy(&bytes);
            tracing::info!(
                target: "kennel_process::stderr",
                pool = label.pool.as_deref(),
                slot = label.slot,
                pid,
                "{line}"
            );
        }
        if last {
            return;
        }
    }
}
