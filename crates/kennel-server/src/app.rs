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
//! | `GET /readyz` | readiness: 200 when there is a pool and every pool is ready; 503 with no pool, and while a pool is warming its first worker (an eager startup or `min_idle`), broken, closed or its queue down (no token needed) |
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

use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};

use crate::error::ApiError;
use crate::http::front;
use crate::state::AppState;

/// The router of the service, over `state`'s pools.
///
/// A job's request is the body's JSON and its reply the worker's JSON. A
/// client that hangs up while its job waits for a worker leaves the queue;
/// one that hangs up while its job runs lets the job finish, so that a
/// costly worker is not killed for it (the pool's `job_timeout` still
/// bounds it).
pub fn app(state: AppState) -> Router {
    Router::new()
        .route("/pools", get(crate::ops::pools::list_pools))
        .route("/pools/{name}/jobs", post(crate::jobs::pool_job))
        .route("/pools/{name}/stats", get(crate::ops::pools::pool_stats))
        .route(
            "/pools/{name}/workers",
            get(crate::ops::workers::pool_workers),
        )
        .route(
            "/pools/{name}/config",
            get(crate::ops::config_get::pool_config_get).put(crate::ops::pools::pool_config),
        )
        .route("/groups/{group}/jobs", post(crate::jobs::group_job))
        .route("/readyz", get(crate::ops::probes::readyz))
        .route("/healthz", get(crate::ops::probes::healthz))
        .route("/livez", get(crate::ops::probes::livez))
        .route("/metrics", get(crate::metrics::render))
        .route("/events", get(crate::sse::events))
        .route("/reload", post(crate::reload::route))
        .route("/", get(crate::ops::page::page))
        .route("/openapi.json", get(crate::ops::openapi::serve))
        .fallback(|| async { ApiError::NotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        // Every request passes `observe` (the access log, the metrics),
        // then `guard` (the Host and Origin guard, the token). Bodies are
        // read through the `BodyGate`, which holds `body_limit`, never
        // through axum's body extractors (whose limit is axum's own).
        .layer(from_fn_with_state(state.clone(), front::guard))
        .layer(from_fn_with_state(state.clone(), front::observe))
        .with_state(state)
}
