//! Dead letters: a message given up on (terminated after `max_deliver`
//! deliveries, a job past `job_timeout`, one that is not JSON or whose key
//! breaks a rule) is kept with its last error and its deliveries in a
//! JetStream stream of its own, [`DEAD_STREAM`] (subject
//! `kennel.dead.<pool>`, the newest [`DEAD_PER_POOL`] of each pool for
//! [`DEAD_MAX_AGE`]), where `GET /pools/{name}/dead` lists them, and
//! `kennel_jetstream_terminated_total` counts them by reason.

use std::time::Duration;

use async_nats::jetstream::Context;
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, pull};
use async_nats::jetstream::stream::{self, DiscardPolicy, RetentionPolicy, StorageType};
use axum::Json;
use axum::extract::{Query, State};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::Source;
use crate::error::ApiError;
use crate::ops::openapi::ErrorBody;
use crate::segment::Segment;
use crate::state::AppState;

/// The stream that keeps every pool's dead letters.
pub(crate) const DEAD_STREAM: &str = "KENNEL_DEAD";

/// The most dead letters kept per pool (the oldest go first).
pub(crate) const DEAD_PER_POOL: i64 = 1000;

/// How long a dead letter is kept.
pub(crate) const DEAD_MAX_AGE: Duration = Duration::from_secs(14 * 24 * 3600);

/// The most dead letters one `GET /pools/{name}/dead` lists.
pub(crate) const LIST_MOST: usize = 100;

/// The subject of pool `pool`'s dead letters.
pub(crate) fn subject(pool: &str) -> String {
    format!("kennel.dead.{pool}")
}

/// The dead-letter stream: found, or made when the queue may make streams
/// (`create`).
///
/// # Errors
///
/// What JetStream said.
pub(super) async fn stream(js: &Context, create: bool) -> Result<stream::Stream, String> {
    if !create {
        return js.get_stream(DEAD_STREAM).await.map_err(|e| e.to_string());
    }
    js.get_or_create_stream(stream::Config {
        name: DEAD_STREAM.to_owned(),
        description: Some("kennel's dead letters: jobs given up on, with their last error".into()),
        subjects: vec!["kennel.dead.>".to_owned()],
        retention: RetentionPolicy::Limits,
        storage: StorageType::File,
        max_messages_per_subject: DEAD_PER_POOL,
        max_age: DEAD_MAX_AGE,
        discard: DiscardPolicy::Old,
        ..Default::default()
    })
    .await
    .map_err(|e| e.to_string())
}

/// A job given up on, as the dead-letter stream keeps it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub(crate) struct DeadLetter {
    /// The job's id (its `Nats-Msg-Id`, else `<stream>:<sequence>`).
    pub id: String,
    /// The pool.
    pub pool: String,
    /// How many times it was delivered.
    pub deliveries: u64,
    /// Why it was given up on: `max-deliver`, `timeout`, `bad-json`, …
    #[schema(example = "max-deliver")]
    pub reason: String,
    /// Its last error, as the job route answers it.
    #[schema(value_type = ErrorBody)]
    pub error: Value,
    /// The job as it was published (left out when not UTF-8, or when
    /// keeping it would pass the server's `max_payload`).
    pub job: Option<String>,
    /// When it was given up on (RFC 3339, UTC).
    pub at: String,
    /// The instance that gave up on it.
    pub instance: String,
}

/// The answer of `GET /pools/{name}/dead`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub(crate) struct DeadBody {
    /// The pool's name.
    pub pool: String,
    /// Its newest dead letters, oldest first (at most `limit`, 100).
    pub dead: Vec<DeadLetter>,
}

impl Source {
    /// Keeps a job given up on in the dead-letter stream (logged when it
    /// cannot be).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped midway, the letter may or may not be kept.
    pub(super) async fn bury(&self, mut letter: DeadLetter) {
        let Some(dead) = &self.dead else {
            return;
        };
        let limit = self
            .client
            .server_info()
            .max_payload
            .saturating_sub(super::HEADROOM);
        let mut body = serde_json::to_vec(&letter).unwrap_or_default();
        if body.len() > limit {
            letter.job = None;
            body = serde_json::to_vec(&letter).unwrap_or_default();
        }
        let published = async {
            self.js
                .publish(subject(&self.name), body.into())
                .await
                .map_err(|e| e.to_string())?
                .await
                .map_err(|e| e.to_string())
        };
        if let Err(e) = published.await {
            tracing::warn!(target: "kennel_server", pool = %self.name, id = %letter.id, stream = %dead.cached_info().config.name, error = %e, "cannot keep a dead letter");
        }
    }

    /// The newest `limit` dead letters of this pool, oldest first.
    ///
    /// # Errors
    ///
    /// What JetStream said.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads (its consumer expires on its own).
    async fn dead_letters(&self, limit: usize) -> Result<Vec<DeadLetter>, String> {
        let Some(dead) = &self.dead else {
            return Ok(Vec::new());
        };
        let subject = subject(&self.name);
        let held = dead
            .info_with_subjects(&subject)
            .await
            .map_err(|e| e.to_string())?
            .next()
            .await
            .transpose()
            .map_err(|e| e.to_string())?
            .map_or(0, |(_, n)| n);
        if held == 0 {
            return Ok(Vec::new());
        }
        // An ephemeral consumer of this pool's subject that reads them all
        // once (at most DEAD_PER_POOL), keeping the newest.
        let consumer = dead
            .create_consumer(pull::Config {
                filter_subject: subject,
                deliver_policy: DeliverPolicy::All,
                ack_policy: AckPolicy::None,
                inactive_threshold: Duration::from_secs(30),
                ..Default::default()
            })
            .await
            .map_err(|e| e.to_string())?;
        let mut batch = consumer
            .fetch()
            .max_messages(held.min(DEAD_PER_POOL as usize))
            .expires(Duration::from_secs(2))
            .messages()
            .await
            .map_err(|e| e.to_string())?;
        let mut letters = std::collections::VecDeque::new();
        while let Some(message) = batch.next().await {
            let message = message.map_err(|e| e.to_string())?;
            if let Ok(letter) = serde_json::from_slice::<DeadLetter>(&message.payload) {
                if letters.len() == limit {
                    letters.pop_front();
                }
                letters.push_back(letter);
            }
        }
        Ok(letters.into())
    }
}

/// `?limit=N`: how many to list.
#[derive(Debug, Deserialize)]
pub(crate) struct DeadQuery {
    limit: Option<usize>,
}

/// A queued pool's dead letters: the jobs it gave up on, newest last (a
/// pool without a queue has none).
#[utoipa::path(
    get,
    path = "/pools/{name}/dead",
    tag = "pools",
    params(
        ("name" = String, Path, description = "the pool's name"),
        ("limit" = Option<usize>, Query, description = "the most to list (default and at most 100)"),
    ),
    responses(
        (status = 200, description = "its newest dead letters, oldest first (none for a pool without `[pool.queue]`)", body = DeadBody),
        (status = 404, description = "no pool of this name (`no-such-pool`)", body = ErrorBody),
        (status = 503, description = "the queue's server cannot be read (`queue-unavailable`)", body = ErrorBody),
    )
)]
pub(crate) async fn pool_dead(
    State(state): State<AppState>,
    Segment(pool): Segment,
    query: Result<Query<DeadQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<DeadBody>, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::BadRequest {
        message: format!("{} (allowed: limit, a number)", e.body_text()),
    })?;
    crate::jobs::pool_named(&state, &pool)?;
    let Some(source) = state.queue(&pool) else {
        // A pool without a queue gives up on no message: a job's end is
        // its answer, or `GET /jobs/{id}` for an asynchronous one.
        return Ok(Json(DeadBody {
            pool,
            dead: Vec::new(),
        }));
    };
    let limit = query.limit.unwrap_or(LIST_MOST).clamp(1, LIST_MOST);
    let dead = source
        .dead_letters(limit)
        .await
        .map_err(|message| ApiError::QueueUnavailable { message })?;
    Ok(Json(DeadBody { pool, dead }))
}
