//! The routes that read and change pools, beside their jobs: `GET /pools`,
//! `GET /pools/{name}/stats` and `PUT /pools/{name}/config`.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use kennel::Stats;
use serde_json::{Value, json};

use crate::config::ReconfigBody;
use crate::error::ApiError;
use crate::jobs::pool_named;
use crate::ops::openapi::{ConfigActions, ErrorBody, PoolConfigBody, PoolList, PoolStatsBody};
use crate::segment::Segment;
use crate::state::AppState;

fn stats_json(stats: &Stats) -> Value {
    json!({
        "starting": stats.starting,
        "idle": stats.idle,
        "lent": stats.lent,
        "waiting": stats.waiting,
        "capacity": stats.capacity,
        "size": stats.size,
        "kept": stats.kept,
        "surging": stats.surging,
        "healthy": stats.is_healthy(),
    })
}

/// Every pool: name, group, stats and health.
#[utoipa::path(
    get,
    path = "/pools",
    tag = "pools",
    responses((status = 200, description = "every pool", body = PoolList))
)]
pub(crate) async fn list_pools(State(state): State<AppState>) -> Json<Value> {
    let pools: Vec<Value> = state
        .pools()
        .list()
        .into_iter()
        .map(|e| json!({ "name": e.name, "group": e.group, "stats": stats_json(&e.stats) }))
        .collect();
    Json(json!({ "pools": pools }))
}

/// One pool's stats and health.
#[utoipa::path(
    get,
    path = "/pools/{name}/stats",
    tag = "pools",
    params(("name" = String, Path, description = "the pool's name")),
    responses(
        (status = 200, description = "the pool's counts", body = PoolStatsBody),
        (status = 404, description = "no pool of this name (`no-such-pool`)", body = ErrorBody),
        (status = 501, description = "no pool is configured (`not-supported`)", body = ErrorBody),
    )
)]
pub(crate) async fn pool_stats(
    State(state): State<AppState>,
    Segment(name): Segment,
    axum::Extension(caller): axum::Extension<crate::tenants::Caller>,
) -> Result<Json<Value>, ApiError> {
    let pool = pool_named(&state, &name)?;
    let mut v = stats_json(&pool.stats());
    v["pool"] = name.into();
    let mine = |t: &kennel::TenantLoad| caller.tenant.is_none() || t.tenant == caller.tenant;
    let tenants: Vec<Value> = (pool.tenants().iter().filter(|t| mine(t)))
        .map(|t| {
            let name = t.tenant.as_ref().map(kennel::Tenant::as_str);
            json!({ "tenant": name, "waiting": t.waiting, "running": t.running })
        })
        .collect();
    v["tenants"] = tenants.into();
    Ok(Json(v))
}

/// Changes a live pool: a merge patch of its options, and a new sizing,
/// eviction or group.
#[utoipa::path(
    put,
    path = "/pools/{name}/config",
    tag = "pools",
    params(("name" = String, Path, description = "the pool's name")),
    request_body(content = PoolConfigBody, description = "the keys to change, as `GET` writes them"),
    responses(
        (status = 200, description = "the actions taken", body = ConfigActions),
        (status = 400, description = "not JSON (`bad-json`), or an unknown key or bad value (`bad-config`, naming the key)", body = ErrorBody),
        (status = 404, description = "no pool of this name (`no-such-pool`)", body = ErrorBody),
        (status = 413, description = "the body is over `body_limit` (`too-large`)", body = ErrorBody),
        (status = 501, description = "no pool is configured (`not-supported`)", body = ErrorBody),
        (status = 503, description = "the pool is closed (`closed`)", body = ErrorBody),
    )
)]
pub(crate) async fn pool_config(
    State(state): State<AppState>,
    Segment(name): Segment,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let pool = pool_named(&state, &name)?;
    let (bytes, _parsing) = state.bodies().bytes(body).await?;
    // Bad JSON is 400 bad-json; good JSON with a bad key or value is 400
    // bad-config naming the key.
    crate::http::body::parse_json(&bytes)?;
    // The body patches the live options: none may change in between.
    let _one_at_a_time = state.reconfig_lock();
    let body =
        ReconfigBody::from_json(&bytes, &pool.options()).map_err(|e| ApiError::BadConfig {
            message: if e.key.is_empty() {
                e.message
            } else {
                format!("`{}`: {}", e.key, e.message)
            },
        })?;
    let actions = state.reconfigure_pool(&name, &body)?;
    let actions: Vec<String> = actions.iter().map(ToString::to_string).collect();
    tracing::info!(target: "kennel_server", pool = %name, ?actions, "pool reconfigured");
    Ok(Json(json!({ "pool": name, "actions": actions })))
}
