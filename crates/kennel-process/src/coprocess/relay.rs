//! Relaying a client's JSON-RPC conversation through a worker (kennel's
//! MCP gateway): the client's request with an id of kennel's, the worker's
//! notifications and requests handed to the client, the client's answers
//! written back.

use std::fmt;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::exchange::KillOnDrop;
use super::read::Reading;
use super::rpc::{self, Inbound};
use super::{Coprocess, Open};
use crate::error::ProcessError;
use crate::lines::excerpt;

/// The client's side of a relayed conversation: where the worker's own
/// messages go (its notifications and its requests to the client), and
/// the client's answers to those requests, to write to the worker.
pub struct Relay {
    forward: Box<dyn FnMut(Value) -> bool + Send>,
    answers: mpsc::Receiver<Value>,
}

impl Relay {
    /// A client that takes the worker's messages through `forward` and
    /// answers the worker's requests on `answers` (each a JSON-RPC
    /// response, with the id the worker gave its request).
    ///
    /// `forward` is handed every message of the worker's that is not the
    /// response in hand, as the worker wrote it; it returns whether the
    /// client took it. A worker's request the client did not take is
    /// answered from the spec's [`answer`](crate::CoprocessSpec::answer)s
    /// (or "method not found"), as outside a relay; a `ping` is always
    /// answered by kennel.
    pub fn new(
        forward: impl FnMut(Value) -> bool + Send + 'static,
        answers: mpsc::Receiver<Value>,
    ) -> Self {
        Self {
            forward: Box::new(forward),
            answers,
        }
    }
}

impl fmt::Debug for Relay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Relay").finish_non_exhaustive()
    }
}

impl Coprocess {
    /// Sends the client's JSON-RPC `request` (`{"id", "method", "params"}`)
    /// with an id of kennel's, and returns the worker's response (a result
    /// or an error object, as the worker wrote it) with the request's own
    /// id. Until then the worker's other messages go to `relay`, and the
    /// client's answers from it are written to the worker. The request's
    /// `_meta.progressToken`, if any, is the one its progress carries (and
    /// beats the pool's heartbeat).
    ///
    /// # Errors
    ///
    /// - [`ProcessError::NotACall`] if `request` has no method (nothing is
    ///   sent), or in the `json-lines` framing.
    /// - The errors of [`request`](Self::request): the worker's end, output
    ///   that breaks the protocol, a failed warm-up.
    ///
    /// # Cancel safety
    ///
    /// As [`request`](Self::request): dropped after the request was
    /// written, it stays in hand for [`cancel`](Self::cancel) (as a pool
    /// does on a dropped job); dropped while writing, the worker is killed.
    pub async fn relay(
        &mut self,
        request: &Value,
        relay: &mut Relay,
    ) -> Result<Value, ProcessError> {
        let framing = self.spec.framing;
        let method = request.get("method").and_then(Value::as_str);
        let (Some(method), true) = (method, framing.is_rpc()) else {
            return Err(ProcessError::NotACall {
                message: format!(
                    "a relayed message is a JSON-RPC request with a method, to a JSON-RPC \
                     worker (this one speaks {framing})"
                ),
            });
        };
        let mut call = json!({ "method": method });
        if let Some(params) = request.get("params") {
            call["params"] = params.clone();
        }
        let job = super::encode::json(&call)?;
        let (open, guard) = self.begin(&job, None, false).await?;
        let reply = self.relay_reply(&open, relay).await;
        guard.disarm();
        let mut response = reply?;
        response["id"] = request.get("id").cloned().unwrap_or(Value::Null);
        Ok(response)
    }

    /// Between requests: hands the worker's messages to `relay` and writes
    /// the client's answers, until the worker's stream ends or breaks (a
    /// worker still warming up is first awaited). Returns only then, with
    /// the error of that end.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe while it waits (a message half read stays in the
    /// reader); dropped while it writes an answer, the worker is killed (a
    /// half-written message would break the stream).
    pub async fn relay_idle(&mut self, relay: &mut Relay) -> ProcessError {
        if let Err(err) = self.ready().await {
            return err;
        }
        loop {
            let bytes = match self.relay_next(relay).await {
                Ok(bytes) => bytes,
                Err(err) => return err,
            };
            match rpc::classify(&bytes) {
                Inbound::Response { .. } => self.skip(Inbound::Notification, &bytes).await,
                other => self.hand_on(other, &bytes, relay).await,
            }
        }
    }

    /// The response to `open`, the worker's other messages handed on.
    async fn relay_reply(&mut self, open: &Open, relay: &mut Relay) -> Result<Value, ProcessError> {
        loop {
            let bytes = self.relay_next(relay).await?;
            match rpc::classify(&bytes) {
                Inbound::Response { id: Some(id), .. } if id == open.id => {
                    self.settled();
                    return match serde_json::from_slice(&bytes) {
                        Ok(response) => Ok(response),
                        Err(err) => Err(self
                            .protocol_error(format!("a response is not JSON: {err}"))
                            .await),
                    };
                }
                Inbound::Progress { token, .. } if token == open.token => {
                    self.heartbeat.beat();
                    forward(relay, &bytes);
                }
                // A response to an earlier request (dropped, or a cancel's
                // ping), or nobody's.
                other @ (Inbound::Response { .. } | Inbound::NotRpc(_)) => {
                    self.skip(other, &bytes).await;
                }
                other => self.hand_on(other, &bytes, relay).await,
            }
        }
    }

    /// The worker's next message; the client's answers that come first are
    /// written to the worker meanwhile.
    async fn relay_next(&mut self, relay: &mut Relay) -> Result<Vec<u8>, ProcessError> {
        loop {
            let answer = tokio::select! {
                biased;
                bytes = self.next_message(Reading::Reply) => return bytes,
                Some(answer) = relay.answers.recv() => answer,
            };
            let bytes = rpc::frame(self.spec.framing, answer.to_string().into_bytes());
            let guard = KillOnDrop::new(&self.group);
            // A closed pipe shows as the end of stdout, next read.
            let _ = self.write(&bytes).await;
            guard.disarm();
        }
    }

    /// A notification or a request of the worker's: to the client if it
    /// takes it, else a request is answered as outside a relay.
    async fn hand_on(&mut self, message: Inbound, bytes: &[u8], relay: &mut Relay) {
        let taken = match &message {
            Inbound::Request { method, .. } if method == "ping" => false,
            Inbound::Request { .. } | Inbound::Notification | Inbound::Progress { .. } => {
                forward(relay, bytes)
            }
            _ => false,
        };
        if !taken {
            self.skip(message, bytes).await;
        }
    }
}

/// Hands `bytes` (a JSON-RPC message) to the client; whether it took it.
fn forward(relay: &mut Relay, bytes: &[u8]) -> bool {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(message) => (relay.forward)(message),
        Err(err) => {
            tracing::warn!(message = %excerpt(bytes), %err, "not JSON; not relayed");
            false
        }
    }
}
