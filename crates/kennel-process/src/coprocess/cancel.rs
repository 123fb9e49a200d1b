//! Cancelling the request in hand without a kill: the framing's cancel
//! message, then the wait for the worker's answer (ADR 0035).

use std::time::Duration;

use kennel::CancelOutcome;
use nix::sys::signal::Signal;

use super::read::Reading;
use super::reply::{self, LineKind};
use super::rpc::{self, Inbound};
use super::{Coprocess, Open, Phase};
use crate::error::ProcessError;
use crate::framing::Framing;

/// The JSON-lines cancel line.
const CANCEL_LINE: &[u8] = b"{\"cancel\":true}\n";

impl Coprocess {
    /// Asks the worker to stop the request in hand (one whose future was
    /// dropped after it was written) and waits up to `grace` for its
    /// answer.
    ///
    /// - JSON lines with cancel lines: writes `{"cancel":true}`; any reply
    ///   (the cancelled error or the real reply) settles it.
    /// - `json-rpc`: writes `notifications/cancelled` with the request's id,
    ///   then a `ping`; the response to either settles it (an MCP server
    ///   need not answer a cancelled request, but answers the ping).
    /// - `content-length`: writes `$/cancelRequest`; the response to the
    ///   request settles it (LSP answers cancelled requests).
    ///
    /// Returns [`CancelOutcome::Kept`] when settled in time (or when no
    /// request was in hand): the worker takes the next request. Otherwise
    /// the process group is killed and it returns
    /// [`CancelOutcome::Killed`]. Progress and other messages meanwhile are
    /// skipped.
    ///
    /// # Cancel safety
    ///
    /// Dropped before it returns, the request stays in hand: a later call
    /// goes on (a pool kills the worker instead).
    pub async fn cancel(&mut self, grace: Duration) -> CancelOutcome {
        match self.phase {
            Phase::Idle => return CancelOutcome::Kept,
            Phase::Warming | Phase::Broken => return CancelOutcome::Killed,
            Phase::InFlight => {}
        }
        let Some(open) = self.open.clone() else {
            return CancelOutcome::Kept;
        };
        if !self.can_cancel() {
            self.kill_in_hand();
            return CancelOutcome::Killed;
        }
        let framing = self.talk.framing;
        let outcome = tokio::time::timeout(grace, async {
            let ping = (framing == Framing::JsonRpc).then(|| {
                let id = self.next_id;
                self.next_id += 1;
                id
            });
            let mut bytes = if framing.is_rpc() {
                rpc::cancel(framing, open.id)
            } else {
                CANCEL_LINE.to_vec()
            };
            if let Some(ping) = ping {
                bytes.extend(rpc::request(framing, ping, "ping", None));
            }
            self.write(&bytes)
                .await
                .map_err(|_| ProcessError::Crashed {
                    status: None,
                    stderr: Vec::new(),
                })?;
            self.answer_to(&open, ping).await
        })
        .await;
        match outcome {
            Ok(Ok(())) => {
                self.settled();
                if !framing.is_rpc() {
                    self.nothing_after_reply();
                }
                tracing::debug!(
                    pool = self.label.pool.as_deref(),
                    slot = self.label.slot,
                    pid = self.pid,
                    "worker answered the cancel; kept"
                );
                CancelOutcome::Kept
            }
            Ok(Err(_)) | Err(_) => {
                self.kill_in_hand();
                CancelOutcome::Killed
            }
        }
    }

    /// Reads until the worker answers the request in hand (or the `ping`).
    async fn answer_to(&mut self, open: &Open, ping: Option<u64>) -> Result<(), ProcessError> {
        let id = open.id;
        loop {
            let bytes = self.next_message(Reading::Reply).await?;
            if self.talk.framing.is_rpc() {
                match rpc::classify(&bytes) {
                    Inbound::Response { id: Some(got), .. } if got == id || Some(got) == ping => {
                        return Ok(());
                    }
                    other => self.skip(other, &bytes).await,
                }
            } else {
                let line = reply::classify(bytes);
                if let Err(message) = self.check_id(open, &line) {
                    return Err(ProcessError::Protocol {
                        message,
                        stderr: Vec::new(),
                    });
                }
                match line.kind {
                    LineKind::Progress(_) => {}
                    LineKind::Reply(_) | LineKind::Error(_) => return Ok(()),
                    LineKind::Ready | LineKind::NotJson(..) => {
                        return Err(ProcessError::Protocol {
                            message: "the worker answered a cancel with a line that is not a reply"
                                .to_owned(),
                            stderr: Vec::new(),
                        });
                    }
                }
            }
        }
    }

    /// The stream is out of step (a failed cancel, a line after a reply):
    /// the group goes.
    pub(super) fn kill_in_hand(&mut self) {
        self.phase = Phase::Broken;
        self.group.signal(Signal::SIGKILL);
        self.stdin = None;
    }
}
