//! Reading the reply to the request in hand: the next line that is not a
//! progress line (JSON lines), or the response with its id (JSON-RPC), with
//! progress handed on and everything else skipped.

use super::read::Reading;
use super::reply::{self, LineKind};
use super::rpc::{self, Inbound};
use super::{Coprocess, Open, Phase};
use crate::error::ProcessError;
use crate::json::JsonBytes;
use crate::lines::excerpt;
use crate::progress::Progress;

impl Coprocess {
    /// JSON lines: the next line that is not a progress line.
    pub(super) async fn line_reply(
        &mut self,
        on_progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<JsonBytes, ProcessError> {
        loop {
            let bytes = self.next_message(Reading::Reply).await?;
            match reply::classify(bytes) {
                LineKind::Reply(raw) => {
                    self.settled();
                    return Ok(raw);
                }
                LineKind::Error(err) => {
                    self.settled();
                    return Err(err);
                }
                LineKind::Progress(progress) => {
                    self.heartbeat.beat();
                    on_progress(progress);
                }
                LineKind::Ready => {
                    let err = ProcessError::Protocol {
                        message: "the worker wrote a second ready line where a reply was due, \
                                  so replies would no longer match requests"
                            .to_owned(),
                        stderr: Vec::new(),
                    };
                    return Err(self.break_stream(err).await);
                }
                LineKind::NotJson(err, excerpt) => {
                    let err = ProcessError::Protocol {
                        message: format!("reply is not JSON ({err}); it reads {excerpt}"),
                        stderr: Vec::new(),
                    };
                    return Err(self.break_stream(err).await);
                }
            }
        }
    }

    /// JSON-RPC: the response with the request's id; progress with its
    /// token goes to `on_progress`; anything else is skipped (a request of
    /// the worker's is answered).
    pub(super) async fn rpc_reply(
        &mut self,
        open: &Open,
        on_progress: &mut (dyn FnMut(Progress) + Send),
    ) -> Result<JsonBytes, ProcessError> {
        loop {
            let bytes = self.next_message(Reading::Reply).await?;
            match rpc::classify(&bytes) {
                Inbound::Response {
                    id: Some(id),
                    outcome,
                } if id == open.id => {
                    self.settled();
                    return outcome.map(JsonBytes::from_raw);
                }
                Inbound::Progress { token, progress } if token == open.token => {
                    self.heartbeat.beat();
                    on_progress(progress);
                }
                // Boxed: its state would grow every request's future (see
                // `break_stream`), and a skipped message is parsed JSON already.
                other => Box::pin(self.skip(other, &bytes)).await,
            }
        }
    }

    /// A message that is not for the request in hand: logged, and answered
    /// when it is a request of the worker's.
    pub(super) async fn skip(&mut self, message: Inbound, bytes: &[u8]) {
        match message {
            Inbound::Request { id, method } => {
                let answer = rpc::answer(self.talk.framing, &id, &method);
                // A closed pipe shows as the end of stdout, next read.
                let _ = self.write(&answer).await;
            }
            Inbound::Notification { method } => {
                tracing::debug!(
                    pool = self.label.pool.as_deref(),
                    slot = self.label.slot,
                    pid = self.pid,
                    %method,
                    "skipped a notification"
                );
            }
            Inbound::Response { .. } | Inbound::Progress { .. } => {
                tracing::debug!(
                    pool = self.label.pool.as_deref(),
                    slot = self.label.slot,
                    pid = self.pid,
                    message = %excerpt(bytes),
                    "skipped a message that is not for the request in hand"
                );
            }
            Inbound::Other | Inbound::NotJson(_) => {
                let why = match &message {
                    Inbound::NotJson(err) => err.as_str(),
                    _ => "JSON, but not a JSON-RPC message",
                };
                tracing::warn!(
                    pool = self.label.pool.as_deref(),
                    slot = self.label.slot,
                    pid = self.pid,
                    line = %excerpt(bytes),
                    why,
                    "worker wrote a message that is not JSON-RPC; skipped"
                );
            }
        }
    }

    /// The request in hand has its reply.
    pub(super) fn settled(&mut self) {
        self.phase = Phase::Idle;
        self.open = None;
    }
}
