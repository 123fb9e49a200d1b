//! The probes: `GET /readyz` (and its older name `/healthz`) says whether
//! the service may take traffic (Kubernetes readiness), `GET /livez` whether
//! the process answers. None asks for the token.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::ops::openapi::{LiveBody, ReadyBody};
use crate::state::AppState;

/// 200 `{"status":"ok","pools":{name: "ready"}}` when there is a pool and
/// every pool is ready; 503 with `"status":"unavailable"` with no pool, and
/// while a pool is `warming` (it starts workers by itself, with an eager
/// startup or `min_idle`, and none has been ready yet), `broken` (its
/// crash-loop breaker holds it), `closed`, or `queue-down` (its JetStream
/// connection is down). A pool that starts workers only for jobs is ready
/// with none.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "probes",
    responses(
        (status = 200, description = "there is a pool and every pool is ready", body = ReadyBody),
        (status = 503, description = "no pool, or a pool is warming, broken, closed or queue-down", body = ReadyBody),
    )
)]
pub(crate) async fn readyz(State(state): State<AppState>) -> Response {
    let detail: serde_json::Map<String, Value> = (state.pools().lock().iter())
        .map(|(name, e)| {
            let word = if e.pool.is_closed() {
                "closed"
            } else if e.pool.stats().broken {
                "broken"
            } else if e.queue.as_ref().is_some_and(|q| q.is_disconnected()) {
                "queue-down"
            } else if e.pool.is_warming() {
                "warming"
            } else {
                "ready"
            };
            (name.clone(), Value::from(word))
        })
        .collect();
    // With no pool there is nothing to serve.
    let ready = !detail.is_empty() && detail.values().all(|w| w == "ready");
    let (status, word) = if ready {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
    };
    (status, Json(json!({ "status": word, "pools": detail }))).into_response()
}

/// The same as `/readyz`, for older probes.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "probes",
    responses(
        (status = 200, description = "there is a pool and every pool is ready", body = ReadyBody),
        (status = 503, description = "no pool, or a pool is warming, broken, closed or queue-down", body = ReadyBody),
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
