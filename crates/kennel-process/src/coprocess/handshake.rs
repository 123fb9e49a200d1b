//! The warm-up of a JSON-RPC coprocess: its `initialize` handshake.

use super::read::Reading;
use super::rpc::{self, Inbound};
use super::{Coprocess, Phase};
use crate::error::ProcessError;

/// The id of the handshake's `initialize`; jobs count from 1.
const HANDSHAKE_ID: u64 = 0;

impl Coprocess {
    /// Sends a request of `method` and waits for its answer, which is
    /// dropped (an error too): part of the warm-up.
    async fn prime(&mut self, method: &str) -> Result<(), ProcessError> {
        let framing = self.spec.framing;
        let id = self.next_id;
        self.next_id += 1;
        let bytes = rpc::message(framing, Some(id), method, None);
        self.send(&bytes, Reading::WarmUp, method).await?;
        loop {
            let bytes = self.next_message(Reading::WarmUp).await?;
            match rpc::classify(&bytes) {
                Inbound::Response { id: Some(got), .. } if got == id => return Ok(()),
                other => self.skip(other, &bytes).await,
            }
        }
    }

    /// Sends `initialize` (once), waits for its response, sends the
    /// `initialized` notification: the worker is ready (at once without a
    /// handshake).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe once `initialize` is written: a later call goes on
    /// waiting for the same response.
    pub(super) async fn handshake(&mut self) -> Result<(), ProcessError> {
        let Some(handshake) = self.spec.handshake.clone() else {
            self.phase = Phase::Idle;
            return Ok(());
        };
        let framing = self.spec.framing;
        if !self.handshake_sent {
            let params = handshake.params_for(framing, std::process::id());
            let bytes = rpc::message(framing, Some(HANDSHAKE_ID), "initialize", Some(&params));
            self.send(&bytes, Reading::WarmUp, "the handshake").await?;
            self.handshake_sent = true;
        }
        loop {
            let bytes = self.next_message(Reading::WarmUp).await?;
            match rpc::classify(&bytes) {
                Inbound::Response {
                    id: Some(HANDSHAKE_ID),
                    outcome,
                } => {
                    let result = match outcome {
                        Ok(result) => result,
                        Err(ProcessError::Worker { message, .. }) => {
                            let reason = format!("it answered initialize with an error: {message}");
                            return Err(self.not_ready(reason).await);
                        }
                        Err(other) => return Err(self.not_ready(other.to_string()).await),
                    };
                    self.handshake_result = Some(result);
                    if let Some(method) = &handshake.initialized {
                        let note =
                            rpc::message(framing, None, method, Some(&serde_json::json!({})));
                        self.send(&note, Reading::WarmUp, method).await?;
                    }
                    for method in &handshake.primes {
                        self.prime(method).await?;
                    }
                    self.phase = Phase::Idle;
                    event!(debug, self, "worker answered the handshake; ready");
                    return Ok(());
                }
                other => self.skip(other, &bytes).await,
            }
        }
    }
}
