//! The conversation with a [`Coprocess`]: its ready line (JSON lines), then
//! one request and one reply at a time, with progress in between.

use std::sync::Arc;

use nix::sys::signal::Signal;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

use super::encode;
use super::read::Reading;
use super::reply;
use super::{Coprocess, Open, Phase};
use crate::crash;
use crate::error::ProcessError;
use crate::group::ProcessGroup;
use crate::json::JsonBytes;
use crate::lines::excerpt;
use crate::progress::Progress;

impl Coprocess {
    /// Waits until the worker is warm: its ready line `{"ready":true}` read
    /// (JSON lines; lines before it that are not an error line are logged
    /// at WARN and skipped), or its
    /// [`handshake`](crate::CoprocessSpec::handshake) answered and the
    /// `initialized` notification sent (JSON-RPC). At once with
    /// [`ReadyMode::Immediate`], without a handshake, or once ready. It has
    /// no time limit of its own (a pool's is `warmup_timeout`).
    ///
    /// # Errors
    ///
    /// - [`ProcessError::NotReady`] if the worker exits or closes its stdout
    ///   first, writes an error line `{"error":true,"message":"…"}` (the
    ///   reason is its message), or answers the handshake with an error.
    /// - [`ProcessError::Protocol`] if a line is over the size limit.
    /// - [`ProcessError::Crashed`] if the worker was already broken.
    ///
    /// In each case the worker's process group is killed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the worker keeps warming up, nothing it wrote is lost,
    /// and a later call goes on waiting for the same ready line.
    ///
    /// [`ReadyMode::Immediate`]: crate::ReadyMode::Immediate
    pub async fn ready(&mut self) -> Result<(), ProcessError> {
        match self.phase {
            Phase::Idle | Phase::InFlight => return Ok(()),
            Phase::Broken => return Err(self.crashed_now()),
            Phase::Warming => {}
        }
        if self.spec.framing.is_rpc() {
            return self.handshake().await;
        }
        loop {
            let bytes = self.next_message(Reading::WarmUp).await?;
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(mut value) if value.get("ready") == Some(&Value::Bool(true)) => {
                    self.phase = Phase::Idle;
                    // What it said of itself besides: its status row shows it.
                    if let Some(fields) = value.as_object_mut() {
                        fields.remove("ready");
                        // It echoes the id in every reply (the SDKs do).
                        let echoes = fields.remove(encode::ID_KEY) == Some(Value::Bool(true));
                        self.echoes_ids = echoes && self.spec.job_ids;
                        if !fields.is_empty() {
                            self.about = Some(value.to_string());
                        }
                    }
                    event!(debug, self, "worker is ready");
                    return Ok(());
                }
                Ok(value) if value.get("error") == Some(&Value::Bool(true)) => {
                    let reason = reply::message_of(value.get("message").cloned());
                    return Err(self.not_ready(reason).await);
                }
                _ => {
                    event!(
                        warn,
                        self,
                        line = %excerpt(&bytes),
                        "worker wrote a line before its ready line; skipped"
                    );
                }
            }
        }
    }

    /// Sends one request and returns the worker's reply.
    ///
    /// In JSON lines the request is one line of compact JSON (an object
    /// with kennel's `"kennel_id"` first, unless
    /// [`job_ids`](crate::CoprocessSpec::job_ids) is off) and its reply the
    /// next line that is not a progress line, held to the job's id. In the
    /// JSON-RPC framings it is a call (the spec's
    /// [`method`](crate::CoprocessSpec::method) with `request` as params,
    /// or `request` is `{"method": …, "params": …}`) with an id of
    /// kennel's, and its reply the response with that id: any other
    /// response is skipped. A worker still warming up is first awaited
    /// ([`ready`](Self::ready)).
    ///
    /// # Errors
    ///
    /// - [`ProcessError::Worker`] if the reply is `{"error":true,…}` or a
    ///   JSON-RPC error. The worker stays usable.
    /// - [`ProcessError::NotACall`] if, in JSON-RPC without a method,
    ///   `request` is not a method call. Nothing is sent.
    /// - [`ProcessError::Protocol`] if the output breaks the protocol (see
    ///   [Bad output](Self#bad-output)), or an earlier request was dropped
    ///   before its reply was read (JSON lines without cancel lines).
    /// - [`ProcessError::Crashed`] if the worker exits or closes its stdout
    ///   before it replies, or was already broken. In a pool (which watches
    ///   the worker's end) the job waits instead, up to a second, for the
    ///   pool to fail it with its own `kennel::Error::Crashed`.
    /// - The errors of [`ready`](Self::ready) while it warms up.
    ///
    /// After `Protocol` or `Crashed` the worker's process group has been
    /// killed, and every later request fails at once with `Crashed`.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe. Dropped while the request is being written, it
    /// kills the worker. Dropped later, in JSON lines without cancel lines,
    /// the next request fails with [`ProcessError::Protocol`] (the worker
    /// killed: its reply would answer the next request); in a framing that
    /// can cancel, the request stays in hand for [`cancel`](Self::cancel)
    /// (as a pool does), and in JSON-RPC a later request skips its reply.
    pub async fn request(&mut self, request: &Value) -> Result<Value, ProcessError> {
        self.call(request).await
    }

    /// As [`request`](Self::request), the reply as the worker wrote it
    /// (checked to be JSON, never re-serialised).
    ///
    /// # Errors
    ///
    /// As [`request`](Self::request).
    ///
    /// # Cancel safety
    ///
    /// As [`request`](Self::request).
    pub async fn request_raw(&mut self, request: &Value) -> Result<Box<RawValue>, ProcessError> {
        Ok(self.job(&encode::json(request)?, None).await?.into_raw())
    }

    /// As [`request_raw`](Self::request_raw), each progress item of the
    /// request handed to `on_progress` in order, all before the reply.
    ///
    /// # Errors
    ///
    /// As [`request`](Self::request).
    ///
    /// # Cancel safety
    ///
    /// As [`request`](Self::request).
    pub async fn request_with_progress(
        &mut self,
        request: &Value,
        mut on_progress: impl FnMut(Progress) + Send,
    ) -> Result<Box<RawValue>, ProcessError> {
        let job = encode::json(request)?;
        let reply = self.job(&job, Some(&mut on_progress)).await?;
        Ok(reply.into_raw())
    }

    /// As [`request_raw`](Self::request_raw), for a job that is already
    /// JSON text: its bytes go to the worker as they are (as the params of
    /// the call in JSON-RPC), and the reply is the worker's line (or the
    /// response's `result`) as it wrote it; no tree either way. This is
    /// what `kennel serve` runs each job with. Each progress item goes to
    /// `on_progress`; in `json-rpc` the call carries `_meta.progressToken`
    /// only when someone reads the progress (`on_progress`, or a pool that
    /// extends deadlines by it).
    ///
    /// ```no_run
    /// use kennel_process::{CoprocessSpec, JsonBytes};
    ///
    /// # async fn demo(worker: &mut kennel_process::Coprocess) -> Result<(), Box<dyn std::error::Error>> {
    /// let job = JsonBytes::new(br#"{"b": 1, "a": 2.50}"#.as_slice())?;
    /// let reply = worker.request_bytes(&job, None).await?;
    /// assert_eq!(reply.as_str(), r#"{"b": 1, "a": 2.50}"#); // from an echo worker
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`request`](Self::request).
    ///
    /// # Cancel safety
    ///
    /// As [`request`](Self::request).
    pub async fn request_bytes<B: AsRef<[u8]>>(
        &mut self,
        job: &JsonBytes<B>,
        on_progress: Option<&mut (dyn FnMut(Progress) + Send)>,
    ) -> Result<JsonBytes, ProcessError> {
        self.job(job.as_bytes(), on_progress).await
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
        let reply = self.job(&encode::json(request)?, None).await?;
        serde_json::from_slice(reply.as_bytes()).map_err(|source| ProcessError::Decode { source })
    }

    /// Sends `job` and reads its reply. See [`Self::request`]. A crash is
    /// left to a pool that watches the end ([`crash::leave_to_pool`]).
    async fn job(
        &mut self,
        job: &[u8],
        on_progress: Option<&mut (dyn FnMut(Progress) + Send)>,
    ) -> Result<JsonBytes, ProcessError> {
        let method = self.spec.method.clone();
        let reply = self.exchange(job, method.as_deref(), on_progress).await;
        if let Err(ProcessError::Crashed { .. }) = &reply {
            crash::leave_to_pool(self.watched).await;
        }
        reply
    }

    /// Sends `job` and reads its reply, the worker's end as `Crashed`. In
    /// JSON-RPC the call is of `method` with `job` as params (the spec's
    /// method for a job, kennel's own for a load), or without one `job` is
    /// the call.
    pub(super) async fn exchange(
        &mut self,
        job: &[u8],
        method: Option<&str>,
        on_progress: Option<&mut (dyn FnMut(Progress) + Send)>,
    ) -> Result<JsonBytes, ProcessError> {
        // A token only for someone who reads the progress.
        let token = on_progress.is_some() || self.heartbeat.is_watched();
        let (open, guard) = self.begin(job, method, token).await?;
        let mut ignore = |_: Progress| {};
        let on_progress = on_progress.unwrap_or(&mut ignore);
        let result = if self.spec.framing.is_rpc() {
            self.rpc_reply(&open, None, on_progress).await
        } else {
            self.line_reply(&open, on_progress).await
        };
        guard.disarm();
        result
    }

    /// Writes `job` as the request in hand (see [`exchange`](Self::exchange);
    /// `token`: a JSON-RPC call carries a progress token of kennel's when
    /// it has none of its own), first awaiting the warm-up. Returns the
    /// request in hand and the guard that kills the worker if the caller is
    /// dropped before the reply, armed only where the framing cannot
    /// cancel.
    pub(super) async fn begin(
        &mut self,
        job: &[u8],
        method: Option<&str>,
        token: bool,
    ) -> Result<(Open, KillOnDrop), ProcessError> {
        let rpc = self.spec.framing.is_rpc();
        match self.phase {
            Phase::Warming => self.ready().await?,
            Phase::Idle if !rpc => {
                if let Some(head) = self.stdout.lines().unsolicited() {
                    let message = format!(
                        "the worker wrote output no request asked for, so replies would no \
                         longer match requests; it reads {}",
                        excerpt(&head)
                    );
                    return Err(self.protocol_error(message).await);
                }
            }
            Phase::Idle => {}
            Phase::InFlight if !rpc => {
                let message = "an earlier request was dropped before its reply was read, so \
                               replies no longer match requests; the worker was killed";
                return Err(self.protocol_error(message.to_owned()).await);
            }
            // The dropped request's reply will be skipped by its id.
            Phase::InFlight => {}
            Phase::Broken => return Err(self.crashed_now()),
        }
        let id = self.next_id;
        let (out, carries_id, token) = if rpc {
            let (out, token) = encode::call(self.spec.framing, id, method, job, token)?;
            self.next_id += 1;
            (out, false, token)
        } else {
            let (out, carries_id) = encode::line(job, self.spec.job_ids.then_some(id))?;
            self.next_id += u64::from(carries_id);
            (out, carries_id, Value::Null)
        };
        let open = Open {
            id,
            carries_id,
            token,
        };
        self.phase = Phase::InFlight;
        self.open = Some(open.clone());
        // Dropping the caller from here on leaves the stream out of step.
        let mut guard = KillOnDrop::new(&self.group);
        self.send(&out, Reading::Reply, "a request").await?;
        // Written whole: a framing that can cancel settles a drop from here.
        if self.can_cancel() {
            guard.0 = None;
        }
        Ok((open, guard))
    }
}

/// Kills the process group if a request is dropped half-way.
pub(super) struct KillOnDrop(Option<Arc<ProcessGroup>>);

impl KillOnDrop {
    pub(super) fn new(group: &Arc<ProcessGroup>) -> Self {
        Self(Some(Arc::clone(group)))
    }

    pub(super) fn disarm(mut self) {
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
