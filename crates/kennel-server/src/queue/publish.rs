//! HTTP into the queue: `POST /pools/{name}/jobs` on a queued pool records
//! the job ([`super::record`]) and publishes it to the stream, its id as
//! its `Nats-Msg-Id`; the synchronous route then waits on the stored
//! answer, whichever instance ran it; an asynchronous job is answered 202
//! at once.

use std::time::Duration;

use async_nats::HeaderMap;
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rand::Rng;

use super::away::Away;
use super::record::Record;
use super::{DELIVERY, INSTANCE, JOB_ID, MSG_ID, Source};
use crate::ApiError;

/// How long a job handed to the connection is published again until the
/// stream confirms it stored it (within the stream's duplicate window).
const CONFIRM_FOR: Duration = Duration::from_secs(15);

/// The job bytes and key of a request, as the route checked them.
type Job = (kennel_process::JsonBytes<bytes::Bytes>, Option<kennel::Key>);

impl Source {
    /// Records job `id` as queued and publishes it (with its key, already
    /// checked, in a `Kennel-Key` header); `false` when job `id` had a
    /// record already (nothing is published).
    ///
    /// # Errors
    ///
    /// [`ApiError::QueueUnavailable`] when the job was not stored (the
    /// connection is down: nothing is kept to send later, so it never
    /// runs), [`ApiError::QueueUnconfirmed`] when it was handed to the
    /// connection but the stream did not confirm storing it, published
    /// again for 15 s (it may run),
    /// [`ApiError::TooLarge`] when it is over the server's `max_payload`.
    async fn enqueue(&self, id: &str, (job, key): Job) -> Result<bool, ApiError> {
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
        // The job's bytes as they came (checked JSON), not written again.
        let (bytes, span) = job.into_parts();
        let body = bytes.slice(span);
        let limit = self.client.server_info().max_payload;
        if body.len() + super::HEADROOM > limit {
            return Err(ApiError::TooLarge { limit });
        }
        if !self.record_queued(id).await.map_err(|e| unavailable(&e))? {
            return Ok(false);
        }
        let mut headers = HeaderMap::new();
        headers.insert(MSG_ID, id);
        if let Some(key) = &key {
            headers.insert(super::KEY, key.as_str());
        }
        // Published again (the same `Nats-Msg-Id`: the stream keeps one)
        // until the stream confirms it, for up to CONFIRM_FOR.
        let mut away = Away::for_(CONFIRM_FOR);
        let mut first = true;
        loop {
            let published = self
                .js
                .publish_with_headers(self.config.subject.clone(), headers.clone(), body.clone())
                .await;
            let failed = match published {
                Ok(stored) => match stored.await {
                    Ok(_) => return Ok(true),
                    Err(e) => e.to_string(),
                },
                Err(e) if first => {
                    // Never handed over: no job to record.
                    let _ = self.jobs.purge(super::record::key(id)).await;
                    return Err(unavailable(&e));
                }
                Err(e) => e.to_string(),
            };
            first = false;
            away.wait(failed)
                .await
                .map_err(|message| ApiError::QueueUnconfirmed {
                    id: id.to_owned(),
                    message,
                })?;
        }
    }

    /// Records and publishes `job`, then waits for its stored answer: the
    /// body and status the instance that ran it stored, with `Retry-After`,
    /// `Kennel-Job-Id` (`http-<32 hex digits>`), `Kennel-Instance` and
    /// `Kennel-Delivery` as headers. An error answer that knows the job's
    /// id carries it too.
    ///
    /// The errors of [`enqueue`](Self::enqueue), and
    /// [`ApiError::QueueTimeout`] when the answer is not stored within
    /// `reply_timeout`.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future (the client hung up) does not take the job back:
    /// once stored, it runs and its answer is kept for `GET /jobs/{id}`.
    pub(crate) async fn submit(&self, job: Job) -> Response {
        let id = format!("http-{:032x}", rand::rng().random::<u128>());
        let with_id = |mut response: Response| {
            if let Ok(v) = HeaderValue::from_str(&id) {
                response.headers_mut().insert(JOB_ID, v);
            }
            response
        };
        if let Err(e) = self.enqueue(&id, job).await {
            return e.into_response();
        }
        let after = self.config.reply_timeout.0;
        let Ok(record) = tokio::time::timeout(after, self.wait_end(&id)).await else {
            return with_id(
                ApiError::QueueTimeout {
                    after,
                    id: id.clone(),
                }
                .into_response(),
            );
        };
        with_id(answer(record))
    }

    /// Records and publishes `job` as an asynchronous job; its id. With an
    /// `Idempotency-Key`, the id is a digest of the pool and the key, and a
    /// job already recorded under it is not published again.
    ///
    /// # Errors
    ///
    /// Those of [`enqueue`](Self::enqueue).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped midway, the job may or may not be stored.
    pub(crate) async fn submit_async(
        &self,
        job: Job,
        idempotency: Option<&str>,
    ) -> Result<String, ApiError> {
        let id = match idempotency {
            Some(k) => {
                let mut named = self.name.clone().into_bytes();
                named.push(0);
                named.extend_from_slice(k.as_bytes());
                format!("idem-{}", super::record::digest(&named))
            }
            None => format!("job-{:032x}", rand::rng().random::<u128>()),
        };
        self.enqueue(&id, job).await?;
        Ok(id)
    }
}

/// The HTTP answer of a job that is over, from its record.
fn answer(record: Record) -> Response {
    let status = record
        .status
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::OK);
    let body = record
        .answer
        .map(|a| a.get().to_owned())
        .unwrap_or_default();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let named = [
        (header::RETRY_AFTER.as_str(), record.retry_after),
        (INSTANCE, record.instance),
        (DELIVERY, Some(record.attempts.to_string())),
    ];
    for (name, value) in named {
        if let Some(v) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
            headers.insert(name, v);
        }
    }
    response
}
