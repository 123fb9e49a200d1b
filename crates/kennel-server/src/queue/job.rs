//! One message: its job is claimed in its record ([`super::claim`]), runs
//! on the pool as an HTTP job would, with in-progress acks and beats while
//! it runs; its answer is stored in the record and published, then the
//! message is acked, nak'd or terminated ([`dispose`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_nats::HeaderMap;
use async_nats::jetstream::{self, AckKind};
use axum::body::Bytes;
use axum::http::header;
use axum::response::IntoResponse;
use kennel::Key;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::claim::Claim;
use super::outcome::{Disposition, dispose};
use super::record::Record;
use super::{
    DELIVERY, HEADROOM, INSTANCE, JOB_ID, KEY, META_KEY, MSG_ID, REPLY_TO, STATUS, Source,
};
use crate::ApiError;
use crate::async_jobs::JobState;
use crate::http::body::parse_json;
use crate::lock;
use crate::watch::{OnProgress, run_request};

/// Releases the message's credit once: when its job gets a worker, or when
/// it ends without one.
struct Unplaced {
    source: Arc<Source>,
    done: AtomicBool,
}

impl Unplaced {
    fn release(&self) {
        if !self.done.swap(true, Ordering::SeqCst) {
            lock(&self.source.counts).unplaced -= 1;
            self.source.wake.notify_one();
        }
    }
}

impl Drop for Unplaced {
    fn drop(&mut self) {
        self.release();
    }
}

/// What the message says of itself.
struct Delivery {
    /// The job's id: the publisher's `Nats-Msg-Id`, else
    /// `<stream>:<stream sequence>`. The same on every delivery.
    id: String,
    /// 1 for the first delivery.
    delivered: u64,
    /// Where the answer goes, if anywhere.
    reply_to: Option<String>,
}

/// Handles one message to its end: its job claimed ([`Source::claim`]),
/// run, its end stored in its record, its answer published, the message
/// disposed of. A job that is over already is not run again: its stored
/// answer is published again.
///
/// # Cancel safety
///
/// Not cancel safe: it runs on the source's task tracker to its end.
pub(super) async fn handle(source: Arc<Source>, message: jetstream::Message) {
    let unplaced = Arc::new(Unplaced {
        source: source.clone(),
        done: AtomicBool::new(false),
    });
    let Some(delivery) = delivery(&source, &message) else {
        // Not a JetStream delivery: nothing to ack or answer.
        drop(unplaced);
        source.metrics.held.decrement(1.0);
        return;
    };
    if delivery.delivered > 1 {
        source.metrics.redelivered.increment(1);
    }
    let (mut record, mut revision) = match source
        .claim(&delivery.id, delivery.delivered, &message)
        .await
    {
        Ok(Claim::Run(record, revision)) => (record, revision),
        Ok(Claim::Over(record)) => {
            drop(unplaced);
            source.metrics.deduplicated.increment(1);
            let body = record
                .answer
                .map(|a| Bytes::from(a.get().to_owned()))
                .unwrap_or_default();
            let status = record.status.unwrap_or(200);
            publish(&source, &delivery, status, record.retry_after, body).await;
            settle(&source, &message, &delivery, AckKind::Ack).await;
            return;
        }
        Err(e) => {
            drop(unplaced);
            tracing::warn!(target: "kennel_server", pool = %source.name, id = %delivery.id, error = %e, "cannot claim a job (its record cannot be read or written); it is delivered again later");
            source.metrics.naked("store-unavailable");
            let delay = source.config.nak_delay_after(delivery.delivered);
            settle(&source, &message, &delivery, AckKind::Nak(Some(delay))).await;
            return;
        }
    };
    let guard = source.running(&delivery.id);
    let started = Instant::now();
    let answer = match request(&source, &message, &delivery) {
        Ok((job, key)) => {
            let subject = progress_subject(&delivery.id);
            let job = run(&source, subject, job, key, unplaced.clone());
            let beats = Beats {
                id: &delivery.id,
                record: &mut record,
                revision: &mut revision,
            };
            with_progress(&source, &message, beats, &guard.token, job).await
        }
        Err(e) => Some(Err(e)),
    };
    drop(guard);
    unplaced.release();
    source.timed(started.elapsed().as_secs_f64());
    let Some(answer) = answer else {
        // Cancelled by DELETE /jobs/{id}: its record says so already.
        source.metrics.acked.increment(1);
        settle(&source, &message, &delivery, AckKind::Ack).await;
        return;
    };
    // A reply the server would refuse is replaced by an error it takes.
    let limit = source.client.server_info().max_payload;
    let answer = answer.and_then(|reply| {
        let body = reply.to_string();
        if body.len() + HEADROOM > limit {
            Err(ApiError::ReplyTooLarge {
                size: body.len(),
                limit,
            })
        } else {
            Ok(Bytes::from(body))
        }
    });
    let disposition = dispose(
        answer.as_ref().map(drop),
        delivery.delivered,
        &source.config,
    );
    let (status, retry_after, body) = match answer {
        Ok(body) => (200, None, body),
        Err(e) => error_body(e).await,
    };
    let id = delivery.id.as_str();
    let ack = match disposition {
        Disposition::Ack => {
            // Counted before its end is stored (what `GET /jobs/{id}` and a
            // waiting `POST` read) and its answer published: whoever has
            // the answer finds it counted.
            source.metrics.acked.increment(1);
            let ended = record.ended(None, status, retry_after.clone(), &body);
            source.store(id, &ended, revision).await;
            publish(&source, &delivery, status, retry_after, body).await;
            AckKind::Ack
        }
        Disposition::Term { reason } => {
            let letter = super::dead::DeadLetter {
                id: delivery.id.clone(),
                pool: source.name.clone(),
                deliveries: delivery.delivered,
                reason: reason.to_owned(),
                error: serde_json::from_slice(&body).unwrap_or(Value::Null),
                job: std::str::from_utf8(&message.payload)
                    .ok()
                    .map(str::to_owned),
                at: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
                instance: source.instance.to_string(),
            };
            // Counted as the acked one is; its dead letter kept after its
            // end is stored (a letter never names a job that could run
            // again) and before its answer is published.
            source.metrics.terminated(reason);
            let ended = record.ended(None, status, retry_after.clone(), &body);
            source.store(id, &ended, revision).await;
            source.bury(letter).await;
            publish(&source, &delivery, status, retry_after, body).await;
            AckKind::Term
        }
        Disposition::Nak { delay, reason } => {
            // Queued again for the next delivery (that one claims it).
            record.state = JobState::Queued;
            source.store(id, &record, revision).await;
            source.metrics.naked(reason);
            AckKind::Nak((!delay.is_zero()).then_some(delay))
        }
    };
    settle(&source, &message, &delivery, ack).await;
}

/// Hands a message back at once, unrun (the drain began): its record
/// notes the delivery, so that the next one does not wait for it.
///
/// # Cancel safety
///
/// Not cancel safe: dropped midway, the message waits out `ack_wait`.
pub(super) async fn hand_back(source: Arc<Source>, message: jetstream::Message) {
    if let Some(delivery) = delivery(&source, &message) {
        source.passed(&delivery.id, delivery.delivered).await;
    }
    if let Err(e) = message.ack_with(AckKind::Nak(None)).await {
        tracing::warn!(target: "kennel_server", pool = %source.name, error = %e, "cannot hand a message back");
    }
    source.metrics.naked("draining");
    source.metrics.held.decrement(1.0);
}

/// Acks, naks or terminates the message; the source may fetch again.
async fn settle(source: &Source, message: &jetstream::Message, delivery: &Delivery, ack: AckKind) {
    if let Err(e) = message.ack_with(ack).await {
        tracing::warn!(target: "kennel_server", pool = %source.name, id = %delivery.id, error = %e, "cannot acknowledge a message; it will be delivered again");
    }
    source.metrics.held.decrement(1.0);
    source.wake.notify_one();
}

/// The message's id, delivery count and reply subject; `None` for a
/// message that is not a JetStream delivery.
fn delivery(source: &Source, message: &jetstream::Message) -> Option<Delivery> {
    let info = message.info().ok()?;
    source.pending(info.pending);
    let header = |name: &str| super::header(message.headers.as_ref(), name);
    let reply_to = header(REPLY_TO)
        .filter(|s| {
            // Concrete, and not one of the server's own (`$JS.API…`,
            // `$SYS…`): a job cannot make kennel call the JetStream API.
            let ok = !s.starts_with('$') && super::config::is_subject(s);
            if !ok {
                tracing::warn!(target: "kennel_server", pool = %source.name, subject = %s, "a reply subject that is not one (allowed: a subject without wildcards, not starting with `$`); the answer goes to result_subject");
            }
            ok
        })
        .or_else(|| source.config.result_subject.clone());
    Some(Delivery {
        id: header(MSG_ID)
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| format!("{}:{}", info.stream, info.stream_sequence)),
        delivered: u64::try_from(info.delivered).unwrap_or(1).max(1),
        reply_to,
    })
}

/// The job: the message's JSON, with `_kennel` added to an object when
/// `job_meta` is on; and its key, from the `Kennel-Key` header or the
/// pool's pointer, checked as the HTTP route checks it.
fn request(
    source: &Source,
    message: &jetstream::Message,
    delivery: &Delivery,
) -> Result<(Value, Option<Key>), ApiError> {
    let payload = &message.payload;
    if payload.len() > source.body_limit {
        return Err(ApiError::TooLarge {
            limit: source.body_limit,
        });
    }
    let mut job = parse_json(payload)?;
    let header = super::header(message.headers.as_ref(), KEY);
    let key = lock(&source.keys).key(header.as_deref().map(str::as_bytes), Some(&job))?;
    if source.config.job_meta
        && let Value::Object(map) = &mut job
    {
        map.insert(
            META_KEY.into(),
            json!({ "id": delivery.id, "delivery": delivery.delivered }),
        );
    }
    Ok((job, key))
}

/// A running job's record, for its beats.
struct Beats<'a> {
    id: &'a str,
    record: &'a mut Record,
    revision: &'a mut u64,
}

/// Runs `job` while sending an in-progress ack, and a beat to its record,
/// every third of `ack_wait`; `None` when `cancel` fires first (the job
/// is dropped: the pool cancels it on its worker).
async fn with_progress<T>(
    source: &Source,
    message: &jetstream::Message,
    beats: Beats<'_>,
    cancel: &CancellationToken,
    job: impl Future<Output = T>,
) -> Option<T> {
    let every = source.config.progress_every();
    let mut tick = tokio::time::interval_at(Instant::now() + every, every);
    tokio::pin!(job);
    loop {
        tokio::select! {
            biased;
            () = cancel.cancelled() => return None,
            r = &mut job => return Some(r),
            _ = tick.tick() => {
                match message.ack_with(AckKind::Progress).await {
                    Ok(()) => source.metrics.progress.increment(1),
                    Err(e) => tracing::debug!(target: "kennel_server", pool = %source.name, error = %e, "an in-progress ack failed"),
                }
                source.beat(beats.id, beats.record, beats.revision).await;
            }
        }
    }
}

/// Runs one job on the pool, as `POST /pools/{name}/jobs` does without a
/// queue: through `run_idempotent` when the pool retries on a crash, and an
/// error about a worker that ended carries its last words. Its progress
/// items are told on `subject` ([`progress_subject`]), for
/// `GET /jobs/{id}/events` on any instance.
async fn run(
    source: &Source,
    subject: String,
    job: Value,
    key: Option<Key>,
    unplaced: Arc<Unplaced>,
) -> Result<Value, ApiError> {
    let pool = &source.pool;
    let (items, mut to_tell): (OnProgress, _) = tokio::sync::mpsc::channel(PROGRESS_BUFFER);
    let client = source.client.clone();
    // Told by a task of its own: the worker's reading never waits on NATS
    // (items past the buffer are dropped).
    let telling = tokio::spawn(async move {
        while let Some(item) = to_tell.recv().await {
            let _ = client
                .publish(subject.clone(), item.to_json().to_string().into())
                .await;
        }
    });
    let answer = run_request(
        pool,
        source.watch.as_ref(),
        job,
        key,
        move || unplaced.release(),
        Some(items),
    )
    .await
    .map_err(|e| e.retry_after_projected(pool.projected_wait()));
    // The sender is gone with the hook: the task ends once it told all.
    let _ = telling.await;
    answer
}

/// How many progress items of one job may wait to be told.
const PROGRESS_BUFFER: usize = 64;

/// The subject on which job `id`'s progress items are told.
pub(crate) fn progress_subject(id: &str) -> String {
    format!("kennel.progress.{}", super::record::key(id))
}

/// An error's HTTP answer: status, `Retry-After`, body, exactly as the HTTP
/// route sends it.
async fn error_body(error: ApiError) -> (u16, Option<String>, Bytes) {
    let response = error.into_response();
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get(header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap_or_default();
    (status, retry_after, body)
}

/// Publishes the answer to the delivery's reply subject, with its status,
/// job id, delivery and instance as headers. With no reply subject, the
/// answer is dropped (logged).
async fn publish(
    source: &Source,
    delivery: &Delivery,
    status: u16,
    retry_after: Option<String>,
    body: Bytes,
) {
    let Some(subject) = &delivery.reply_to else {
        tracing::debug!(target: "kennel_server", pool = %source.name, id = %delivery.id, status, "no reply subject: the answer is dropped");
        return;
    };
    let mut headers = HeaderMap::new();
    headers.insert(STATUS, status.to_string());
    headers.insert(JOB_ID, delivery.id.as_str());
    headers.insert(DELIVERY, delivery.delivered.to_string());
    headers.insert(INSTANCE, &*source.instance);
    if let Some(r) = retry_after {
        headers.insert("Retry-After", r);
    }
    if let Err(e) = source
        .client
        .publish_with_headers(subject.clone(), headers, body)
        .await
    {
        tracing::warn!(target: "kennel_server", pool = %source.name, id = %delivery.id, error = %e, "cannot publish an answer");
    }
}
