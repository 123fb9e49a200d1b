//! The probes: `GET /readyz` (and its older name `/healthz`) says whether
//! every pool can serve, `GET /livez` whether the process answers. None asks
//! for the token.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::ops::openapi::{LiveBody, ReadyBody};
use crate::state::AppState;

/// 200 `{"status":"ok","pools":{name: word}}` when every pool can serve,
/// 503 with `"status":"unavailable"` otherwise. A pool's word is `ready`,
/// `broken` (its crash-loop breaker holds it), `closed`, or `starved` (jobs
/// wait and no worker is on its way).
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "probes",
    responses(
        (status = 200, description = "every pool can serve", body = ReadyBody),
        (status = 503, description = "a pool is broken, closed or starved", body = ReadyBody),
    )
)]
pub(crate) async fn readyz(State(state): State<AppState>) -> Response {
    let pools = state.pools();
    let detail: serde_json::Map<String, Value> = pools
        .list()
        .iter()
        .map(|e| {
            let closed = pools.get(&e.name).map_or(true, |p| p.is_closed());
            let word = if closed {
                "closed"
            } else if e.stats.broken {
                "broken"
            } else if state.queue(&e.name).is_some_and(|q| q.is_disconnected()) {
                "queue-down"
            } else if !e.stats.is_healthy() {
                "starved"
            } else {
                "ready"
            };
            (e.name.clone(), Value::from(word))
        })
        .collect();
    // With no pool there is nothing to serve.
    let ready = !detail.is_empty() && detail.values().all(|w| w == "ready");
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = json!({ "status": if ready { "ok" } else { "unavailable" }, "pools": detail });
    (status, Json(body)).into_response()
}

/// The same as `/readyz`, for older probes.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "probes",
    responses(
        (status = 200, description = "every pool can serve", body = ReadyBody),
        (status = 503, description = "a pool is broken, closed or starved", body = ReadyBody),
    )
)]
pub(crate) async fn healthz(state: State<AppState>) -> Response {
    readyz(state).await
}

/// 200 `{"status":"ok"}`: the process answers. It looks at no pool, so
/// that a broken pool makes the service unready, never restarted for it.
#[utoipa::path(
    get,
    path = "/livez",
    tag = "probes",
    responses((status = 200, description = "the process answers", body = LiveBody))
)]
pub(crate) async fn livez() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}
