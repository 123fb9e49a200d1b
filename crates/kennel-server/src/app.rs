//! `app(state) -> Router`: the HTTP routes of the service.
//!
//! | method and path | does |
//! | --- | --- |
//! | `POST /pools/{name}/jobs` | runs the JSON body as one job on a worker of the pool; answers the worker's JSON reply |
//! | `POST /groups/{group}/jobs` | the same on a random pool of the group that can lend at once |
//! | `GET /pools` | every pool: name, group, stats, health |
//! | `GET /pools/{name}/stats` | one pool's stats and health |
//! | `GET /pools/{name}/config` | the live config of a pool, in the shape `PUT` takes |
//! | `PUT /pools/{name}/config` | changes a live pool (sizing, eviction, limits, group); answers the actions taken |
//! | `GET /pools/{name}/workers` | one row per slot of a pool: state, pid, jobs, ages, memory, retirement due |
//! | `GET /readyz` | 200 when every pool can serve (not broken, not closed, no job waiting without a worker on its way), 503 otherwise (no token needed) |
//! | `GET /healthz` | the same as `/readyz` |
//! | `GET /livez` | 200 while the process answers (no token needed) |
//! | `GET /metrics` | Prometheus text |
//! | `GET /events` | server-sent events of every pool (`?pool=NAME` for one, `?since=ID` or `Last-Event-ID` to replay) |
//! | `POST /reload` | reads the config file again and applies what changed (as `SIGHUP`) |
//! | `GET /` | the status page (no token needed; its requests ask for it) |
//! | `GET /openapi.json` | the OpenAPI description of these routes |
//!
//! Before any route runs, a request with a `Host` not allowed, or a
//! browser's cross-site request, is answered 403 ([`crate::http::host`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};

use axum::Router;
use axum::body::Body;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::HeaderMap;
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use kennel::Pool;
use kennel_process::{Coprocess, Progress, StderrTail};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};
use tower_http::trace::{DefaultOnFailure, TraceLayer};

use crate::error::{ApiError, with_last_words};
use crate::ops::openapi::ErrorBody;
use crate::segment::Segment;
use crate::state::AppState;
use crate::stream::Answer;
use crate::watch::{Watch, last_words};

/// The routes that never ask for the bearer token: the probes.
const PROBES: [&str; 3] = ["/livez", "/readyz", "/healthz"];

/// The router of the service, over `state`'s pools.
///
/// A job's request is the body's JSON and its reply the worker's JSON. A
/// client that hangs up while its job waits for a worker leaves the queue;
/// one that hangs up while its job runs lets the job finish, so that a
/// costly worker is not killed for it (the pool's `job_timeout` still
/// bounds it).
pub fn app(state: AppState) -> Router {
    let limit = state.body_limit();
    Router::new()
        .route("/pools", get(crate::ops::pools::list_pools))
        .route("/pools/{name}/jobs", post(pool_job))
        .route("/pools/{name}/stats", get(crate::ops::pools::pool_stats))
        .route(
            "/pools/{name}/config",
            get(crate::ops::config_get::pool_config_get).put(crate::ops::pools::pool_config),
        )
        .route("/groups/{group}/jobs", post(group_job))
        .route("/readyz", get(crate::ops::probes::readyz))
        .route("/healthz", get(crate::ops::probes::healthz))
        .route("/livez", get(crate::ops::probes::livez))
        .route("/metrics", get(crate::metrics::render))
        .route("/events", get(crate::sse::events))
        .route("/reload", post(crate::reload::route))
        .merge(crate::ops::routes())
        .fallback(|| async { ApiError::NotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(middleware::from_fn_with_state(state.clone(), auth))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::http::host::guard,
        ))
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn(crate::metrics::track))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::logs::access,
        ))
        .layer(
            TraceLayer::new_for_http()
                .on_failure(DefaultOnFailure::new().level(tracing::Level::DEBUG)),
        )
        .with_state(state)
}

/// Asks for the bearer token, when one is set, on every route but the
/// probes.
async fn auth(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if let Some(token) = state.token()
        && !PROBES.contains(&request.uri().path())
        && request.uri().path() != crate::ops::page::PATH
    {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer);
        if !given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes())) {
            return ApiError::Unauthorized.into_response();
        }
    }
    next.run(request).await
}

/// The token of an `Authorization` value of the `Bearer` scheme, whose
/// name is case-insensitive (RFC 9110, 11.1).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Compares without an early exit on the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Reads a JSON body, mapping a body over the limit to 413 and bad JSON to
/// 400.
///
/// # Errors
///
/// [`ApiError::TooLarge`] or [`ApiError::BadJson`].
pub fn json_body(body: Result<Bytes, BytesRejection>, limit: usize) -> Result<Value, ApiError> {
    let bytes = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::TooLarge { limit }
        } else {
            ApiError::BadJson {
                message: e.body_text(),
            }
        }
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::BadJson {
            message: "the body is empty (allowed: one JSON value, such as {})".into(),
        });
    }
    serde_json::from_slice(&bytes).map_err(|e| ApiError::BadJson {
        message: e.to_string(),
    })
}

/// The pool named `name`: 501 when there is no pool at all, 404 when this
/// one is not there.
pub(crate) fn pool_named(state: &AppState, name: &str) -> Result<Pool<Coprocess>, ApiError> {
    state.registry().get(name).map_err(|e| {
        if state.registry().list().is_empty() {
            ApiError::NotSupported
        } else {
            e.into()
        }
    })
}

enum Target {
    Pool(Pool<Coprocess>),
    Group(kennel::Group<Coprocess>),
}

/// Runs one job and answers the worker's reply.
///
/// The job runs on a task of its own: when the client hangs up, the handler
/// is dropped; the task then drops the job if it still waits (it leaves the
/// queue) and lets it finish if it runs. A pool with `retry_on_crash` runs
/// it through [`Pool::run_idempotent`]. An error about a worker that ended
/// carries its last words: the worker's under the job, or (for a broken
/// pool) the one whose start failed last, from `watch`.
async fn run_job(
    target: Target,
    request: Value,
    watch: Option<Watch>,
    progress: Option<mpsc::Sender<Progress>>,
) -> Result<Box<RawValue>, ApiError> {
    let (reply_tx, reply_rx) = oneshot::channel();
    let (gone_tx, gone_rx) = oneshot::channel::<()>();
    let tail: Arc<std::sync::Mutex<Option<StderrTail>>> = Arc::default();
    let seen = tail.clone();
    tokio::spawn(async move {
        let started = Arc::new(AtomicBool::new(false));
        let flag = started.clone();
        let job = async move |w: &mut Coprocess| {
            flag.store(true, Ordering::SeqCst);
            *seen.lock().unwrap_or_else(PoisonError::into_inner) = Some(w.stderr_tail());
            w.request_with_progress(&request, |p| {
                if let Some(tx) = &progress {
                    // A client that reads too slowly misses items, never the reply.
                    let _ = tx.try_send(p);
                }
            })
            .await
        };
        let run = async move {
            match target {
                Target::Pool(pool) if pool.options().retry_on_crash > 0 => {
                    pool.run_idempotent(job).await
                }
                Target::Pool(pool) => pool.run(job).await,
                Target::Group(group) => group.run(job).await,
            }
        };
        tokio::pin!(run);
        tokio::select! {
            biased;
            r = &mut run => {
                let _ = reply_tx.send(r);
            }
            _ = gone_rx => {
                if started.load(Ordering::SeqCst) {
                    let _ = run.await;
                }
            }
        }
    });
    let result = reply_rx.await;
    drop(gone_tx);
    match result {
        Ok(Ok(Ok(reply))) => Ok(reply),
        Ok(Ok(Err(e))) => Err(e.into()),
        Ok(Err(e @ kennel::Error::Crashed { .. })) => {
            let tail = tail.lock().unwrap_or_else(PoisonError::into_inner).clone();
            Err(with_last_words(e, last_words(tail.as_ref()).await))
        }
        Ok(Err(e @ kennel::Error::WarmupFailed { slot, .. })) => {
            let tail = watch.and_then(|w| w.tail_of(slot));
            Err(with_last_words(e, last_words(tail.as_ref()).await))
        }
        Ok(Err(e @ kennel::Error::Unavailable { .. })) => {
            let words = watch.map(|w| w.last_failed_words()).unwrap_or_default();
            Err(with_last_words(e, words))
        }
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(ApiError::Internal {
            detail: "the job's task ended without a reply".into(),
        }),
    }
}

/// `POST /pools/{name}/jobs`: the body (JSON, or bytes as base64: see
/// [`crate::payload`]) is the job; the answer is the worker's reply as it
/// wrote it, or the progress then the reply for a client that streams
/// ([`crate::stream`]).
#[utoipa::path(
    post,
    path = "/pools/{name}/jobs",
    tag = "jobs",
    params(("name" = String, Path, description = "the pool's name")),
    request_body(content = Value, description = "the job: a JSON value handed to the worker as its request, or bytes (an upload, sent to the worker as base64; see SERVICE.md)"),
    responses(
        (status = 200, description = "the worker's reply as it wrote it; a client that asks for `text/event-stream` or `application/x-ndjson` gets the job's progress, then the reply", body = Value),
        (status = 400, description = "the body is not JSON or is empty (`bad-json`)", body = ErrorBody),
        (status = 404, description = "no pool of this name (`no-such-pool`)", body = ErrorBody),
        (status = 413, description = "the body is over `body_limit` (`too-large`)", body = ErrorBody),
        (status = 500, description = "the worker replied with an error (`worker-error`)", body = ErrorBody),
        (status = 501, description = "no pool is configured (`not-supported`)", body = ErrorBody),
        (status = 502, description = "the worker ended, failed its warm-up or broke the protocol (`crashed`, `warmup-failed`, `protocol`), with its last words", body = ErrorBody),
        (status = 503, description = "rejected (`rejected`, with `Retry-After`), the workers keep failing to start (`unavailable`), or the pool is closed (`closed`)", body = ErrorBody),
        (status = 504, description = "the job ran past `job_timeout` (`timeout`)", body = ErrorBody),
    )
)]
pub(crate) async fn pool_job(
    State(state): State<AppState>,
    Segment(name): Segment,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let pool = match pool_named(&state, &name) {
        Ok(pool) => pool,
        Err(e) => return e.into_response(),
    };
    let upload = state.upload_limit(&name);
    let request = match state.bodies().job(&headers, body, upload).await {
        Ok(request) => request,
        Err(e) => return e.into_response(),
    };
    if let Some(queue) = state.queues().get(&name) {
        return queue
            .submit(&request)
            .await
            .unwrap_or_else(IntoResponse::into_response);
    }
    let watch = state.watch(&name);
    crate::stream::respond(Answer::of(&headers), move |progress| async move {
        run_job(Target::Pool(pool.clone()), request, watch, progress)
            .await
            .map_err(|e| e.retry_after_projected(pool.projected_wait()))
    })
    .await
}

/// Runs the body as one job on a random pool of the group that can lend at
/// once.
#[utoipa::path(
    post,
    path = "/groups/{group}/jobs",
    tag = "jobs",
    params(("group" = String, Path, description = "the group's name")),
    request_body(content = Value, description = "the job: any JSON value"),
    responses(
        (status = 200, description = "the worker's JSON reply", body = Value),
        (status = 400, description = "the body is not JSON (`bad-json`)", body = ErrorBody),
        (status = 404, description = "no pool is in this group (`no-such-group`)", body = ErrorBody),
        (status = 500, description = "the worker replied with an error (`worker-error`)", body = ErrorBody),
        (status = 501, description = "no pool is configured (`not-supported`)", body = ErrorBody),
        (status = 502, description = "the worker ended, failed its warm-up or broke the protocol", body = ErrorBody),
        (status = 503, description = "no pool of the group can lend now (`no-members`, with `Retry-After`)", body = ErrorBody),
        (status = 504, description = "the job ran past `job_timeout` (`timeout`)", body = ErrorBody),
    )
)]
pub(crate) async fn group_job(
    State(state): State<AppState>,
    Segment(group): Segment,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let registry = state.registry();
    if registry.list().is_empty() {
        return ApiError::NotSupported.into_response();
    }
    let group = registry.group(&group);
    if group.pools().is_empty() {
        return ApiError::NoSuchGroup {
            group: group.name().to_owned(),
        }
        .into_response();
    }
    let request = match state.bodies().json(body).await {
        Ok(request) => request,
        Err(e) => return e.into_response(),
    };
    crate::stream::respond(Answer::of(&headers), move |progress| {
        run_job(Target::Group(group), request, None, progress)
    })
    .await
}
