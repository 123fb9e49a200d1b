//! The job routes, `POST /pools/{name}/jobs` and `POST /groups/{group}/jobs`:
//! a job's request is the body (JSON, or bytes: see [`crate::payload`]) and
//! its reply the worker's JSON, or its progress then the reply for a client
//! that streams ([`crate::stream`]).
//!
//! A client that hangs up while its job waits for a worker leaves the
//! queue; one that hangs up while its job runs lets the job finish, so that
//! a costly worker is not killed for it (the pool's `job_timeout` still
//! bounds it), unless the pool says `cancel_on_disconnect`: then the job
//! is cancelled on its worker (kept if it confirms within `cancel_grace`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use kennel::{Key, Pool, RunOptions};
use kennel_process::{Coprocess, JsonBytes, Progress, StderrTail};
use tokio::sync::mpsc;

use crate::error::ApiError;
use crate::job_key::KeyRules;
use crate::ops::openapi::ErrorBody;
use crate::segment::Segment;
use crate::state::AppState;
use crate::stream::Answer;
use crate::tenants::Caller;
use crate::watch::{Watch, pool_error};

/// The pool named `name`: 501 when there is no pool at all, 404 when this
/// one is not there.
pub(crate) fn pool_named(state: &AppState, name: &str) -> Result<Pool<Coprocess>, ApiError> {
    state.pools().get(name).map_err(|e| {
        if state.pools().is_empty() {
            ApiError::NotSupported
        } else {
            e.into()
        }
    })
}

enum Target {
    /// A pool, the job's key, tenant and priority, and where to find the
    /// pool's successor: a reload that replaced the pool closed it, and a
    /// job that no worker took yet runs on the new one.
    Pool(
        Pool<Coprocess>,
        RunOptions,
        Box<dyn Fn() -> Option<Pool<Coprocess>> + Send>,
    ),
    /// A group, and the job's tenant and priority.
    Group(crate::state::Group, RunOptions),
}

/// Runs one job in the handler's own task (a client that hangs up: see
/// [`FinishOnDrop`]) and answers the worker's reply, as
/// [`run_request`](crate::watch::run_request) does with a JSON value.
async fn run_job(
    target: Target,
    request: JsonBytes<Bytes>,
    watch: Option<Watch>,
    progress: Option<mpsc::Sender<Progress>>,
    cancel_on_disconnect: bool,
) -> Result<JsonBytes, ApiError> {
    let seen = Arc::new(Seen::default());
    let mark = seen.clone();
    // The job, made once per pool it is offered to.
    let job = move || {
        let (mark, request, progress) = (mark.clone(), request.clone(), progress.clone());
        async move |w: &mut Coprocess| {
            mark.started.store(true, Ordering::SeqCst);
            *mark.tail.lock().unwrap_or_else(PoisonError::into_inner) = Some(w.stderr_tail());
            match &progress {
                Some(tx) => {
                    // A client that reads too slowly misses items, never the reply.
                    let mut forward = |p| {
                        let _ = tx.try_send(p);
                    };
                    w.request_bytes(&request, Some(&mut forward)).await
                }
                None => w.request_bytes(&request, None).await,
            }
        }
    };
    let taken = seen.clone();
    let run: Running = Box::pin(async move {
        match target {
            Target::Pool(pool, options, successor) => {
                match run_on(&pool, options.clone(), job()).await {
                    // The pool closed before a worker took the job: a reload
                    // replaced it, and the job runs once, on the new pool.
                    Err(kennel::Error::Closed) if !taken.started.load(Ordering::SeqCst) => {
                        match successor().filter(|next| !next.is_closed()) {
                            Some(next) => run_on(&next, options, job()).await,
                            None => Err(kennel::Error::Closed),
                        }
                    }
                    other => other,
                }
            }
            Target::Group(group, options) => group.run(&options, job()).await,
        }
    });
    let mut finish = FinishOnDrop {
        run: Some(run),
        seen: seen.clone(),
        cancel: cancel_on_disconnect,
    };
    let result = finish.run.as_mut().expect("set above").await;
    finish.run = None;
    match result {
        Ok(Ok(reply)) => Ok(reply),
        Ok(Err(e)) => Err(e.into()),
        Err(e) => {
            let tail = seen
                .tail
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            Err(pool_error(e, tail, watch.as_ref()).await)
        }
    }
}

/// Runs `job` on `pool` with `options` (its key, tenant and priority), and
/// again on another worker after a crash when the pool's `retry_on_crash`
/// allows.
pub(crate) async fn run_on<R>(
    pool: &Pool<Coprocess>,
    options: RunOptions,
    job: impl AsyncFn(&mut Coprocess) -> R,
) -> Result<R, kennel::Error> {
    match pool.options().retry_on_crash {
        0 => pool.run_with(options, job).await,
        _ => pool.run_idempotent_with(options, job).await,
    }
}

/// The options of a job of `key`, of no tenant.
pub(crate) fn keyed(key: Option<Key>) -> RunOptions {
    key.map_or_else(RunOptions::new, |key| RunOptions::new().key(key))
}

/// A job's run: lent, then run on the worker.
type Running = Pin<
    Box<
        dyn Future<Output = Result<Result<JsonBytes, kennel_process::ProcessError>, kennel::Error>>
            + Send,
    >,
>;

/// What the handler learns of its job as it runs: whether a worker took
/// it, and that worker's last words.
#[derive(Default)]
struct Seen {
    started: AtomicBool,
    tail: std::sync::Mutex<Option<StderrTail>>,
}

/// Holds a job's run while the handler awaits it; dropped before the end
/// (the client hung up), it lets a job that a worker took finish on a task
/// of its own, so that a costly worker is not killed for it, and drops
/// one that still waits; with `cancel`, it drops a running job too (the
/// pool cancels it on its worker).
struct FinishOnDrop {
    run: Option<Running>,
    seen: Arc<Seen>,
    cancel: bool,
}

impl Drop for FinishOnDrop {
    fn drop(&mut self) {
        // Outside a runtime (it is shutting down) the job goes with it, as
        // every task does.
        if let Some(run) = self.run.take()
            && !self.cancel
            && self.seen.started.load(Ordering::SeqCst)
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                let _ = run.await;
            });
        }
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
    params(
        ("name" = String, Path, description = "the pool's name"),
        ("Prefer" = Option<String>, Header, description = "`respond-async`: store the job and answer 202 at once (see `GET /jobs/{id}`)"),
        ("Idempotency-Key" = Option<String>, Header, description = "with `Prefer: respond-async`: 1 to 256 bytes of printable ASCII; a second job with the same key on the same pool gets the first job instead"),
        ("Kennel-Key" = Option<String>, Header, description = "the job's key: it runs on a worker that holds it (1 to 256 bytes of printable ASCII, matching the pool's `key_pattern`); wins over the pool's `key` pointer into the body"),
    ),
    request_body(content = Value, description = "the job: a JSON value handed to the worker as its request, or bytes (an upload, sent to the worker as base64; see SERVICE.md)"),
    responses(
        (status = 200, description = "the worker's reply as it wrote it; a client that asks for `text/event-stream` or `application/x-ndjson` gets the job's progress, then the reply", body = Value),
        (status = 202, description = "with `Prefer: respond-async`: the job was stored and will run; the body is `{\"id\", \"location\"}` and `Location` is `/jobs/{id}` (an `Idempotency-Key` the pool had already answers that job's); or a notification job (`Kennel-Notify: true`, a JSON-RPC pool) was written to a worker; no reply is awaited"),
        (status = 400, description = "the body is not JSON or is empty (`bad-json`), the job's key (`Kennel-Key` header, or the pool's `key` pointer) breaks a rule (`bad-key`), or `Kennel-Priority` is not `low`, `normal` or `high` (`bad-request`)", body = ErrorBody),
        (status = 403, description = "a tenant's asynchronous job, or its job to a pool fed by a queue (`forbidden`)", body = ErrorBody),
        (status = 404, description = "no pool of this name (`no-such-pool`)", body = ErrorBody),
        (status = 413, description = "the body is over `body_limit` (`too-large`)", body = ErrorBody),
        (status = 500, description = "the worker replied with an error (`worker-error`)", body = ErrorBody),
        (status = 501, description = "no pool is configured (`not-supported`)", body = ErrorBody),
        (status = 502, description = "the worker ended, failed its warm-up or broke the protocol (`crashed`, `warmup-failed`, `protocol`), with its last words, or could not load the job's key (`load-failed`); on a queued pool, the instance running it went silent for `ack_wait` and the pool has no `retry_on_crash` (`interrupted`), or the reply is over NATS's `max_payload` (`reply-too-large`)", body = ErrorBody),
        (status = 409, description = "on a queued pool, the job was cancelled by `DELETE /jobs/{id}` while its caller waited (`cancelled`)", body = ErrorBody),
        (status = 503, description = "rejected (`rejected`, with `Retry-After`), the workers keep failing to start (`unavailable`), or the pool is closed (`closed`); on a queued pool, the job was not stored and will not run (`queue-unavailable`)", body = ErrorBody),
        (status = 429, description = "the caller's tenant is over its `max_queued` or `max_in_flight` (`tenant-limit`, with `Retry-After`: its own projected wait)", body = ErrorBody),
        (status = 504, description = "the job ran past `job_timeout` (`timeout`); on a queued pool, its answer was not stored within `reply_timeout` (`queue-timeout`) or the stream did not confirm storing it (`queue-unconfirmed`): it may still run, as the job `Kennel-Job-Id` names", body = ErrorBody),
    )
)]
pub(crate) async fn pool_job(
    State(state): State<AppState>,
    Segment(name): Segment,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let response = answer_pool_job(state, name.clone(), &caller, headers, body).await;
    crate::tenants::count_job(&caller, &name, response.status());
    response
}

/// The answer to a job of pool `name` sent by `caller`.
async fn answer_pool_job(
    state: AppState,
    name: String,
    caller: &Caller,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let pool = match pool_named(&state, &name) {
        Ok(pool) => pool,
        Err(e) => return e.into_response(),
    };
    // The pool's own `upload_limit`, else the `body_limit`.
    let upload = || {
        (state.pools().with(&name, |e| e.upload_limit))
            .flatten()
            .unwrap_or(state.body_limit())
    };
    let request = match state.bodies().job(&headers, body, upload).await {
        Ok(request) => request,
        Err(e) => return e.into_response(),
    };
    let (rules, cancel_on_disconnect) = (state.pools().with(&name, |e| {
        e.config
            .as_ref()
            .map(|c| (KeyRules::of(c), c.cancel_on_disconnect))
    }))
    .flatten()
    .unwrap_or_default();
    let key = match rules.of_request(&headers, &request) {
        Ok(key) => key,
        Err(e) => return e.into_response(),
    };
    let priority = match crate::tenants::priority(&headers) {
        Ok(priority) => priority,
        Err(e) => return e.into_response(),
    };
    if crate::async_jobs::prefers_async(&headers) {
        if let Err(e) = caller.refuse_detached("an asynchronous job") {
            return e.into_response();
        }
        return crate::async_jobs::accept(&state, &name, key, request, &headers).await;
    }
    // A tenant's `max_in_flight`, across every pool.
    let flight = match state.flights().enter(caller) {
        Ok(flight) => flight,
        Err(refused) => {
            let wait = pool.tenant_wait(refused.tenant());
            return refused.retry_in(wait).into_response();
        }
    };
    let watch = state.watch(&name);
    let options = caller.run_options(key.clone(), priority);
    if headers.get(NOTIFY).is_some_and(|v| v == "true") {
        return notify(pool, options, request, watch).await;
    }
    if let Some(queue) = state.queue(&name) {
        if let Err(e) = caller.refuse_detached("a job to a queued pool") {
            return e.into_response();
        }
        return queue.submit((request, key)).await;
    }
    let successor = {
        let state = state.clone();
        Box::new(move || state.pools().get(&name).ok())
    };
    crate::stream::respond(Answer::of(&headers), move |progress| async move {
        // Counted in flight until the job's answer is made.
        let _flight = flight;
        run_job(
            Target::Pool(pool.clone(), options, successor),
            request,
            watch,
            progress,
            cancel_on_disconnect,
        )
        .await
        .map_err(|e| e.retry_after_projected(pool.projected_wait()))
    })
    .await
}

/// The header that makes a JSON-RPC job a notification.
const NOTIFY: &str = "kennel-notify";

/// A notification job (`Kennel-Notify: true`, the body `{"method", "params"}`):
/// written to one of this instance's workers (never queued), answered 202
/// once written, to a worker that holds the job's key if it has one; no
/// reply is awaited.
async fn notify(
    pool: Pool<Coprocess>,
    options: RunOptions,
    request: JsonBytes<Bytes>,
    watch: Option<Watch>,
) -> Response {
    match pool
        .run_with(options, async |w: &mut Coprocess| {
            w.notify_bytes(&request).await
        })
        .await
    {
        Ok(Ok(())) => axum::http::StatusCode::ACCEPTED.into_response(),
        Ok(Err(e)) => ApiError::from(e).into_response(),
        Err(e) => pool_error(e, None, watch.as_ref()).await.into_response(),
    }
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
        (status = 400, description = "the body is not JSON (`bad-json`), or a `Kennel-Key` header was sent: a group job takes no key (`bad-key`)", body = ErrorBody),
        (status = 404, description = "no pool is in this group (`no-such-group`)", body = ErrorBody),
        (status = 500, description = "the worker replied with an error (`worker-error`)", body = ErrorBody),
        (status = 501, description = "no pool is configured (`not-supported`)", body = ErrorBody),
        (status = 502, description = "the worker ended, failed its warm-up or broke the protocol", body = ErrorBody),
        (status = 429, description = "the caller's tenant is over its `max_in_flight` (`tenant-limit`, with `Retry-After`)", body = ErrorBody),
        (status = 503, description = "no pool of the group can lend now (`no-members`, with `Retry-After`)", body = ErrorBody),
        (status = 504, description = "the job ran past `job_timeout` (`timeout`); on a queued pool, its answer was not stored within `reply_timeout` (`queue-timeout`) or the stream did not confirm storing it (`queue-unconfirmed`): it may still run, as the job `Kennel-Job-Id` names", body = ErrorBody),
    )
)]
pub(crate) async fn group_job(
    State(state): State<AppState>,
    Segment(group): Segment,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if state.pools().is_empty() {
        return ApiError::NotSupported.into_response();
    }
    let group = state.pools().group(&group);
    if group.pools.is_empty() {
        return ApiError::NoSuchGroup { group: group.name }.into_response();
    }
    // The group's pools hold their keys each: a key is refused rather than
    // dropped.
    if headers.contains_key(crate::job_key::KEY_HEADER) {
        return ApiError::BadKey {
            message: "a group job takes no key (allowed: Kennel-Key on POST /pools/{name}/jobs)"
                .into(),
        }
        .into_response();
    }
    let priority = match crate::tenants::priority(&headers) {
        Ok(priority) => priority,
        Err(e) => return e.into_response(),
    };
    let request = match state.bodies().json_bytes(body).await {
        Ok(request) => request,
        Err(e) => return e.into_response(),
    };
    // A tenant's `max_in_flight`; a group never queues, so a second.
    let flight = match state.flights().enter(&caller) {
        Ok(flight) => flight,
        Err(refused) => return refused.retry_in(Duration::from_secs(1)).into_response(),
    };
    let options = caller.run_options(None, priority);
    crate::stream::respond(Answer::of(&headers), move |progress| async move {
        let _flight = flight;
        run_job(
            Target::Group(group, options),
            request,
            None,
            progress,
            false,
        )
        .await
    })
    .await
}
