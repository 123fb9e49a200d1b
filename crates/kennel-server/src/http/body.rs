//! Request bodies read within bounds: at most `body_limit` bytes each,
//! within `body_timeout` from the first byte asked for to the last, and at
//! most `max_bodies` parsed at once, so that many large bodies cannot
//! multiply their memory at once (a 1 MiB body of zeros parses into some
//! 6.5 MB of JSON values). Reading takes no permit: a slow upload holds
//! nothing but its own bytes, and only until its timeout.
//!
//! A job's JSON body is checked, not parsed into a tree: it goes to the
//! worker as the bytes it came in.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use kennel_process::JsonBytes;
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::ApiError;

/// How long a request body may take to arrive when no limit is given.
pub(crate) const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How many bodies are read and parsed at once when no bound is given.
pub(crate) const DEFAULT_MAX_BODIES: usize = 16;

/// Reads request bodies within the service's bounds. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct BodyGate {
    permits: Arc<Semaphore>,
    limit: usize,
    timeout: Duration,
}

impl BodyGate {
    /// At most `limit` bytes per body, `at_once` bodies at a time (at least
    /// 1), each within `timeout`.
    pub(crate) fn new(limit: usize, at_once: usize, timeout: Duration) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(at_once.max(1))),
            limit,
            timeout,
        }
    }

    /// The largest body, in bytes.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Reads a JSON body and checks that it is one JSON value (as
    /// [`parse_json`] would parse it), keeping its bytes as they
    /// came: no tree is built, so no permit is taken.
    ///
    /// # Errors
    ///
    /// [`ApiError::TooLarge`] past the limit, [`ApiError::BodyTimeout`]
    /// past the timeout, [`ApiError::BadRequest`] for a body that breaks
    /// off, [`ApiError::BadJson`] for one that is empty or not JSON.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future drops the body.
    pub(crate) async fn json_bytes(&self, body: Body) -> Result<JsonBytes<Bytes>, ApiError> {
        let bytes = self.timed(read(body, self.limit)).await?;
        not_empty(&bytes)?;
        JsonBytes::new(bytes).map_err(|e| ApiError::BadJson {
            message: e.to_string(),
        })
    }

    /// Reads a job's body of any kind (JSON; bytes or multipart, within
    /// the bytes `upload` gives, asked only for those; see
    /// [`crate::payload`]) within the gate's timeout, as JSON bytes: a
    /// JSON body as [`json_bytes`](Self::json_bytes) does, the others as
    /// the JSON they stand for.
    ///
    /// # Errors
    ///
    /// As [`json_bytes`](Self::json_bytes), and [`crate::payload::job_of`]'s.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future drops the body and the permit.
    pub(crate) async fn job(
        &self,
        headers: &axum::http::HeaderMap,
        body: Body,
        upload: impl FnOnce() -> usize,
    ) -> Result<JsonBytes<Bytes>, ApiError> {
        let content_type = headers
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let essence = content_type.split(';').next().unwrap_or_default().trim();
        if !essence.eq_ignore_ascii_case("application/octet-stream")
            && !essence.eq_ignore_ascii_case("multipart/form-data")
        {
            return self.json_bytes(body).await;
        }
        let _permit = self.permits.acquire().await.map_err(|_| ApiError::Closed)?;
        let job = crate::payload::job_of(content_type, body, upload());
        let job = self.timed(job).await?;
        let job = JsonBytes::from_value(&job).map_err(|e| ApiError::Internal {
            detail: format!("the job could not be written as JSON: {e}"),
        })?;
        Ok(job.convert())
    }

    /// Reads the whole body and takes one of the gate's permits, for the
    /// caller to parse it while it holds the permit.
    ///
    /// # Errors
    ///
    /// As [`json_bytes`](Self::json_bytes), but for parsing.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future drops the body and the permit.
    pub(crate) async fn bytes(
        &self,
        body: Body,
    ) -> Result<(Bytes, OwnedSemaphorePermit), ApiError> {
        let bytes = self.timed(read(body, self.limit)).await?;
        let permit = self.permits.clone().acquire_owned().await;
        Ok((bytes, permit.map_err(|_| ApiError::Closed)?))
    }

    /// `reading` within the body timeout.
    async fn timed<T>(
        &self,
        reading: impl Future<Output = Result<T, ApiError>>,
    ) -> Result<T, ApiError> {
        let after = self.timeout;
        tokio::time::timeout(after, reading)
            .await
            .unwrap_or(Err(ApiError::BodyTimeout { after }))
    }
}

/// Reads the whole body, at most `limit` bytes.
///
/// # Errors
///
/// [`ApiError::TooLarge`] past the limit, [`ApiError::BadRequest`] for a
/// body that breaks off.
pub(crate) async fn read(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            Err(ApiError::TooLarge { limit })
        }
        Err(e) => Err(ApiError::BadRequest {
            message: format!("the body could not be read: {e}"),
        }),
    }
}

/// Parses a body as one JSON value.
///
/// # Errors
///
/// [`ApiError::BadJson`] for an empty body or one that is not JSON.
pub(crate) fn parse_json(bytes: &[u8]) -> Result<Value, ApiError> {
    not_empty(bytes)?;
    serde_json::from_slice(bytes).map_err(|e| ApiError::BadJson {
        message: e.to_string(),
    })
}

/// Refuses a body of nothing but whitespace.
fn not_empty(bytes: &[u8]) -> Result<(), ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::BadJson {
            message: "the body is empty (allowed: one JSON value, such as {})".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_body_that_never_ends_times_out() {
        let gate = BodyGate::new(1024, 1, Duration::from_secs(5));
        let (_tx, body) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(1);
        let stream = tokio_stream_of(body);
        let err = gate
            .json_bytes(Body::from_stream(stream))
            .await
            .unwrap_err();
        assert!(matches!(err, ApiError::BodyTimeout { .. }), "{err:?}");
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_too_large_and_the_permit_comes_back() {
        let gate = BodyGate::new(4, 1, Duration::from_secs(5));
        let err = gate.bytes(Body::from("[1, 2, 3]")).await.unwrap_err();
        assert!(matches!(err, ApiError::TooLarge { limit: 4 }), "{err:?}");
        assert_eq!(&gate.bytes(Body::from("[1]")).await.unwrap().0[..], b"[1]");
    }

    #[tokio::test(start_paused = true)]
    async fn parsing_beyond_the_bound_waits_for_a_permit_reading_does_not() {
        let gate = BodyGate::new(1024, 1, Duration::from_secs(60));
        let (bytes, permit) = gate.bytes(Body::from("{}")).await.unwrap();
        assert_eq!(&bytes[..], b"{}");
        // A slow upload holds no permit while it is read.
        let (_tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(1);
        let slow = tokio::spawn({
            let gate = gate.clone();
            async move { gate.bytes(Body::from_stream(tokio_stream_of(rx))).await }
        });
        let second = tokio::spawn({
            let gate = gate.clone();
            async move { gate.bytes(Body::from("[1]")).await.map(|(b, _)| b) }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!second.is_finished(), "the second waits for the permit");
        drop(permit);
        assert_eq!(&second.await.unwrap().unwrap()[..], b"[1]");
        // Still reading: the runtime drops it when the test ends.
        assert!(!slow.is_finished());
    }

    fn tokio_stream_of(
        mut rx: tokio::sync::mpsc::Receiver<Result<bytes::Bytes, std::io::Error>>,
    ) -> impl futures_util::Stream<Item = Result<bytes::Bytes, std::io::Error>> {
        futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
    }
}
