//! A job that is a notification: written in the worker's framing, no
//! reply awaited (a language server's `textDocument/didOpen`).

use serde::Deserialize;
use serde_json::Value;

use super::exchange::KillOnDrop;
use super::read::Reading;
use super::rpc;
use super::{Coprocess, Phase};
use crate::error::ProcessError;
use crate::json::JsonBytes;

/// A notification job: `{"method": …, "params": …}` and no other key.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoteShape {
    method: String,
    #[serde(default)]
    params: Option<Value>,
}

impl Coprocess {
    /// Sends the JSON-RPC notification `method` with `params` (none when
    /// `None`) in the worker's framing, and returns once it is written (a
    /// notification has no reply), first awaiting [`ready`](Self::ready)
    /// if the worker is warming up. What the worker writes meanwhile is
    /// read by the next request: skipped, or answered if a request.
    ///
    /// # Errors
    ///
    /// - [`ProcessError::NotACall`] in the `json-lines` framing, which has
    ///   no notifications. Nothing is sent.
    /// - [`ProcessError::Crashed`] if the write fails (the worker has
    ///   ended) or the worker was already broken.
    /// - The errors of [`ready`](Self::ready) while it warms up.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped while writing, it kills the worker (a
    /// half-written message would break the stream); dropped while it
    /// waits for `ready`, nothing is lost.
    pub async fn notify(
        &mut self,
        method: &str,
        params: Option<&Value>,
    ) -> Result<(), ProcessError> {
        let framing = self.spec.framing;
        if !framing.is_rpc() {
            return Err(ProcessError::NotACall {
                message: format!("the {framing} framing has no notifications"),
            });
        }
        match self.phase {
            Phase::Warming => self.ready().await?,
            Phase::Idle | Phase::InFlight => {}
            Phase::Broken => return Err(self.crashed_now()),
        }
        let bytes = rpc::message(framing, None, method, params);
        let guard = KillOnDrop::new(&self.group);
        let written = self.send(&bytes, Reading::Reply, "a notification").await;
        guard.disarm();
        written
    }

    /// As [`notify`](Self::notify), for a job that is JSON text
    /// `{"method": "…", "params": …}` (`params` may be left out), whatever
    /// [`method`](crate::CoprocessSpec::method) the spec gives its calls.
    ///
    /// # Errors
    ///
    /// [`ProcessError::NotACall`] if `job` is not in that shape (nothing
    /// is sent), and the errors of [`notify`](Self::notify).
    ///
    /// # Cancel safety
    ///
    /// As [`notify`](Self::notify).
    pub async fn notify_bytes<B: AsRef<[u8]>>(
        &mut self,
        job: &JsonBytes<B>,
    ) -> Result<(), ProcessError> {
        let shape = serde_json::from_slice::<NoteShape>(job.as_bytes()).map_err(|err| {
            ProcessError::NotACall {
                message: format!("a notification is {{\"method\": \"…\", \"params\": …}}: {err}"),
            }
        })?;
        self.notify(&shape.method, shape.params.as_ref()).await
    }
}
