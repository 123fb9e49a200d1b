//! The conversation with a [`Coprocess`]: its ready line, then one request
//! line and one reply line at a time.

use std::sync::Arc;

use nix::sys::signal::Signal;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::{Coprocess, Phase};
use crate::error::{NO_MESSAGE, ProcessError};
use crate::group::ProcessGroup;
use crate::lines::{Line, excerpt};

impl Coprocess {
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
    ///
    /// [`ReadyMode::Immediate`]: crate::ReadyMode::Immediate
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
                    let stderr = self.last_words().await;
                    return Err(ProcessError::NotReady {
                        reason,
                        status,
                        stderr,
                    });
                }
                Err(err) => {
                    let reason = format!("reading its stdout failed: {err}");
                    let status = self.break_after_eof(&reason).await;
                    let stderr = self.last_words().await;
                    return Err(ProcessError::NotReady {
                        reason,
                        status,
                        stderr,
                    });
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
                    let err = ProcessError::NotReady {
                        reason: error_message(&value),
                        status: None,
                        stderr: Vec::new(),
                    };
                    let mut err = self.break_stream(err).await;
                    if let ProcessError::NotReady { status, .. } = &mut err {
                        *status = self.status_now();
                    }
                    return Err(err);
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

    /// Writes `line` and reads the reply. See [`Self::request`].
    pub(super) async fn exchange(&mut self, line: Vec<u8>) -> Result<Value, ProcessError> {
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
                        stderr: Vec::new(),
                    };
                    return Err(self.break_stream(err).await);
                }
            }
            Phase::InFlight => {
                let err = ProcessError::Protocol {
                    message: "an earlier request was dropped before its reply was read, so \
                              replies no longer match requests; the worker was killed"
                        .to_owned(),
                    stderr: Vec::new(),
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
            let stderr = self.last_words().await;
            return Err(ProcessError::Crashed { status, stderr });
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
                    let stderr = self.last_words().await;
                    break Err(ProcessError::Crashed { status, stderr });
                }
                Err(err) => {
                    let status = self
                        .break_after_eof(&format!("reading a reply failed: {err}"))
                        .await;
                    let stderr = self.last_words().await;
                    break Err(ProcessError::Crashed { status, stderr });
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
                        stderr: Vec::new(),
                    };
                    break Err(self.break_stream(err).await);
                }
            }
        };
        guard.disarm();
        result
    }

    pub(super) fn too_long(&self, head: &[u8]) -> ProcessError {
        ProcessError::Protocol {
            message: format!(
                "a line is over the {}-byte limit; it starts with {}",
                self.max_line_bytes,
                excerpt(head)
            ),
            stderr: Vec::new(),
        }
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
