//! The routes of asynchronous jobs: the 202 of `POST /pools/{name}/jobs`
//! with `Prefer: respond-async`, `GET /jobs/{id}`, `DELETE /jobs/{id}`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use std::convert::Infallible;

use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use kennel::Key;
use kennel_process::JsonBytes;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::broadcast;

use std::sync::Arc;

use super::MAX_STORED_JOBS;
use super::store::{JobRecord, JobState};
use crate::error::ApiError;
use crate::ops::openapi::ErrorBody;
use crate::queue::Source;
use crate::queue::record::Record;
use crate::segment::Segment;
use crate::state::AppState;

/// The header that names a job for its client: a second POST with the same
/// one, on the same pool, gets the first job.
const IDEMPOTENCY_HEADER: &str = "idempotency-key";

/// Whether the client asks for an asynchronous job (`Prefer:
/// respond-async`, RFC 7240).
pub(crate) fn prefers_async(headers: &HeaderMap) -> bool {
    headers
        .get_all("prefer")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|p| p.trim().eq_ignore_ascii_case("respond-async"))
}

/// An `Idempotency-Key`: 1 to 256 bytes of printable ASCII, as a job's key.
fn idempotency(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(IDEMPOTENCY_HEADER) else {
        return Ok(None);
    };
    let text = value.to_str().ok().filter(|t| {
        !t.is_empty() && t.len() <= 256 && t.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
    });
    match text {
        Some(t) => Ok(Some(t.to_owned())),
        None => Err(ApiError::BadRequest {
            message: "Idempotency-Key is 1 to 256 bytes of printable ASCII".into(),
        }),
    }
}

/// Stores the job (in JetStream for a queued pool) and answers 202 with its
/// id and `Location`; a job whose `Idempotency-Key` the pool had already is
/// answered with that job.
pub(crate) async fn accept(
    state: &AppState,
    pool: &str,
    key: Option<Key>,
    request: JsonBytes<Bytes>,
    headers: &HeaderMap,
) -> Response {
    let idem = match idempotency(headers) {
        Ok(idem) => idem,
        Err(e) => return e.into_response(),
    };
    if let Some(queue) = state.queue(pool) {
        return match queue.submit_async((request, key), idem.as_deref()).await {
            Ok(id) => answer_202(&id),
            Err(e) => e.into_response(),
        };
    }
    let runner = match state.async_jobs().runner(state) {
        Ok(runner) => runner,
        Err(message) => return ApiError::Internal { detail: message }.into_response(),
    };
    let store = runner.store.clone();
    let (pool_name, body) = (pool.to_owned(), request.as_bytes().to_vec());
    let key_text = key.as_ref().map(|k| k.as_str().to_owned());
    // SQLite syncs each commit: off the runtime's threads.
    let accepted = tokio::task::spawn_blocking(move || {
        store.accept(
            &pool_name,
            key_text.as_deref(),
            idem.as_deref(),
            &body,
            MAX_STORED_JOBS,
        )
    })
    .await
    .unwrap_or_else(|e| Err(e.to_string()));
    let (id, new) = match accepted {
        Ok(Some(accepted)) => accepted,
        Ok(None) => {
            return ApiError::Internal {
                detail: format!("the job store holds its most jobs ({MAX_STORED_JOBS})"),
            }
            .into_response();
        }
        Err(message) => return ApiError::Internal { detail: message }.into_response(),
    };
    if new {
        runner.wake();
    }
    answer_202(&id)
}

/// The 202 of job `id`: its id and `Location`.
fn answer_202(id: &str) -> Response {
    let location = format!("/jobs/{id}");
    let body = serde_json::json!({"id": id, "location": location});
    let mut response = (StatusCode::ACCEPTED, axum::Json(body)).into_response();
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

/// A job as `GET /jobs/{id}` shows it.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct JobView {
    /// Its id.
    pub(crate) id: String,
    /// Its pool.
    pub(crate) pool: String,
    /// `queued`, `running`, `done`, `failed` or `cancelled`.
    pub(crate) state: String,
    /// How many times a worker took it.
    pub(crate) attempts: u32,
    /// When it was accepted, started and ended (RFC 3339, UTC).
    pub(crate) created: String,
    pub(crate) started: Option<String>,
    pub(crate) finished: Option<String>,
    /// Once done: the worker's reply as it wrote it.
    #[schema(value_type = Option<Object>)]
    pub(crate) result: Option<Box<RawValue>>,
    /// Once failed or cancelled: the error, as the job route would answer it.
    #[schema(value_type = Option<ErrorBody>)]
    pub(crate) error: Option<Value>,
}

fn time(ms: i64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_millis(at).to_string()
}

impl JobView {
    fn of(job: JobRecord) -> Self {
        Self {
            result: job
                .result
                .and_then(|r| String::from_utf8(r).ok())
                .and_then(|r| RawValue::from_string(r).ok()),
            error: job.error.and_then(|e| serde_json::from_str(&e).ok()),
            id: job.id,
            pool: job.pool,
            state: job.state.as_str().to_owned(),
            attempts: job.attempts,
            created: time(job.created_ms),
            started: job.started_ms.map(time),
            finished: job.finished_ms.map(time),
        }
    }
}

/// The job `id` of this server's store, if it is kept.
fn find(state: &AppState, id: &str) -> Result<JobRecord, ApiError> {
    let gone = || ApiError::NoSuchJob {
        id: id.chars().take(64).collect(),
    };
    if id.len() > 64 {
        return Err(gone());
    }
    let Some(runner) = state.async_jobs().existing(state) else {
        return Err(gone());
    };
    let runner = runner.map_err(|message| ApiError::Internal { detail: message })?;
    let job = runner
        .store
        .get(id)
        .map_err(|message| ApiError::Internal { detail: message })?;
    let ttl = state.async_jobs().result_ttl;
    let expired = |job: &JobRecord| {
        job.finished_ms.is_some_and(|f| {
            let ended = UNIX_EPOCH + Duration::from_millis(u64::try_from(f).unwrap_or(0));
            SystemTime::now()
                .duration_since(ended)
                .is_ok_and(|age| age > ttl)
        })
    };
    job.filter(|j| !expired(j)).ok_or_else(gone)
}

/// Where job `id` is kept: this server's store, or the records of a queued
/// pool (any instance's job).
enum Found {
    Here(JobRecord),
    Queued(Arc<Source>, Record),
}

/// Job `id`, from this server's store or, failing that, from the records
/// of each queued pool.
async fn locate(state: &AppState, id: &str) -> Result<Found, ApiError> {
    let missing = match find(state, id) {
        Ok(job) => return Ok(Found::Here(job)),
        Err(e @ ApiError::NoSuchJob { .. }) => e,
        Err(e) => return Err(e),
    };
    let mut unreachable = None;
    for source in state.queues() {
        match source.record(id).await {
            Ok(Some((record, _))) => return Ok(Found::Queued(source, record)),
            Ok(None) => {}
            Err(message) => unreachable = Some(ApiError::QueueUnavailable { message }),
        }
    }
    Err(unreachable.unwrap_or(missing))
}

impl Found {
    fn view(self, id: &str) -> JobView {
        match self {
            Self::Here(job) => JobView::of(job),
            Self::Queued(_, record) => record.view(id),
        }
    }
}

/// `GET /jobs/{id}`: where an asynchronous job stands.
#[utoipa::path(
    get,
    path = "/jobs/{id}",
    tag = "jobs",
    params(("id" = String, Path, description = "the job's id, as the 202 gave it")),
    responses(
        (status = 200, description = "the job: its state, attempts and times, and once done the worker's reply as it wrote it (`result`), once failed or cancelled its error", body = JobView),
        (status = 404, description = "no such job (never accepted, or ended longer ago than `result_ttl`): `no-such-job`", body = ErrorBody),
        (status = 503, description = "the job is not in this server's store and a queued pool's records cannot be read (`queue-unavailable`)", body = ErrorBody),
    )
)]
pub(crate) async fn get_job(State(state): State<AppState>, Segment(id): Segment) -> Response {
    match locate(&state, &id).await {
        Ok(found) => axum::Json(found.view(&id)).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /jobs/{id}/events`: the job's progress as it runs, then its end.
#[utoipa::path(
    get,
    path = "/jobs/{id}/events",
    tag = "jobs",
    params(("id" = String, Path, description = "the job's id")),
    responses(
        (status = 200, description = "server-sent events: a `progress` event per progress item of the worker's while the job runs (a watcher more than 64 behind misses some), then one `end` event whose data is the job as `GET /jobs/{id}` shows it; a job already over gives its `end` at once; a queued pool's job gives the progress items the instance running it tells", content_type = "text/event-stream"),
        (status = 404, description = "no such job: `no-such-job`", body = ErrorBody),
    )
)]
pub(crate) async fn job_events(State(state): State<AppState>, Segment(id): Segment) -> Response {
    match locate(&state, &id).await {
        Ok(Found::Here(_)) => {}
        Ok(Found::Queued(source, _)) => return queued_events(source, id).await,
        Err(e) => return e.into_response(),
    }
    let runner = match state.async_jobs().runner(&state) {
        Ok(runner) => runner,
        Err(detail) => return ApiError::Internal { detail }.into_response(),
    };
    // Watch first, then read: an end between the two still closes the
    // stream.
    let progress = runner.watch(&id);
    let job = match find(&state, &id) {
        Ok(job) => job,
        Err(e) => {
            runner.cancel_watch(&id);
            return e.into_response();
        }
    };
    let items = if job.state.is_final() {
        runner.cancel_watch(&id);
        None
    } else {
        Some(progress)
    };
    let events = futures_util::stream::unfold(
        (items, Some((state, id))),
        |(mut items, mut end)| async move {
            if let Some(rx) = items.as_mut() {
                loop {
                    match rx.recv().await {
                        Ok(p) => {
                            let event = Event::default()
                                .event("progress")
                                .data(p.to_json().to_string());
                            return Some((Ok::<_, Infallible>(event), (items, end)));
                        }
                        Err(broadcast::error::RecvError::Lagged(_)) => {}
                        Err(broadcast::error::RecvError::Closed) => break,
                    }
                }
            }
            let (state, id) = end.take()?;
            let data = match find(&state, &id) {
                Ok(job) => serde_json::to_string(&JobView::of(job)).unwrap_or_default(),
                Err(e) => e.body().to_string(),
            };
            Some((Ok(Event::default().event("end").data(data)), (None, None)))
        },
    );
    Sse::new(events).into_response()
}

/// `DELETE /jobs/{id}`: cancels a job: a queued one never runs; a running
/// one is cancelled on its worker (cancel before kill). A job already over
/// stays as it is.
#[utoipa::path(
    delete,
    path = "/jobs/{id}",
    tag = "jobs",
    params(("id" = String, Path, description = "the job's id")),
    responses(
        (status = 200, description = "the job after the cancel (`cancelled`, or the state it had already ended in)", body = JobView),
        (status = 404, description = "no such job: `no-such-job`", body = ErrorBody),
        (status = 503, description = "a queued pool's job whose record cannot be read or written (`queue-unavailable`)", body = ErrorBody),
    )
)]
pub(crate) async fn cancel_job(State(state): State<AppState>, Segment(id): Segment) -> Response {
    let job = match locate(&state, &id).await {
        Ok(Found::Here(job)) => job,
        Ok(Found::Queued(source, _)) => {
            return match source.cancel(&id).await {
                Ok(Some(record)) => axum::Json(record.view(&id)).into_response(),
                Ok(None) => ApiError::NoSuchJob {
                    id: id.chars().take(64).collect(),
                }
                .into_response(),
                Err(message) => ApiError::QueueUnavailable { message }.into_response(),
            };
        }
        Err(e) => return e.into_response(),
    };
    if !job.state.is_final() {
        let error =
            serde_json::json!({"error": "cancelled", "message": "cancelled by DELETE /jobs/{id}"});
        if let Ok(runner) = state.async_jobs().runner(&state) {
            let ended =
                runner
                    .store
                    .finish(&id, JobState::Cancelled, None, Some(&error.to_string()));
            if ended.unwrap_or(false) {
                runner.cancel(&id);
            }
        }
    }
    match find(&state, &id) {
        Ok(job) => axum::Json(JobView::of(job)).into_response(),
        Err(e) => e.into_response(),
    }
}

/// The events of a queued pool's job: its progress items as the instance
/// running it tells them, then one `end` once it is over.
async fn queued_events(source: Arc<Source>, id: String) -> Response {
    // Listening first, then reading: no end is missed between the two.
    let items = source
        .client()
        .subscribe(crate::queue::progress_subject(&id))
        .await
        .ok();
    let record = match source.record(&id).await {
        Ok(Some((record, _))) => record,
        Ok(None) => {
            return ApiError::NoSuchJob {
                id: id.chars().take(64).collect(),
            }
            .into_response();
        }
        Err(message) => return ApiError::QueueUnavailable { message }.into_response(),
    };
    let view_id = id.clone();
    let end: std::pin::Pin<Box<dyn Future<Output = Record> + Send>> = if record.state.is_final() {
        Box::pin(std::future::ready(record))
    } else {
        Box::pin(async move { source.wait_end(&id).await })
    };
    let events = futures_util::stream::unfold(
        (items, Some(end), view_id),
        |(mut items, end, id)| async move {
            let mut end = end?;
            let event = tokio::select! {
                biased;
                record = &mut end => {
                    let data = serde_json::to_string(&record.view(&id)).unwrap_or_default();
                    return Some((Ok::<_, Infallible>(Event::default().event("end").data(data)), (items, None, id)));
                }
                Some(item) = async { items.as_mut()?.next().await } => item,
            };
            let data = String::from_utf8_lossy(&event.payload).into_owned();
            let progress = Event::default().event("progress").data(data);
            Some((Ok(progress), (items, Some(end), id)))
        },
    );
    Sse::new(events).into_response()
}
