//! HTTP into the queue: `POST /pools/{name}/jobs` on a queued pool
//! publishes the job to the stream with a fresh inbox as its reply subject,
//! and answers the result, whichever instance ran it.

use async_nats::HeaderMap;
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use futures_util::StreamExt;
use rand::Rng;

use super::{DELIVERY, INSTANCE, JOB_ID, MSG_ID, REPLY_TO, STATUS, Source};
use crate::ApiError;

impl Source {
    /// Publishes `job` (with its key, already checked, in a `Kennel-Key`
    /// header) to the stream and waits for its answer: the body
    /// and status the instance that ran it published, with `Retry-After`
    /// and `Kennel-Job-Id` (the message id, `http-<32 hex digits>`) as
    /// headers.
    ///
    /// # Errors
    ///
    /// [`ApiError::QueueUnavailable`] when the job was not published (the
    /// connection is down: nothing is kept to send later, so it never
    /// runs), [`ApiError::QueueUnconfirmed`] when it was handed to the
    /// connection but the stream did not confirm storing it (it may run),
    /// [`ApiError::TooLarge`] when it is over the server's `max_payload`,
    /// [`ApiError::QueueTimeout`] when no answer comes within
    /// `reply_timeout`.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future (the client hung up) does not take the job back:
    /// once stored, it runs and its answer goes to an inbox nobody reads.
    pub(crate) async fn submit(
        &self,
        job: kennel_process::JsonBytes<bytes::Bytes>,
        key: Option<kennel::Key>,
    ) -> Result<Response, ApiError> {
        let unavailable = |e: &dyn std::fmt::Display| ApiError::QueueUnavailable {
            message: e.to_string(),
        };
        // Published while the connection is down, a job would wait in the
        // client's buffer and run once it is back, after its caller was
        // told 503: a 503 means it will not run.
        if self.is_disconnected() {
            return Err(unavailable(
                &"the NATS server is not connected; the job was not stored and will not run",
            ));
        }
        let inbox = self.client.new_inbox();
        // Subscribed before publishing, so that no answer comes before.
        let mut answers = self
            .client
            .subscribe(inbox.clone())
            .await
            .map_err(|e| unavailable(&e))?;
        // The job's bytes as they came (checked JSON), not written again.
        let (bytes, span) = job.into_parts();
        let body = bytes.slice(span);
        let limit = self.client.server_info().max_payload;
        if body.len() + super::HEADROOM > limit {
            return Err(ApiError::TooLarge { limit });
        }
        let id = format!("http-{:032x}", rand::rng().random::<u128>());
        let mut headers = HeaderMap::new();
        headers.insert(MSG_ID, id.as_str());
        headers.insert(REPLY_TO, inbox.as_str());
        if let Some(key) = &key {
            headers.insert(super::KEY, key.as_str());
        }
        let stored = self
            .js
            .publish_with_headers(self.config.subject.clone(), headers, body)
            .await
            .map_err(|e| unavailable(&e))?;
        stored.await.map_err(|e| ApiError::QueueUnconfirmed {
            id: id.clone(),
            message: e.to_string(),
        })?;
        let after = self.config.reply_timeout.0;
        let answer = tokio::time::timeout(after, answers.next())
            .await
            .map_err(|_| ApiError::QueueTimeout { after })?
            .ok_or_else(|| unavailable(&"the connection to the NATS server closed"))?;
        let header = |name: &str| super::header(answer.headers.as_ref(), name);
        let status = header(STATUS)
            .and_then(|s| s.parse::<u16>().ok())
            .and_then(|s| StatusCode::from_u16(s).ok())
            .unwrap_or(StatusCode::OK);
        let mut response = Response::new(Body::from(answer.payload));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Ok(v) = HeaderValue::from_str(&id) {
            headers.insert(JOB_ID, v);
        }
        for name in ["Retry-After", INSTANCE, DELIVERY] {
            if let Some(v) = header(name).and_then(|v| HeaderValue::from_str(&v).ok()) {
                headers.insert(name, v);
            }
        }
        Ok(response)
    }
}
