//! Cancelling the request in hand without a kill: the framing's cancel
//! message, then the wait for the worker's answer (ADR 0035).

use std::time::Duration;

use kennel::CancelOutcome;
use nix::sys::signal::Signal;

use super::rpc;
use super::{Coprocess, Phase};
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
    /// request was in hand); otherwise the process group is killed:
    /// [`CancelOutcome::Killed`]. Other messages meanwhile are skipped.
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
        let framing = self.spec.framing;
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
                bytes.extend(rpc::message(framing, Some(ping), "ping", None));
            }
            if self.write(&bytes).await.is_err() {
                return false;
            }
            // Any answer settles it, an error reply too.
            let answer = if framing.is_rpc() {
                self.rpc_reply(&open, ping, &mut |_| {}).await
            } else {
                self.line_reply(&open, &mut |_| {}).await
            };
            matches!(answer, Ok(_) | Err(ProcessError::Worker { .. }))
        })
        .await;
        match outcome {
            Ok(true) => {
                event!(debug, self, "worker answered the cancel; kept");
                CancelOutcome::Kept
            }
            Ok(false) | Err(_) => {
                self.kill_in_hand();
                CancelOutcome::Killed
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
