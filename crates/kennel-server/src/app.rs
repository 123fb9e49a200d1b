//! `app(state) -> Router`: the HTTP routes of the service, as the table in
//! docs/SERVICE.md, "Endpoints", lists them. Before any route runs, a
//! request with a `Host` not allowed, or a browser's cross-site request, is
//! answered 403 ([`crate::http::host`]).

use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};

use crate::error::ApiError;
use crate::http::front;
use crate::state::AppState;

/// The router of the service, over `state`'s pools. A job whose client
/// hangs up leaves the queue, or finishes if it runs (docs/SERVICE.md,
/// "What happens to a job whose client hangs up").
pub fn app(state: AppState) -> Router {
    Router::new()
        .route("/pools", get(crate::ops::pools::list_pools))
        .route("/pools/{name}/jobs", post(crate::jobs::pool_job))
        .route("/pools/{name}/stats", get(crate::ops::pools::pool_stats))
        .route(
            "/pools/{name}/workers",
            get(crate::ops::workers::pool_workers),
        )
        .route("/pools/{name}/dead", get(crate::queue::dead::pool_dead))
        .route(
            "/pools/{name}/config",
            get(crate::ops::config_get::pool_config_get).put(crate::ops::pools::pool_config),
        )
        .route("/groups/{group}/jobs", post(crate::jobs::group_job))
        .route(
            "/jobs/{id}",
            get(crate::async_jobs::get_job).delete(crate::async_jobs::cancel_job),
        )
        .route("/jobs/{id}/events", get(crate::async_jobs::job_events))
        .route(
            "/mcp/{name}",
            post(crate::mcp::post)
                .get(crate::mcp::open_stream)
                .delete(crate::mcp::end),
        )
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
