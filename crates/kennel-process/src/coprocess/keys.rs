//! Keys: a load or an unload of a key (a model, a workspace, a session) is
//! a request of kennel's own. In JSON lines it is `{"kennel_load": "…"}`
//! (`kennel_unload`): the request namespace is the caller's, and keys that
//! start with `kennel_` are kennel's, as `kennel_id` is. In JSON-RPC it is
//! a call of the spec's load (unload) method with params `{"key": "…"}`,
//! and nothing without one.

use std::sync::Arc;

use kennel::BoxError;
use serde_json::json;

use super::Coprocess;
use super::encode;
use crate::error::ProcessError;

/// The key of a JSON-lines load request.
pub(crate) const LOAD_KEY: &str = "kennel_load";

/// The key of a JSON-lines unload request.
pub(crate) const UNLOAD_KEY: &str = "kennel_unload";

impl Coprocess {
    /// Asks the worker to load `key`: in JSON lines the request
    /// `{"kennel_load": key}`, in JSON-RPC a call of the spec's
    /// [`load_method`](crate::CoprocessSpec::load_method) with params
    /// `{"key": key}` (without one, nothing is sent). Any reply but an error
    /// is success. A pool calls it through
    /// [`Worker::load`](kennel::Worker::load).
    ///
    /// # Errors
    ///
    /// As [`request`](Self::request): [`ProcessError::Worker`] when the
    /// worker answers with an error (it stays usable),
    /// [`ProcessError::Crashed`] when it ends before it answers (at once,
    /// even in a pool, which sees the end as usual).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, as [`request`](Self::request): a pool that drops
    /// it retires the worker.
    pub async fn load(&mut self, key: &str) -> Result<(), ProcessError> {
        let method = self.spec.load_method.clone();
        self.key_request(LOAD_KEY, method, key).await
    }

    /// Asks the worker to let go of `key`: `{"kennel_unload": key}` in JSON
    /// lines, a call of the spec's
    /// [`unload_method`](crate::CoprocessSpec::unload_method) in JSON-RPC
    /// (without one, nothing is sent).
    ///
    /// # Errors
    ///
    /// As [`load`](Self::load).
    ///
    /// # Cancel safety
    ///
    /// As [`load`](Self::load).
    pub async fn unload(&mut self, key: &str) -> Result<(), ProcessError> {
        let method = self.spec.unload_method.clone();
        self.key_request(UNLOAD_KEY, method, key).await
    }

    /// Sends the key request of `line_key` (JSON lines) or `method`
    /// (JSON-RPC) and reads its reply.
    async fn key_request(
        &mut self,
        line_key: &str,
        method: Option<Arc<str>>,
        key: &str,
    ) -> Result<(), ProcessError> {
        if self.spec.framing.is_rpc() {
            let Some(method) = method else {
                return Ok(());
            };
            let params = encode::json(&json!({ "key": key }))?;
            self.exchange(&params, Some(&method), None).await?;
        } else {
            let request = encode::json(&json!({ line_key: key }))?;
            self.exchange(&request, None, None).await?;
        }
        Ok(())
    }
}

/// A key request's error for the pool: the worker's own message when it
/// answered with an error (the job fails with it), else the whole error.
pub(super) fn for_pool(err: ProcessError) -> BoxError {
    match err {
        ProcessError::Worker { message, .. } => message.into(),
        other => other.into(),
    }
}
